"""The engine panel: state, profile, pid, uptime, URL, start-to-ready time, knobs and how each applies."""

from __future__ import annotations

from typing import Any

from textual.markup import escape

from frank.console.state import ReadingState, StartHint
from frank.console.widgets.base import Panel
from frank.console.widgets.fmt import secs
from frank.engine.controller import EngineStatus
from frank.engine.kinds import KINDS

STATE_STYLE: dict[ReadingState, str] = {
    "ready": "$frank-ok",
    "starting": "$frank-warn",
    "stopping": "$frank-warn",
    "crashed": "$frank-bad",
    "stopped": "$frank-idle",
    "unknown": "$frank-idle",
}


def state_markup(state: ReadingState) -> str:
    return f"[bold {STATE_STYLE.get(state, '$frank-idle')}]● {escape(state)}[/]"


class EnginePanel(Panel):
    """Renders an engine status (the controller's) and the profile's knobs."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("engine", **kwargs)

    def show(
        self,
        status: EngineStatus | None,
        knobs: dict[str, Any] | None = None,
        *,
        busy: str = "",
        read_only: bool = False,
        compact: bool = False,
        next_profile: str = "",
        start: StartHint | None = None,
    ) -> None:
        """`knobs`: name -> Knob (profile); values come from the status (or the profile's defaults)."""
        if status is None:
            self.set_markup("[$frank-idle]asking the controller…[/]")
            return
        state = status.state
        lines = [
            state_markup(state)
            + (f"  [$frank-warn]{escape(busy)}…[/]" if busy and busy != state else "")
            + ("  [$frank-idle](read-only)[/]" if read_only else "")
        ]
        profile = status.profile or (f"{next_profile} (next start)" if next_profile else "–")
        pid, url = status.pid, status.url
        kind = getattr(KINDS.get(status.kind or ""), "label", "")
        who = (
            f"[$frank-idle]profile[/] {escape(str(profile))}"
            + (f" [$frank-idle]({kind})[/]" if kind else "")
            + f"   [$frank-idle]pid[/] {pid or '–'}"
        )
        ready, uptime = status.ready_s, status.uptime_s
        times = f"[$frank-idle]up[/] {uptime_text(uptime)}   [$frank-idle]ready in[/] {secs(ready, 2)}"
        if state == "stopped" and not busy:  # the next step: what a start takes
            verb = "[bold]s[/] starts it" if not read_only else "a start"
            times = f"{verb}: {escape(expected_start(start))}"
        if compact:  # 80x24: the engine in two lines, so the tabbed panel below it shows whole
            lines[0] += "  " + who
            lines.append((f"{escape(str(url))}   " if url else "") + times)
        else:
            lines.append(who)
            if url:
                lines.append(f"[$frank-idle]url[/] {escape(str(url))}")
            lines.append(times)
        if state == "crashed":
            how = status.exit.describe() if status.exit is not None else "exit status unknown"
            lines.append(f"[$frank-bad]{escape(how)}[/]")
        warning = status.warning
        if warning:  # the supervisor gone while the server runs, say
            lines.append(f"[$frank-warn]{escape(str(warning))}[/]")
        for note in status.notes:  # what the launch resolved or warns of (a host left no core, say)
            lines.append(f"[$frank-warn]{escape(str(note))}[/]")
        values = dict(status.knobs)
        if knobs and compact:  # one flowing paragraph: name=value, the live ones marked
            shown = []
            for name, knob in knobs.items():
                value = values.get(name, getattr(knob, "default", None))
                live = " [$frank-idle](live)[/]" if not getattr(knob, "needs_restart", True) else ""
                shown.append(f"{escape(name)}=[bold]{escape(str(value))}[/]{live}")
            lines.append("[$frank-idle]knobs[/] " + " · ".join(shown))
        elif knobs:
            lines.append("")
            for name, knob in knobs.items():
                value = values.get(name, getattr(knob, "default", None))
                how = "live" if not getattr(knob, "needs_restart", True) else "restart"
                lines.append(f"[$frank-idle]{escape(name)}[/] = [bold]{escape(str(value))}[/] [$frank-idle]({how})[/]")
        self.set_markup("\n".join(lines))


def expected_start(start: StartHint | None) -> str:
    """How long a start of the next profile takes: its last start here, or what a first one takes."""
    if start is None:
        return "ready when /health answers"
    if start.last_ready_s is not None:
        return f"its last start here was ready in {secs(start.last_ready_s, 2)}"
    most = f"; at most {start.timeout_s:.0f} s" if start.timeout_s else ""
    if start.kind == "vllm":
        return f"a first start here takes a minute or more (vLLM loads its imports{most})"
    return f"a first start here: ready when /health answers{most}"


def uptime_text(seconds: float | None) -> str:
    """Seconds for the first minute, then whole minutes: the status is read every few seconds anyway, and
    a panel whose text changes is drawn again (the idle console's CPU)."""
    if seconds is None or seconds >= 3600:
        return secs(seconds)
    return f"{int(seconds)} s" if seconds < 60 else f"{int(seconds // 60)} min"
