"""The console's themes as Textual Theme objects, with domain colour variables (posting's way).

Widgets use `$frank-ok`, `$frank-warn`, `$frank-bad`, `$frank-idle`, `$frank-spark` in TCSS, so a theme
changes what the domain states look like without touching widget code. `monochrome` uses only black,
white and greys and is what the console picks under NO_COLOR (Textual also filters colour out then).
"""

from __future__ import annotations

from textual.theme import Theme

DEFAULT_THEME = "frank-dark"


def _vars(
    ok: str, warn: str, bad: str, idle: str, spark: str, heat_lo: str, heat_hi: str, border: str
) -> dict[str, str]:
    return {
        "frank-border": border,
        "frank-ok": ok,
        "frank-warn": warn,
        "frank-bad": bad,
        "frank-idle": idle,
        "frank-spark": spark,
        "frank-heat-lo": heat_lo,
        "frank-heat-hi": heat_hi,
        "footer-key-foreground": spark,
    }


THEMES: dict[str, Theme] = {
    "frank-dark": Theme(
        name="frank-dark",
        dark=True,
        primary="#5FA8D3",
        secondary="#7D8CC4",
        accent="#E0A458",
        warning="#E0A458",
        error="#E5625E",
        success="#6BBF59",
        foreground="#D8DEE9",
        background="#15181E",
        surface="#1C2028",
        panel="#242A35",
        variables=_vars("#6BBF59", "#E0A458", "#E5625E", "#6C7689", "#5FA8D3", "#2B3A4A", "#E5625E", "#3D4556"),
    ),
    "frank-light": Theme(
        name="frank-light",
        dark=False,
        primary="#1F5F99",
        secondary="#4B5B9B",
        accent="#A85D00",
        warning="#A85D00",
        error="#B3261E",
        success="#2E7D32",
        foreground="#1B1F24",
        background="#F7F7F4",
        surface="#EDEDE8",
        panel="#E0E0D8",
        variables=_vars("#2E7D32", "#A85D00", "#B3261E", "#6E7781", "#1F5F99", "#D9E4EE", "#B3261E", "#A7B0BA"),
    ),
    "frank-high-contrast": Theme(
        name="frank-high-contrast",
        dark=True,
        primary="#00FFFF",
        secondary="#FFFF00",
        accent="#FFFF00",
        warning="#FFFF00",
        error="#FF4040",
        success="#00FF00",
        foreground="#FFFFFF",
        background="#000000",
        surface="#000000",
        panel="#1A1A1A",
        variables=_vars("#00FF00", "#FFFF00", "#FF4040", "#C0C0C0", "#00FFFF", "#303030", "#FF4040", "#FFFFFF"),
    ),
    "frank-monochrome": Theme(
        name="frank-monochrome",
        dark=True,
        primary="#E0E0E0",
        secondary="#B0B0B0",
        accent="#FFFFFF",
        warning="#FFFFFF",
        error="#FFFFFF",
        success="#E0E0E0",
        foreground="#E0E0E0",
        background="#000000",
        surface="#0A0A0A",
        panel="#1E1E1E",
        variables=_vars("#E0E0E0", "#FFFFFF", "#FFFFFF", "#808080", "#E0E0E0", "#303030", "#FFFFFF", "#808080"),
    ),
}

# Short names accepted by --theme, the config file and the palette.
ALIASES = {
    "dark": "frank-dark",
    "light": "frank-light",
    "high-contrast": "frank-high-contrast",
    "hc": "frank-high-contrast",
    "monochrome": "frank-monochrome",
    "mono": "frank-monochrome",
}


def resolve(name: str | None) -> str | None:
    """A theme name or alias -> a registered theme name, or None if unknown."""
    if not name:
        return None
    name = ALIASES.get(name, name)
    return name if name in THEMES else None
