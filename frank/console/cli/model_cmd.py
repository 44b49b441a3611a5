"""`frank model build|verify`: the models frank builds (the tiny ones and SmolLM2, frank.engine.models).

The console side only checks the manifest; the build itself runs in the engine venv (tokenizers, torch).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from frank.console.cli.common import emit, emit_record

if TYPE_CHECKING:
    from frank.engine.models.tiny_model import BuildResult


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from frank.engine.models.catalog import names
    from frank.engine.models.tiny_model import MODEL_NAME

    parser = subparsers.add_parser("model", help="build or verify the models the engines serve")
    sub = parser.add_subparsers(dest="model_command", metavar="ACTION", required=True)

    build = sub.add_parser("build", help="build a model (skipped if a current build is there)")
    build.add_argument(
        "--model",
        default=MODEL_NAME,
        choices=names(),
        help="tiny-frank (default), tiny-frank-swa (its sliding-window sibling for full-scale W01) or "
        "smollm2-135m (SmolLM2's GGUF for llama.cpp and a checkpoint derived from it for vLLM)",
    )
    build.add_argument("--out", type=Path, help="target dir (default: <models dir>/MODEL)")
    build.add_argument("--force", action="store_true", help="rebuild even if a current build is there")
    build.add_argument("--json", action="store_true", help="print one JSON object")
    build.set_defaults(func=_build)

    verify = sub.add_parser("verify", help="check a build against its manifest (exit 1 if stale or damaged)")
    verify.add_argument("--model", default=MODEL_NAME, choices=names())
    verify.add_argument("--dir", type=Path, help="model dir (default: <models dir>/MODEL)")
    verify.add_argument("--json", action="store_true", help="print one JSON object")
    verify.set_defaults(func=_verify)


def _build(args: argparse.Namespace) -> int:
    from frank.engine.models.catalog import builder

    result = builder(args.model).build_via_engine_venv(args.out, force=args.force, name=args.model)
    emit_record(args.json, result, _human_build)
    return 0


def _human_build(r: BuildResult) -> str:
    if not r.built:
        return f"{r.path}: up to date ({r.builder_version}, manifest sha256 {r.manifest_sha256[:16]})"
    return (
        f"built {r.path} in {r.build_s:.1f} s ({r.builder_version}, "
        f"manifest sha256 {r.manifest_sha256[:16]}; was: {r.reason})"
    )


def _verify(args: argparse.Namespace) -> int:
    from frank.engine.models import tiny_model
    from frank.engine.models.catalog import build_version, builder

    model_dir = (args.dir or builder(args.model).default_dir(args.model)).expanduser().resolve()
    problem = builder(args.model).check_build(model_dir, args.model)
    payload = {
        "path": str(model_dir),
        "model": args.model,
        "ok": problem is None,
        "problem": problem,
        "builder_version": build_version(args.model),
        "manifest_sha256": tiny_model.manifest_digest(model_dir) if problem is None else None,
    }
    emit(args.json, payload, lambda p: f"{p['path']}: ok" if p["ok"] else p["problem"])
    return 0 if problem is None else 1
