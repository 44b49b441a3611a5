"""Give an already-built DeepSeek-layout checkpoint (frank-moe-exl3's `deepseek/model.safetensors`) the dtypes
of DeepSeek-V4's own checkpoint, which exllamav3's converter expects: the rule of a current build,
frank.engine.models.moe_model.exl3_dtype (float32 for attn_sink, ape, hc_*_{fn,base,scale} and ffn.gate.bias;
bf16 for every other float tensor; integer tensors and E8M0 scales untouched). In place, idempotent.

    python scripts/exl3_checkpoint_dtypes.py CHECKPOINT_DIR

CHECKPOINT_DIR: the model folder (its deepseek/model.safetensors is rewritten), the deepseek/ folder itself,
or the .safetensors file. Needs torch and safetensors only."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root, from any cwd

from frank.engine.models.moe_model import exl3_fix_dtypes  # noqa: E402


def target(arg: str) -> Path:
    p = Path(arg).expanduser()
    for candidate in (p, p / "model.safetensors", p / "deepseek" / "model.safetensors"):
        if candidate.is_file():
            return candidate
    raise SystemExit(f"no model.safetensors at {p} (nor in {p / 'deepseek'})")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    path = target(argv[0])
    changed = exl3_fix_dtypes(path)
    if not changed:
        print(f"{path}: dtypes already as exllamav3 expects, nothing changed")
    for kind, count in sorted(changed.items()):
        print(f"{path}: {kind}: {count} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
