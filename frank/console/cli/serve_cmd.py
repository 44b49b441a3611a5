"""`frank serve --listen 127.0.0.1:PORT`: the console in a browser, through textual-serve.

Each browser tab gets its own `frank` console process (the same app as in a terminal, driven by Textual's
web driver), so everything the console can do is reachable from the page: it binds loopback unless told
otherwise, and another address needs `--allow-remote`, which puts a login in front of it (a token, as
Jupyter's: frank.console.web_login) and takes a certificate and key for TLS. `--read-only` (here or before
`serve`) serves a console that watches without acting.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

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
        help="allow a non-loopback address, behind a token (generated, or --token-file) every request must carry",
    )
    p.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help="with --allow-remote: the token, from a file only you can read (0600); default: a new one",
    )
    p.add_argument("--tls-cert", type=Path, default=None, help="with --allow-remote: serve HTTPS with this certificate")
    p.add_argument("--tls-key", type=Path, default=None, help="the certificate's private key")
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
            f"--listen {text!r}: {host} is not a loopback address, where anyone who reaches it could start "
            f"and stop the engine. Use an SSH tunnel to 127.0.0.1, or pass --allow-remote (a login by token; "
            f"consider --read-only and --tls-cert/--tls-key)"
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
    if not args.allow_remote and (args.token_file or args.tls_cert or args.tls_key):
        raise FrankError("--token-file, --tls-cert and --tls-key go with --allow-remote (loopback needs no login)")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise FrankError("--tls-cert and --tls-key go together")
    try:
        from textual_serve.server import Server

        from frank.console import web_login
    except ImportError:
        raise FrankError("frank serve needs textual-serve: pip install 'frank[web]' (or `make setup`)") from None
    command = console_command(args)
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if args.tls_cert else "http"
    url = args.public_url or f"{scheme}://{shown}:{port}"
    title = "frank" + (" (read-only)" if "--read-only" in command else "")
    if args.allow_remote:
        tls = web_login.tls_context(args.tls_cert, args.tls_key) if args.tls_cert else None
        if args.token_file:
            token, where = web_login.read_token_file(args.token_file), args.token_file
        else:
            token, where = web_login.new_token()
        # the token itself only on a terminal, once (a redirected stderr is a log)
        login = f"{url}/?token={token}" if sys.stderr.isatty() and not args.token_file else f"{url}/?token=<{where}>"
        server: Server = web_login.LoginServer(
            command, host=host, port=port, title=title, public_url=url, token=token, tls=tls
        )
    else:
        login = url
        server = Server(command, host=host, port=port, title=title, public_url=url)
    print(
        f"frank serve: {login}  ({'read-only' if '--read-only' in command else 'full control'}; Ctrl+C stops)",
        file=sys.stderr,
        flush=True,
    )
    server.serve()
    return 0
