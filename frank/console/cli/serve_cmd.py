"""`frank serve --listen 127.0.0.1:PORT`: the console in a browser, through textual-serve.

Each browser tab gets its own `frank` console process (the same app as in a terminal, driven by Textual's
web driver), so everything the console can do is reachable from the page: it binds loopback unless told
otherwise, and another address needs `--allow-remote` (there is no login: anyone who reaches the port gets
the console). `--read-only` (here or before `serve`) serves a console that watches without acting.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from frank.errors import FrankError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="the console in a browser (textual-serve), on loopback by default")
    p.add_argument(
        "--listen",
        default="127.0.0.1:8566",
        metavar="HOST:PORT",
        help="address to bind (default 127.0.0.1:8566); a non-loopback host needs --allow-remote",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback address (no login: anyone who reaches it gets the console)",
    )
    p.add_argument(
        "--read-only", dest="serve_read_only", action="store_true", help="serve a console that watches without acting"
    )
    p.add_argument("--public-url", default=None, help="the URL browsers use, behind a proxy or tunnel")
    p.set_defaults(func=cmd_serve)


def listen_address(text: str, allow_remote: bool) -> tuple[str, int]:
    from frank.telemetry.export import is_loopback, parse_listen  # the exporter's: one parser for --listen

    try:
        host, port = parse_listen(text)
    except ValueError as exc:
        raise FrankError(str(exc)) from None
    if port == 0:
        raise FrankError(f"--listen {text!r}: pick a port (browsers need to know it)")
    if not allow_remote and not is_loopback(host):
        raise FrankError(
            f"--listen {text!r}: {host} is not a loopback address; the console has no login, so "
            f"anyone who reaches it could start and stop the engine. Use an SSH tunnel to "
            f"127.0.0.1, or pass --allow-remote (and consider --read-only)"
        )
    return host, port


def console_command(args: argparse.Namespace) -> str:
    """The command each browser session runs: this python, this frank, the same switches."""
    argv = [sys.executable, "-m", "frank.console.cli"]
    if args.read_only or args.serve_read_only:
        argv.append("--read-only")
    if args.profile:
        argv += ["--profile", args.profile]
    if args.theme:
        argv += ["--theme", args.theme]
    return shlex.join(argv)


def cmd_serve(args: argparse.Namespace) -> int:
    host, port = listen_address(args.listen, args.allow_remote)
    try:
        from textual_serve.server import Server
    except ImportError:
        raise FrankError("frank serve needs textual-serve: pip install 'frank[web]' (or `make setup`)") from None
    command = console_command(args)
    shown = f"[{host}]" if ":" in host else host
    title = "frank" + (" (read-only)" if "--read-only" in command else "")
    server = Server(command, host=host, port=port, title=title, public_url=args.public_url or f"http://{shown}:{port}")
    print(
        f"frank serve: http://{shown}:{port}  ({'read-only' if '--read-only' in command else 'full control'}; "
        f"Ctrl+C stops)",
        file=sys.stderr,
        flush=True,
    )
    server.serve()
    return 0
