"""The request front end alone, at W01 scale, with the region cache off, on, and with an empty big region.

No engine and no model execution: vLLM's own OnlineRenderer + renderer + tokenizer run in-process (the
engine venv), exactly as the API server calls them for /v1/chat/completions (`OnlineRenderer.render_chat`:
request checks, chat template rendering, tokenization, hand-off to `process_for_engine`). For every
request of every draw it times, per arm:

- total: `render_chat` from start to the engine input (what the server does before the engine queue),
- render: the chat template (`render_messages_async`), tokenize: `_tokenize_prompt` (the part the cache
  replaces), other: the rest (request checks, executor hand-offs, process_for_engine),
- and for the cache: time in split + hash + lookup + join (`lookup_s`) and encoding misses (`miss_s`).

Arms: `off` (vLLM's own path), `on` (cache cleared at the start of the arm, so each conversation's first
request is cold), `empty` (the same requests with the system message, the 98-99% region, emptied; cache
off): the floor the front-end goal is measured against. Identity: every request's prompt token IDs with the
cache on must equal those with it off, in every tokenizer mode run.

Run from the console venv (it writes the workload, then re-runs itself in the engine venv):
    .venv/bin/python benchmarks/bench_region_cache_frontend.py --scale full [--modes hf,deepseek_v41] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from engine_venv_env import frontend_worker_env

REPO = Path(__file__).resolve().parent.parent
ARMS = ("off", "on", "empty")
# W01 requests carry tools (tool_choice "auto"), which vLLM serves only with a tool parser.
TOOL_PARSERS = {"hf": "deepseek_v3", "deepseek_v41": "deepseek_v41"}
# The tiny tokenizer (8K BPE vocab) needs about 1.3x the tokens W01 plans for, so the largest full-scale
# prompts pass 196K; nothing runs a model here, so the renderer's length limit is simply raised.
MAX_MODEL_LEN = 1 << 20


# -- console side -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=("mini", "full"), default="full")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--draws", default="draw-1,draw-2,draw-3", help="comma-separated draw names")
    parser.add_argument("--modes", default="hf,deepseek_v41", help="vLLM tokenizer modes to run")
    parser.add_argument("--rounds", type=int, default=1, help="passes per arm (arms alternate between passes)")
    parser.add_argument("--model", help="model dir (default: the tiny model)")
    parser.add_argument("--workload", help="an existing W01 folder (default: generate one)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)

    sys.path.insert(0, str(REPO))
    from frank import paths
    from frank.engine.models import tiny_model
    from frank.workloads.w01 import make_w01

    model = Path(args.model) if args.model else tiny_model.default_dir()
    if not args.model and tiny_model.check_build(model) is not None:
        tiny_model.build_via_engine_venv(model)
    with tempfile.TemporaryDirectory(prefix="frank-rc-bench-") as tmp:
        workload = Path(args.workload) if args.workload else make_w01(Path(tmp) / "w01", args.scale, args.seed)
        cmd = [
            str(paths.engine_venv_python()),
            str(Path(__file__).resolve()),
            "--worker",
            "--model",
            str(model),
            "--workload",
            str(workload),
            "--draws",
            args.draws,
            "--modes",
            args.modes,
            "--rounds",
            str(args.rounds),
            "--scale",
            args.scale,
        ]
        env = frontend_worker_env(REPO)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        return proc.returncode
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(human(result))
    return 0 if result["ids_identical"] else 1


def human(result: dict[str, Any]) -> str:
    lines = [
        f"W01 {result['scale']}: {result['requests']} requests per arm, {result['tokens_mean']:.0f} prompt "
        f"tokens on average (max {result['tokens_max']}); model {result['model']}"
    ]
    for mode, m in result["modes"].items():
        lines.append(
            f"\n[{mode}]  ids identical on every request: {m['ids_identical']} ({m['mismatched_requests']} mismatched)"
        )
        lines.append(f"  {'arm':6} {'total s':>9} {'render s':>9} {'tokenize s':>11} {'other s':>9} {'per req ms':>11}")
        for arm in ARMS:
            a = m["arms"][arm]
            lines.append(
                f"  {arm:6} {a['total_s']:9.3f} {a['render_s']:9.3f} {a['tokenize_s']:11.3f} "
                f"{a['other_s']:9.3f} {1000 * a['total_s'] / result['requests']:11.2f}"
            )
        on = m["arms"]["on"]
        lines.append(
            f"  off/on {m['ratio_off_on']:.1f}x; on/empty {m['ratio_on_empty']:.2f}x; cache on: lookup "
            f"(split+hash+join) {on['lookup_s']:.3f} s, encoding misses {on['miss_s']:.3f} s, "
            f"{on['hits']} hits / {on['misses']} misses; cold requests extra {m['cold_extra_s']:+.3f} s"
        )
        lines.append(f"  largest piece left with the cache on: {m['largest_remaining']}")
    return "\n".join(lines)


# -- engine venv side ---------------------------------------------------------------------------------


def _load_requests(workload: Path, draws: list[str]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for draw in draws:
        with open(workload / f"{draw}.jsonl") as handle:
            for line in handle:
                record = json.loads(line)
                out.append((f"{draw}/{record['id']}", record))
    return out


def _emptied(body: dict[str, Any]) -> dict[str, Any]:
    messages = [dict(m, content="") if m.get("role") == "system" else m for m in body["messages"]]
    return dict(body, messages=messages)


def _build(model: str, mode: str):
    from vllm.engine.arg_utils import EngineArgs
    from vllm.renderers.online_renderer import OnlineRenderer
    from vllm.renderers.registry import renderer_from_config

    config = EngineArgs(
        model=model, tokenizer_mode=mode, max_model_len=MAX_MODEL_LEN, dtype="float32", enforce_eager=True
    ).create_engine_config()
    renderer = renderer_from_config(config)
    online = OnlineRenderer(
        model_config=config.model_config,
        renderer=renderer,
        request_logger=None,
        chat_template=None,
        chat_template_content_format="auto",
        enable_auto_tools=True,
        tool_parser=TOOL_PARSERS.get(mode, "deepseek_v3"),
    )
    return online, renderer


class _Timers:
    """Wraps the renderer's render and tokenize steps to time them (per request)."""

    def __init__(self, renderer: Any) -> None:
        from vllm.renderers.base import BaseRenderer

        self.render_s = 0.0
        self.tokenize_s = 0.0
        inner_render = renderer.render_messages_async
        inner_tokenize = BaseRenderer._tokenize_prompt  # the region cache's hook (when installed)
        timers = self

        async def render_messages_async(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return await inner_render(*a, **k)
            finally:
                timers.render_s += time.perf_counter() - t

        def tokenize_prompt(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return inner_tokenize(renderer, *a, **k)
            finally:
                timers.tokenize_s += time.perf_counter() - t

        renderer.render_messages_async = render_messages_async
        renderer._tokenize_prompt_async = _make_async(tokenize_prompt, renderer._executor)

    def reset(self) -> None:
        self.render_s = self.tokenize_s = 0.0


def _make_async(fn: Any, executor: Any) -> Any:
    from vllm.utils.async_utils import make_async

    return make_async(fn, executor=executor)


async def _run_arm(
    online: Any, timers: _Timers, requests: list[tuple[str, dict[str, Any]]], arm: str, ids_out: dict[str, list[int]]
) -> dict[str, Any]:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    from frank.plugins.region_cache import runtime

    runtime.set_enabled(arm == "on")
    runtime.clear()
    before = runtime.cache().stats()
    totals = {"total_s": 0.0, "render_s": 0.0, "tokenize_s": 0.0, "parse_s": 0.0, "cold_s": 0.0, "tokens": 0}
    per_request: list[float] = []
    for name, record in requests:
        body = _emptied(record["body"]) if arm == "empty" else record["body"]
        gc.collect()
        timers.reset()
        t0 = time.perf_counter()
        request = ChatCompletionRequest.model_validate(body)
        t1 = time.perf_counter()
        result = await online.render_chat(request)
        t2 = time.perf_counter()
        if not isinstance(result, tuple):
            raise RuntimeError(f"{name}: render_chat refused the request: {result}")
        ids = result[1][0]["prompt_token_ids"]
        if arm != "empty":
            ids_out[name] = ids
        totals["parse_s"] += t1 - t0
        totals["total_s"] += t2 - t1
        totals["render_s"] += timers.render_s
        totals["tokenize_s"] += timers.tokenize_s
        totals["tokens"] += len(ids)
        totals["tokens_max"] = max(totals.get("tokens_max", 0), len(ids))
        per_request.append(t2 - t1)
        if record["turn"] == 1:
            totals["cold_s"] += t2 - t1
    stats = runtime.cache().stats()
    totals["other_s"] = totals["total_s"] - totals["render_s"] - totals["tokenize_s"]
    for key in ("hits", "misses", "mismatches", "errors", "fallbacks"):
        totals[key] = stats[key] - before[key] if key != "fallbacks" else stats[key]
    totals["lookup_s"] = stats["lookup_seconds"] - before["lookup_seconds"]
    totals["miss_s"] = stats["miss_seconds"] - before["miss_seconds"]
    totals["median_ms"] = 1000 * statistics.median(per_request)
    return totals


async def _run_mode(model: str, mode: str, requests: list[tuple[str, dict[str, Any]]], rounds: int) -> dict[str, Any]:
    from frank.plugins.region_cache import plugin

    plugin.install()  # the plugin's own hook, as the API server gets it
    online, renderer = _build(model, mode)
    timers = _Timers(renderer)
    # Warm-up outside the timings: imports, template compile, the encoder's one-off probe.
    from frank.plugins.region_cache import runtime

    for arm in ("off", "on"):
        await _run_arm(online, timers, requests[:1], arm, {})
    runtime.encoder_for(renderer.get_tokenizer())
    # What exists now (vLLM, torch, the renderer) lives to the end: out of the collector's sight, so the
    # gc.collect() before each request sweeps only what the requests made (it took 0.6 s each otherwise).
    gc.freeze()
    order = [a for r in range(rounds) for a in (ARMS if r % 2 == 0 else ARMS[::-1])]
    sums: dict[str, dict[str, float]] = {}
    ids: dict[str, dict[str, list[int]]] = {"off": {}, "on": {}}
    for arm in order:
        got = await _run_arm(online, timers, requests, arm, ids.get(arm, {}))
        acc = sums.setdefault(arm, {})
        for key, value in got.items():
            acc[key] = max(acc.get(key, 0), value) if key == "tokens_max" else acc.get(key, 0.0) + value / rounds
    mismatched = [n for n in ids["off"] if ids["off"][n] != ids["on"].get(n)]
    off, on, empty = sums["off"], sums["on"], sums["empty"]
    # Cold extra: the on-arm's first requests of each conversation against the same requests cache off.
    cold_extra = on["cold_s"] - off["cold_s"]
    remaining = {
        "template rendering": on["render_s"],
        "tokenize step (cache lookup + misses)": on["tokenize_s"],
        "request checks, hand-offs, process_for_engine": on["other_s"],
    }
    largest = max(remaining, key=remaining.get)
    return {
        "ids_identical": not mismatched and len(ids["off"]) == len(requests),
        "mismatched_requests": len(mismatched),
        "mismatched_ids": mismatched[:5],
        "arms": sums,
        "ratio_off_on": off["total_s"] / on["total_s"],
        "ratio_on_empty": on["total_s"] / empty["total_s"],
        "cold_extra_s": cold_extra,
        "largest_remaining": f"{largest}: {remaining[largest]:.3f} s",
        "remaining_s": remaining,
        "tokens_total": off["tokens"],
    }


def worker(args: argparse.Namespace) -> int:
    import logging

    logging.disable(logging.WARNING)
    requests = _load_requests(Path(args.workload), args.draws.split(","))
    modes = {}
    for mode in args.modes.split(","):
        modes[mode] = asyncio.run(_run_mode(args.model, mode, requests, args.rounds))
    first = next(iter(modes.values()))
    result = {
        "scale": args.scale,
        "model": args.model,
        "requests": len(requests),
        "modes": modes,
        "ids_identical": all(m["ids_identical"] for m in modes.values()),
        "tokens_mean": first["tokens_total"] / len(requests),
        "tokens_max": int(first["arms"]["off"]["tokens_max"]),
    }
    print(json.dumps(result, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
