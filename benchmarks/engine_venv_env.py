"""The environment both front-end benchmarks give their worker in the engine venv: vLLM's front end,
offline, with the region cache plugin off unless the worker turns it on itself. Imported by the scripts
beside it (a script's own folder is first on sys.path)."""

from __future__ import annotations

import os
from pathlib import Path


def frontend_worker_env(repo: Path) -> dict[str, str]:
    return dict(
        os.environ,
        PYTHONPATH=str(repo),
        TOKENIZERS_PARALLELISM="false",
        VLLM_NO_USAGE_STATS="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        FRANK_REGION_CACHE="off",
        VLLM_ALLOW_LONG_MAX_MODEL_LEN="1",
    )
