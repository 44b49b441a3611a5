"""`frank record --upstream URL --listen HOST:PORT --out DIR`: a recording OpenAI-compatible proxy.

Runs until Ctrl-C or SIGTERM; every chat-completions request answered through it is already on disk.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from frank.console.cli.common import emit_record
from frank.errors import FrankError


@dataclass(frozen=True)
class Recorded:
    """What one `frank record` session wrote."""

    workload: str
    draw: str
    recorded: int
    forwarded: int
    listen: str
    upstream: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("record", help="record agent requests through an OpenAI-compatible pass-through proxy")
    p.add_argument("--upstream", required=True, help="the server to forward to, e.g. http://127.0.0.1:8000")
    p.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT to listen on (default 127.0.0.1, any port)")
    p.add_argument("--out", type=Path, required=True, help="workload folder (each session adds a draw)")
    p.add_argument("--name", default=None, help="workload name for a new folder")
    p.add_argument("--api-key", default=None, help="key to add when the client sends none")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --listen address")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_record)


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise FrankError(f"--listen {value!r}: expected HOST:PORT, e.g. 127.0.0.1:8100")
    return host.strip("[]") or "127.0.0.1", int(port)


async def _serve(args: argparse.Namespace) -> Recorded:
    from frank.workloads.recorder import Recorder

    host, port = parse_listen(args.listen)
    rec = Recorder(args.upstream, args.out, host, port, args.name, args.api_key, args.allow_remote)
    try:
        await rec.start()
    except OSError as exc:
        await rec.close()
        raise FrankError(f"--listen {args.listen}: {exc.strerror or exc}") from exc
    print(
        f"frank record: {rec.url} -> {rec.upstream}; recording into {rec.out} ({rec.draw_name}); Ctrl-C to stop",
        file=sys.stderr,
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await rec.close()
    return Recorded(str(rec.out), rec.draw_name, rec.recorded, rec.forwarded, rec.url, rec.upstream)


def cmd_record(args: argparse.Namespace) -> int:
    result = asyncio.run(_serve(args))
    emit_record(args.json, result, lambda r: f"recorded {r.recorded} request(s) into {r.workload} ({r.draw})")
    return 0
