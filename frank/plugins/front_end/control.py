"""ASGI middleware serving the front-end parts' live control on the vLLM API server.

    GET  /frank/parts          -> every API-server part's switch and counters, and every part's verdict on
                                  this vLLM (`compat`: verified versions, compatible, why not)
    GET  /frank/parts/NAME     -> one part
    POST /frank/parts/NAME     -> body {"enabled": true|false}; returns the part (409 for a part that stayed
                                  off because vLLM's internals differ from the verified code)
    POST /frank/parts/NAME/fault -> body {"fault": "NAME" | null}: a deliberate breakage the part knows, set
                                  or cleared (the revert loop's test breaks a served part with it)

Same token rule as the region cache's control (frank.plugins.control_asgi: X-Frank-Token =
FRANK_CONTROL_TOKEN; none set: all refused). Engine-core parts are set at start (their knob restarts the
engine): GET only, their counters read from the engine core. A part with a half in each process
(held-prompt) is switched here (its API-server half) and its GET adds the engine core's counters
(`engine_core`).
The profile adds it with `--middleware frank.plugins.front_end.control.PartsControlMiddleware`.
"""

from __future__ import annotations

import json
from typing import Any

from frank.plugins.compat import every_verdict
from frank.plugins.control_asgi import Receive, Reply, Scope, TokenControlMiddleware, read_body, read_enabled
from frank.plugins.front_end.switch import PartRefused

PREFIX = "/frank/parts"
ENGINE_CORE_PART = "block-hash-memo"
BOTH_PROCESSES_PART = "held-prompt"


def _utility(name: str) -> str:
    if name == ENGINE_CORE_PART:
        from frank.plugins.front_end.block_hash_memo import STATS_UTILITY
    else:
        from frank.plugins.front_end.held_prompt import STATS_UTILITY
    return STATS_UTILITY


async def _engine_core_stats(scope: Scope, name: str) -> tuple[int, dict[str, Any]]:
    """A part's engine-core counters, through vLLM's utility call to the engine core process."""
    client = getattr(getattr(scope.get("app"), "state", None), "engine_client", None)
    core = getattr(client, "engine_core", None)
    if core is None:
        return 503, {"error": "no engine client on this server"}
    try:
        return 200, await core.call_utility_async(_utility(name))
    except Exception as exc:  # an engine core without the plugin: the method is not there
        return 502, {"error": f"engine core: {type(exc).__name__}: {exc}"}


async def _set_fault(switch: Any, receive: Receive, method: str) -> Reply:
    if switch is None:
        return 404, {"error": "no live front-end part with faults here"}
    if method != "POST":
        return 405, {"error": "faults are set with POST"}
    try:
        body = json.loads(await read_body(receive) or b"{}")
    except ValueError as exc:
        return 400, {"error": f"body: {exc}"}
    fault = body.get("fault") if isinstance(body, dict) else None
    if not isinstance(body, dict) or "fault" not in body or not (fault is None or isinstance(fault, str)):
        return 400, {"error": 'body: expected {"fault": "NAME" | null}'}
    try:
        switch.set_fault(fault)
    except ValueError as exc:
        return 400, {"error": str(exc)}
    return 200, switch.snapshot()


class PartsControlMiddleware(TokenControlMiddleware):
    prefix = PREFIX
    what = "front-end part control"

    async def answer(self, scope: Scope, receive: Receive, path: str, method: str) -> Reply:
        from frank.plugins.front_end.metrics import api_server_switches

        switches = {s.name: s for s in api_server_switches()}
        if path == PREFIX:
            if method != "GET":
                return 405, {"error": f"method {method} not allowed on {path}"}
            # every part's verdict on this vLLM (compat.py), those acting in other processes too
            return 200, {"parts": [s.snapshot() for s in switches.values()], "compat": every_verdict()}
        name = path[len(PREFIX) + 1 :]
        if name.endswith("/fault"):
            return await _set_fault(switches.get(name[: -len("/fault")]), receive, method)
        switch = switches.get(name)
        if name == ENGINE_CORE_PART:
            if method != "GET":
                return 405, {"error": f"{name} is set at start (a restart knob): only GET"}
            return await _engine_core_stats(scope, name)
        if switch is None:
            return 404, {"error": f"no live front-end part {name!r} (live: {', '.join(switches)})"}
        if method == "GET":
            snap = switch.snapshot()
            if name == BOTH_PROCESSES_PART:
                code, snap["engine_core"] = await _engine_core_stats(scope, name)
                if code != 200:
                    return code, snap
            return 200, snap
        if method != "POST":
            return 405, {"error": f"method {method} not allowed on {path}"}
        enabled = await read_enabled(receive)
        if not isinstance(enabled, bool):
            return enabled
        try:
            switch.set_enabled(enabled)
        except PartRefused as exc:
            return 409, {**switch.snapshot(), "error": str(exc)}
        return 200, switch.snapshot()
