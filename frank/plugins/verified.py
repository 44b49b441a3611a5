"""Every frank plugin's verdict on a vLLM: what `frank bench part --list` shows, and how a version is added.

    python -m frank.plugins.verified            # the installed vLLM's files (this Python's), not imported
    python -m frank.plugins.verified --import   # the installed vLLM imported, each target read as loaded
    python -m frank.plugins.verified --source-root DIR --vllm-version 0.26.0   # an unpacked wheel

Prints one JSON list: per part its verified versions, whether the vLLM checked is compatible (compat.py:
every target's signature and code fingerprint match one verified version), the problems, and what each
target is there (`found`: the (signature, fingerprint) pairs to record once a part is proven exact on it).
The default reads the very files a plugin's own check reads when it loads (`inspect.getsource` reads the
target's source file), without the 10 s of importing vLLM; `--import` reads them as a plugin does.
Imports the plugin modules (which declare their patches), and vLLM's modules only with `--import`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

from frank.plugins import compat


def all_patches() -> list[compat.Patches]:
    """Every part's declared patches, in the order `frank bench part --list` prints them."""
    from frank.plugins import shm_idle
    from frank.plugins.front_end import block_hash_memo, detok_tail, held_prompt, idle_release
    from frank.plugins.region_cache import plugin as region_cache

    return [
        region_cache.PATCHES,
        detok_tail.PATCHES,
        block_hash_memo.PATCHES,
        held_prompt.PATCHES,
        idle_release.PATCHES,
        shm_idle.PATCHES,
    ]


def installed_root() -> Path:
    """The folder holding this Python's installed `vllm/` package, found without importing it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        raise SystemExit("no vllm installed for this Python")
    return Path(spec.origin).parent.parent


def report(
    source_root: Path | None = None, vllm_version: str | None = None, imported: bool = False
) -> list[dict[str, object]]:
    if source_root is None and not imported:
        source_root, vllm_version = installed_root(), compat.installed_vllm()
    out = []
    for patches in all_patches():
        if source_root is not None:
            found, version = compat.read_source_tree(patches, source_root), vllm_version
        else:
            found, version = compat.read_installed(patches), compat.installed_vllm()
        row = compat.judge(patches, found, version).to_json()
        row["found"] = {k: list(v) if isinstance(v, tuple) else v for k, v in found.items()}
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frank.plugins.verified", description=__doc__.split("\n")[0])
    parser.add_argument("--source-root", type=Path, help="an unpacked vLLM (the folder holding vllm/)")
    parser.add_argument("--vllm-version", help="the version that tree is (with --source-root)")
    parser.add_argument("--import", dest="imported", action="store_true", help="import vLLM and read each target")
    args = parser.parse_args(argv)
    json.dump(report(args.source_root, args.vllm_version, args.imported), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
