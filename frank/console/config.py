"""Console settings: a small TOML file in frank.paths.config_dir(), remembered between runs.

    theme = "frank-dark"          # or light / high-contrast / monochrome
    refresh_s = 1.0               # telemetry refresh (0.25-10 s)
    log_tail_lines = 12
    [keymap]                      # binding id -> key(s), e.g. engine.start = "ctrl+s"
    "engine.start" = "S"

Precedence: --theme flag > FRANK_THEME > file > default; NO_COLOR picks monochrome unless a theme is
named explicitly. A bad file (an unknown key too) is reported, each problem with its file, line and field
(frank.tomlfile), and the defaults are used, never a crash.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field, field_validator

from frank import paths, tomlfile
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
    if not path.is_file():
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


def choose_theme(flag: str | None, settings: Settings) -> tuple[str, str | None]:
    """The theme to use, and a problem message if the flag or FRANK_THEME named an unknown one."""
    for source, name in (("--theme", flag), ("FRANK_THEME", os.environ.get("FRANK_THEME"))):
        if name:
            resolved = themes.resolve(name)
            if resolved:
                return resolved, None
            return settings.theme, f"{source}: unknown theme {name!r} (themes: {', '.join(themes.ALIASES)})"
    if os.environ.get("NO_COLOR"):
        return "frank-monochrome", None
    return settings.theme, None


def save(settings: Settings) -> None:
    """Write the settings back (the theme chosen in the console is remembered)."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "# frank console settings (written by the console; edit freely)",
        f"theme = {json.dumps(settings.theme)}",
        f"refresh_s = {settings.refresh_s}",
        f"log_tail_lines = {settings.log_tail_lines}",
        "",
        "[keymap]",
    ]
    lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in sorted(settings.keymap.items())]
    paths.write_private(path, "\n".join(lines) + "\n")
