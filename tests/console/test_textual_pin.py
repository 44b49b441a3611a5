"""The console copies private Textual internals (frank/console/compositor.py, frank/console/driver.py): they
hold only for the release they were written against, so another release fails here, with the reason."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version

import pytest

from frank.console import compositor, driver
from frank.paths import REPO_ROOT


@pytest.mark.parametrize("module", [compositor, driver], ids=lambda m: m.__name__)
def test_the_private_textual_copies_match_the_installed_textual(module) -> None:
    installed = version("textual")
    assert installed == module.WRITTEN_AGAINST, (
        f"{module.__name__} copies private internals of Textual {module.WRITTEN_AGAINST}, but Textual {installed} "
        f"is installed: compare the copy with {installed}'s source, mend it, then set WRITTEN_AGAINST"
    )


def test_the_pin_in_pyproject_is_the_release_the_copies_were_written_against() -> None:
    deps = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [m.group(1) for d in deps if (m := re.fullmatch(r"textual==(\S+)", d.split(";")[0].strip()))]
    assert pins == [compositor.WRITTEN_AGAINST] == [driver.WRITTEN_AGAINST], (
        f"pyproject.toml pins textual {pins}; the private copies were written against "
        f"{compositor.WRITTEN_AGAINST} (compositor) and {driver.WRITTEN_AGAINST} (driver)"
    )
