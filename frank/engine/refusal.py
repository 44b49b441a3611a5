"""Why an engine refused to start, in the profile's terms: the field behind the failure, read from the
engine's own last log lines and the command line frank built.

`blame` looks for what the log names: the model path (or a model loader's error), a flag frank passed
(an unknown flag, a bad value), the port (an address in use), threads; and maps it to the profile field
that put it on the command line (frank.engine.profile_schema.flag_origins). It guesses nothing it cannot
point at: no match, no field named.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from frank.engine.profile_schema import flag_name, flag_origins
from frank.engine.records import ExitRecord

_MODEL = re.compile(
    r"failed to load model|error loading model|unable to load model|invalid magic|not a valid|gguf_init|"
    r"no such file or directory|is not a valid model|does not appear to have a file|config\.json",
    re.I,
)
_PORT = re.compile(r"address already in use|couldn'?t bind|bind failed|failed to bind|errno 98", re.I)
_FLAG = re.compile(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9_-]*)")
_THREADS = re.compile(r"thread", re.I)
# An engine out of GPU memory: torch's OutOfMemoryError (vLLM, exllamav3), exllamav3's autosplit giving up
# (model/model_ls.py:311 in 1.6.5), vLLM's cache with no room, llama.cpp's failed CUDA buffer
_OOM = re.compile(
    r"CUDA out of memory|OutOfMemoryError|HIP out of memory|Insufficient VRAM|cudaErrorMemoryAllocation|"
    r"CUDA error: out of memory|cudaMalloc failed: out of memory|unable to allocate CUDA\d* buffer|"
    r"No available memory for the cache blocks",
    re.I,
)


def out_of_gpu_memory(log_tail: Sequence[str]) -> str | None:
    """The engine's own last line saying it ran out of GPU memory, or None."""
    for line in reversed(log_tail):
        if not line.startswith("[frank]") and _OOM.search(line):
            return line.strip()[:300]
    return None


def blame(profile: Any, argv: Sequence[str], log_tail: Sequence[str], exit_info: ExitRecord | None) -> list[str]:
    """'FIELD (why)' for each profile field the engine's refusal points at, most specific first."""
    origins = flag_origins(profile)
    text = "\n".join(line for line in log_tail if not line.startswith("[frank]"))
    found: list[str] = []

    def add(entry: str) -> None:
        if entry not in found:
            found.append(entry)

    spawn_error = exit_info.spawn_error if exit_info is not None else None
    if spawn_error:
        add(f"{'binary' if profile.binary else 'python'} ({spawn_error})")
    model = profile.model_path()
    if model and (model in text or _MODEL.search(text)):
        add(f"model ({model})")
    if _PORT.search(text):
        add(f"port ({profile.port}, on {profile.host})")
    passed = {flag_name(profile.kind, a) for a in argv if a.startswith("--")}
    for flag in _FLAG.findall(text):
        flag = flag_name(profile.kind, flag)
        if flag in passed and flag in origins and flag not in ("--model", "--port", "--host"):
            add(f"{origins[flag]} ({flag}, named in the log)")
    if _THREADS.search(text):
        for flag in ("--threads", "-t", "--threads-batch"):
            if flag in origins and flag in argv:
                add(f"{origins[flag]} ({flag} {argv[argv.index(flag) + 1]})")
    return found
