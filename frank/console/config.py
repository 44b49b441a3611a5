"""Console settings: a small TOML file in frank.paths.config_dir(), remembered between runs.

    theme = "frank-dark"          # or light / high-contrast / monochrome
    refresh_s = 1.0               # telemetry refresh (0.25-10 s)
    log_tail_lines = 12
    [keymap]                      # binding id -> key(s), e.g. engine.start = "ctrl+s"
    "engine.start" = "S"

Precedence: --theme flag > FRANK_THEME > file > default; NO_COLOR picks monochrome unless a theme is
named explicitly. A bad file is reported (file and field) and the defaults are used, never a crash.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from frank import paths
from frank.console import themes

FILE_NAME = "console.toml"


@dataclass(frozen=True)
class Settings:
    theme: str = themes.DEFAULT_THEME
    refresh_s: float = 1.0
    log_tail_lines: int = 12
    keymap: dict[str, str] = field(default_factory=dict)


def config_path() -> Path:
    return paths.config_dir() / FILE_NAME


def load() -> tuple[Settings, list[str]]:
    """The settings from the file (defaults where absent) and a list of problems found in it."""
    path = config_path()
    problems: list[str] = []
    if not path.is_file():
        return Settings(), problems
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, OSError) as exc:
        return Settings(), [f"{path}: {exc}"]
    settings = Settings()
    theme = data.get("theme")
    if theme is not None:
        resolved = themes.resolve(theme) if isinstance(theme, str) else None
        if resolved:
            settings = replace(settings, theme=resolved)
        else:
            problems.append(f"{path}: theme: unknown theme {theme!r} (themes: {', '.join(themes.THEMES)})")
    refresh = data.get("refresh_s")
    if refresh is not None:
        if isinstance(refresh, (int, float)) and not isinstance(refresh, bool) and 0.25 <= refresh <= 10:
            settings = replace(settings, refresh_s=float(refresh))
        else:
            problems.append(f"{path}: refresh_s: expected a number of seconds from 0.25 to 10, got {refresh!r}")
    tail = data.get("log_tail_lines")
    if tail is not None:
        if isinstance(tail, int) and not isinstance(tail, bool) and 0 <= tail <= 200:
            settings = replace(settings, log_tail_lines=tail)
        else:
            problems.append(f"{path}: log_tail_lines: expected an integer 0-200, got {tail!r}")
    keymap = data.get("keymap", {})
    if isinstance(keymap, dict) and all(isinstance(v, str) for v in keymap.values()):
        settings = replace(settings, keymap=dict(keymap))
    else:
        problems.append(f'{path}: keymap: expected a table of binding id = "key"')
    return settings, problems


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
