"""llama.cpp's own HTTP server in this process, through xllamacpp, taking llama-server's flag names.

Runs in the llama.cpp venv (xllamacpp and the standard library only). `xllamacpp.Server(params)` loads the
model and starts llama.cpp's C++ server on its own threads; this process then only waits for SIGTERM (the
supervisor's stop), which ends it and the server with it. The API key comes from LLAMA_API_KEY, as for
llama-server, so it is not in the process list.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

SPEC_TYPES = {
    "none": "COMMON_SPECULATIVE_TYPE_NONE",
    "ngram-simple": "COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE",
    "ngram-map-k": "COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K",
    "draft-simple": "COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE",
    "draft-dspark": "COMMON_SPECULATIVE_TYPE_DRAFT_DSPARK",
}
PRIORITIES = ("NORMAL", "MEDIUM", "HIGH", "REALTIME")  # llama-server's --prio 0..3

ROPE_SCALING = {
    "none": "LLAMA_ROPE_SCALING_TYPE_NONE",
    "linear": "LLAMA_ROPE_SCALING_TYPE_LINEAR",
    "yarn": "LLAMA_ROPE_SCALING_TYPE_YARN",
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    # no abbreviations: --prio and --cpu-strict must never be taken for --prio-batch and --cpu-strict-batch
    p = argparse.ArgumentParser(prog="xllamacpp_server", description=__doc__, allow_abbrev=False)
    p.add_argument("-m", "--model", required=True)
    p.add_argument("-a", "--alias", default="")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("-c", "--ctx-size", type=int, default=4096)
    p.add_argument("--rope-scaling", choices=sorted(ROPE_SCALING), default=None, help="RoPE frequency scaling")
    p.add_argument("--rope-scale", type=float, default=None, help="context scaling factor (frequencies / N)")
    p.add_argument("--yarn-orig-ctx", type=int, default=None, help="YaRN: the model's trained context")
    p.add_argument("-t", "--threads", type=int, default=-1)
    # the batch pool (a step over more than one token: prefill, and a verify step over its drafts)
    p.add_argument("-tb", "--threads-batch", type=int, default=None, help="batch threads (default: --threads)")
    p.add_argument("--poll", type=int, default=None, help="0-100: how long idle pool threads spin (ggml's pool)")
    p.add_argument("--poll-batch", type=int, default=None, help="the batch pool's --poll")
    p.add_argument("--cpu-strict", type=int, choices=(0, 1), default=None, help="1: pin the single-token threads")
    p.add_argument("--prio", type=int, choices=range(4), default=None, help="single-token threads' priority 0-3")
    p.add_argument("--cpu-strict-batch", type=int, choices=(0, 1), default=None, help="1: pin batch threads")
    p.add_argument("-Crb", "--cpu-range-batch", default=None, help="LO-HI: the cores the batch threads may use")
    p.add_argument("--prio-batch", type=int, choices=range(4), default=None, help="batch threads' priority 0-3")
    p.add_argument("-ncmoe", "--n-cpu-moe", type=int, default=None, help="accepted for parity; all on the CPU here")
    p.add_argument("-np", "--parallel", type=int, default=1)
    p.add_argument("--cache-reuse", type=int, default=0, help="min chunk size to reuse from the cache by KV shifting")
    p.add_argument("--spec-type", choices=sorted(SPEC_TYPES), default="none")
    p.add_argument("--spec-ngram-simple-size-n", type=int, default=None, help="n-gram length looked up in the context")
    p.add_argument("--spec-ngram-simple-size-m", type=int, default=None, help="draft tokens taken after a match")
    p.add_argument("-md", "--spec-draft-model", default="", help="the draft model (draft-simple, draft-dspark)")
    p.add_argument("--spec-draft-n-max", type=int, default=None, help="draft tokens per verify step")
    p.add_argument("--metrics", action="store_true")
    p.add_argument("--jinja", action="store_true")
    p.add_argument("--chat-template-file", default="", help="a Jinja chat template instead of the GGUF's")
    p.add_argument("-ngl", "--n-gpu-layers", type=int, default=None, help="accepted for parity; the wheel is CPU")
    return p.parse_args(argv)


def params_for(args: argparse.Namespace):
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = args.model
    if args.alias:
        p.model_alias = {args.alias}
    p.hostnames = [args.host]
    p.port = args.port
    p.n_ctx = args.ctx_size
    if args.rope_scaling is not None:
        p.rope_scaling_type = getattr(xllamacpp.llama_rope_scaling_type, ROPE_SCALING[args.rope_scaling])
    if args.rope_scale is not None:
        p.rope_freq_scale = 1.0 / args.rope_scale  # llama-server's --rope-scale N
    if args.yarn_orig_ctx is not None:
        p.yarn_orig_ctx = args.yarn_orig_ctx
    p.n_parallel = args.parallel
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads if args.threads_batch is None else args.threads_batch
    _pool_settings(xllamacpp, p.cpuparams, args.poll, args.cpu_strict, None, args.prio)
    _pool_settings(
        xllamacpp, p.cpuparams_batch, args.poll_batch if args.poll_batch is not None else args.poll,
        args.cpu_strict_batch, args.cpu_range_batch, args.prio_batch if args.prio_batch is not None else args.prio,
    )  # fmt: skip
    p.n_cache_reuse = args.cache_reuse
    p.endpoint_metrics = args.metrics
    p.use_jinja = args.jinja
    if args.chat_template_file:
        with open(args.chat_template_file, encoding="utf-8") as handle:
            p.chat_template = handle.read()
    key = os.environ.get("LLAMA_API_KEY", "")
    if key:
        p.api_keys = [key]
    if args.spec_type != "none":
        p.speculative.types = [getattr(xllamacpp.common_speculative_type, SPEC_TYPES[args.spec_type])]
        if args.spec_draft_model:
            p.speculative.draft.mparams.path = args.spec_draft_model
        if args.spec_draft_n_max is not None:
            p.speculative.draft.n_max = args.spec_draft_n_max
        ngram = p.speculative.ngram_simple
        if args.spec_ngram_simple_size_n is not None:
            ngram.size_n = args.spec_ngram_simple_size_n
        if args.spec_ngram_simple_size_m is not None:
            ngram.size_m = args.spec_ngram_simple_size_m
    return p


def _pool_settings(xllamacpp, cpu, poll: int | None, strict: int | None, cores: str | None, prio: int | None) -> None:
    """One thread pool's llama-server settings: --poll, --cpu-strict, --cpu-range and --prio of that pool."""
    if poll is not None:
        cpu.poll = poll
    if strict is not None:
        cpu.strict_cpu = bool(strict)
    if cores is not None:
        lo, _, hi = cores.partition("-")
        mask = [False] * len(cpu.cpumask)
        for core in range(int(lo), min(int(hi or lo), len(mask) - 1) + 1):
            mask[core] = True
        cpu.cpumask = mask
        cpu.mask_valid = True
    if prio is not None:
        cpu.priority = getattr(xllamacpp.ggml_sched_priority, f"GGML_SCHED_PRIO_{PRIORITIES[prio]}")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    import xllamacpp

    t0 = time.monotonic()
    server = xllamacpp.Server(params_for(args))  # returns once the model is loaded and the port listens
    print(f"[xllamacpp_server] listening on {server.listening_address} after {time.monotonic() - t0:.1f} s", flush=True)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the supervisor's stop ends the process, server included
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
