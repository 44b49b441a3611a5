"""The screens' compositor: Textual's, but a partial update renders only the widgets it can reach.

For a partial update Textual renders every widget whose clip (its container's visible region) overlaps the
changed area, so one changed row of the CPU panel made the dashboard fetch every panel, the header and
the footer again (from their caches, but line by line): a third of a repaint. A widget whose own visible
region misses the changed area adds nothing to the update, so it is left out here. Otherwise this is
Textual 8.2's `_get_renders`.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual._compositor import Compositor
from textual.geometry import Region
from textual.strip import Strip

# The Textual release whose private Compositor._get_renders this copies (tests/console/test_textual_pin.py):
# on another release, compare this with that release's _get_renders before changing the number.
WRITTEN_AGAINST = "8.2.8"


class FrankCompositor(Compositor):
    def _get_renders(self, crop: Region | None = None) -> Iterable[tuple[Region, Region, list[Strip]]]:
        if not crop:
            yield from super()._get_renders(crop)
            return
        overlaps = crop.overlaps
        for widget, (region, clip) in self.visible_widgets.items():
            visible = region.intersection(clip)
            if not overlaps(visible):
                continue
            if clip.contains_region(region):
                yield region, clip, widget.render_lines(Region(0, 0, region.width, region.height))
            else:
                x, y, width, height = visible
                if width and height:
                    yield region, clip, widget.render_lines(Region(x - region.x, y - region.y, width, height))
