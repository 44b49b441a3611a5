"""Console settings: a small TOML file in frank.paths.config_dir() that the user writes; frank only reads it.

    theme = "frank-dark"          # or light / high-contrast / monochrome
    refresh_s = 1.0               # telemetry refresh (0.25-10 s)
    log_tail_lines = 12
    [keymap]                      # binding id -> key(s), e.g. engine.start = "ctrl+s"
    "engine.start" = "S"

Precedence: --theme flag > FRANK_THEME > the theme last picked (t, or --theme) > file > default; NO_COLOR
picks monochrome unless a theme is named explicitly. The picked theme is remembered in frank's own state
file (console-state.json in the state dir), never in console.toml: a hand-edited file is read, never
rewritten. A pick is remembered over the file's theme as it stood when it was made: once the file's theme
is edited, the file wins again. A bad file (an unknown key too) is reported, each problem with its file,
line and field (frank.tomlfile), and the defaults are used, never a crash.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field, field_validator

from frank import paths, readfile, tomlfile
from frank.console import themes
from frank.errors import FrankError

FILE_NAME = "console.toml"


@dataclass(frozen=True)
class Settings:
    theme: str = themes.DEFAULT_THEME
    refresh_s: float = 1.0
    log_tail_lines: int = 12
    keymap: dict[str, str] = field(default_factory=dict)


def config_path() -> Path:
    return paths.config_dir() / FILE_NAME


class _Schema(tomlfile.Strict):
    theme: str = themes.DEFAULT_THEME
    refresh_s: float = Field(1.0, ge=0.25, le=10)
    log_tail_lines: int = Field(12, ge=0, le=200)
    keymap: dict[str, str] = Field(default_factory=dict)

    @field_validator("theme")
    @classmethod
    def _theme(cls, theme: str) -> str:
        resolved = themes.resolve(theme)
        if not resolved:
            raise ValueError(f"unknown theme {theme!r} (themes: {', '.join(themes.THEMES)})")
        return resolved


def load() -> tuple[Settings, list[str]]:
    """The settings from the file (defaults where absent), or the defaults and every problem found in it,
    each naming the file, the line and the field (an unknown key included)."""
    path = config_path()
    if not path.exists():
        return Settings(), []
    try:
        text = tomlfile.read_text(path, FrankError)
        data = tomlfile.parse(text, path, FrankError)
        lines = tomlfile.KeyLines(text)
        tomlfile.check_plain(data, path, lines, FrankError)
    except FrankError as exc:
        return Settings(), [str(exc)]
    schema, problems = tomlfile.refusals(_Schema, data, path, lines)
    if schema is None:
        return Settings(), [str(p) for p in problems]
    return Settings(schema.theme, float(schema.refresh_s), schema.log_tail_lines, dict(schema.keymap)), []


STATE_FILE = "console-state.json"  # in the state dir: what the console remembers (frank writes it, not you)


def state_path() -> Path:
    return paths.state_dir(create=False) / STATE_FILE


def remembered_theme(settings: Settings) -> str | None:
    """The theme last picked, while the file's theme is the one it was picked over; None otherwise."""
    try:
        state = readfile.read_object(state_path())
    except FrankError:
        return None
    theme = themes.resolve(str(state.get("theme") or ""))
    return theme if theme and state.get("over") == settings.theme else None


def remember_theme(theme: str, settings: Settings) -> None:
    """Remember a picked theme in the console's state file (console.toml is never written)."""
    paths.state_dir()  # created private to the user
    paths.write_private(state_path(), json.dumps({"theme": theme, "over": settings.theme}) + "\n")


def choose_theme(flag: str | None, settings: Settings) -> tuple[str, str | None]:
    """The theme to use, and a problem message if the flag or FRANK_THEME named an unknown one."""
    for source, name in (("--theme", flag), ("FRANK_THEME", os.environ.get("FRANK_THEME"))):
        if name:
            resolved = themes.resolve(name)
            if resolved:
                return resolved, None
            return remembered_theme(settings) or settings.theme, (
                f"{source}: unknown theme {name!r} (themes: {', '.join(themes.ALIASES)})"
            )
    if os.environ.get("NO_COLOR"):
        return "frank-monochrome", None
    return remembered_theme(settings) or settings.theme, None


def startup_theme(flag: str | None, settings: Settings, remember: bool = True) -> tuple[str, str | None]:
    """The theme a console starts with (`choose_theme`); a theme named by --theme is remembered too."""
    theme, problem = choose_theme(flag, settings)
    if flag and not problem and remember:
        try:
            remember_theme(theme, settings)
        except OSError:
            pass  # not remembered: this start still uses it
    return theme, problem
