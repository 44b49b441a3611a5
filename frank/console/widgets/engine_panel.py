"""The engine panel: state, profile, pid, uptime, URL, start-to-ready time, knobs and how each applies."""

from __future__ import annotations

from typing import Any

from textual.markup import escape

from frank.console.widgets.base import Panel
from frank.console.widgets.fmt import secs
from frank.engine.kinds import KINDS

STATE_STYLE = {
    "ready": "$frank-ok",
    "starting": "$frank-warn",
    "stopping": "$frank-warn",
    "crashed": "$frank-bad",
    "stopped": "$frank-idle",
    "unknown": "$frank-idle",
}


def state_markup(state: str) -> str:
    return f"[bold {STATE_STYLE.get(state, '$frank-idle')}]● {escape(state)}[/]"


class EnginePanel(Panel):
    """Renders an engine status (the controller's) and the profile's knobs."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("engine", **kwargs)

    def show(
        self,
        status: Any | None,
        knobs: dict[str, Any] | None = None,
        *,
        busy: str = "",
        read_only: bool = False,
        compact: bool = False,
        next_profile: str = "",
    ) -> None:
        """`knobs`: name -> Knob (profile); values come from the status (or the profile's defaults)."""
        if status is None:
            self.set_markup("[$frank-idle]asking the controller…[/]")
            return
        state = getattr(status, "state", "unknown")
        lines = [
            state_markup(state)
            + (f"  [$frank-warn]{escape(busy)}…[/]" if busy and busy != state else "")
            + ("  [$frank-idle](read-only)[/]" if read_only else "")
        ]
        profile = getattr(status, "profile", None) or (f"{next_profile} (next start)" if next_profile else "–")
        pid = getattr(status, "pid", None)
        url = getattr(status, "url", None)
        kind = getattr(KINDS.get(getattr(status, "kind", None) or ""), "label", "")
        lines.append(
            f"[$frank-idle]profile[/] {escape(str(profile))}"
            + (f" [$frank-idle]({kind})[/]" if kind else "")
            + f"   [$frank-idle]pid[/] {pid or '–'}"
        )
        if url:
            lines.append(f"[$frank-idle]url[/] {escape(str(url))}")
        ready = getattr(status, "ready_s", None)
        uptime = getattr(status, "uptime_s", None)
        lines.append(f"[$frank-idle]up[/] {uptime_text(uptime)}   [$frank-idle]ready in[/] {secs(ready, 2)}")
        if state == "crashed":
            lines.append(f"[$frank-bad]{escape(_exit_text(status))}[/]")
        warning = getattr(status, "warning", None)
        if warning:  # the supervisor gone while the server runs, say
            lines.append(f"[$frank-warn]{escape(str(warning))}[/]")
        values = dict(getattr(status, "knobs", None) or {})
        if knobs:
            if not compact:
                lines.append("")
            for name, knob in knobs.items():
                value = values.get(name, getattr(knob, "default", None))
                how = "live" if not getattr(knob, "needs_restart", True) else "restart"
                lines.append(f"[$frank-idle]{escape(name)}[/] = [bold]{escape(str(value))}[/] [$frank-idle]({how})[/]")
        self.set_markup("\n".join(lines))


def uptime_text(seconds: float | None) -> str:
    """Seconds for the first minute, then whole minutes: the status is read every few seconds anyway, and
    a panel whose text changes is drawn again (the idle console's CPU)."""
    if seconds is None or seconds >= 3600:
        return secs(seconds)
    return f"{int(seconds)} s" if seconds < 60 else f"{int(seconds // 60)} min"


def _exit_text(status: Any) -> str:
    """The controller's exit info (returncode, signal, reason) as one line."""
    info = getattr(status, "exit", None) or {}
    if info.get("reason"):
        return str(info["reason"])
    if info.get("signal"):
        return f"crashed: killed by {info['signal']}"
    if info.get("returncode") is not None:
        return f"crashed: exit code {info['returncode']}"
    return "crashed: the engine died"
