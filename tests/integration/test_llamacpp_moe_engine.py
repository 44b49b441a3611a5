"""The seed's engine shape on a real engine: llama.cpp (xllamacpp's CPU wheel) serving tiny-frank-moe, a
DeepSeek-V4-shaped MoE, with its DSpark draft on (`llamacpp-cpu-moe`). One engine for the module, in its own
FRANK_HOME, ready in a second or two: speculation is real (drafts proposed and verified), telemetry names
the CPU pool's threads, a replay records verify steps and the CPU-expert decode wait, and fidelity runs
against the transformers checkpoint of the same weights. On this CPU-only engine every expert is on the
CPU: the figures here are mechanics; the split itself is measured on a GPU machine (docs/gpu-run.md)."""

from __future__ import annotations

import json
import math
import os
import threading
import time

import httpx
import pytest

from frank.engine.controller import EngineController, _group_members
from tests.short_workload import write_short_workload

pytestmark = pytest.mark.engine

TEXT = (
    "The engine keeps a prefix cache of blocks. A request that shares its opening with an earlier one reuses "
    "the blocks already computed, so its prefill is shorter. def merge(a, b):\n    return sorted(a + b)\n"
)


@pytest.fixture(scope="module")
def moe(frank_cli, tmp_path_factory):
    """(home, status JSON, client headers); stopped at the end of the module."""
    home = tmp_path_factory.mktemp("moe-home")
    started = frank_cli("engine", "start", "--profile", "llamacpp-cpu-moe", "--json", home=home, timeout=600)
    assert started.returncode == 0, started.stderr
    status = json.loads(started.stdout)
    key = EngineController(state_dir=home / "state").client_api_key
    yield home, status, {"Authorization": f"Bearer {key}"}
    stopped = frank_cli("engine", "stop", "--json", home=home, timeout=600)
    assert stopped.returncode == 0 and json.loads(stopped.stdout)["state"] == "stopped", stopped.stderr
    assert _group_members(status["pgid"]) == []


def _chat(status, headers, max_tokens: int) -> dict:
    body = {"messages": [{"role": "user", "content": "Write a merge function."}], "max_tokens": max_tokens,
            "temperature": 0}  # fmt: skip
    reply = httpx.post(status["url"] + "/v1/chat/completions", json=body, headers=headers, timeout=300)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _architecture(gguf: str) -> str:
    """general.architecture, the first key of a GGUF written by llama.cpp's converter (GGUF v3 header)."""
    with open(gguf, "rb") as handle:
        head = handle.read(4096)
    assert head[:4] == b"GGUF"
    n = int.from_bytes(head[24:32], "little")
    key = head[32 : 32 + n].decode()
    assert key == "general.architecture"
    at = 32 + n + 4  # the value's type (8: string)
    size = int.from_bytes(head[at : at + 8], "little")
    return head[at + 8 : at + 8 + size].decode()


def _counter(text: str, name: str) -> float:
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " "))


def test_it_serves_the_moe_with_dspark_drafts_verified(moe):
    home, status, headers = moe
    assert status["profile"] == "llamacpp-cpu-moe" and status["knobs"]["speculative"] == "draft-dspark"
    from frank.engine.profiles import load_profile

    assert _architecture(load_profile("llamacpp-cpu-moe").model_path()) == "deepseek4"  # the seed's architecture
    timings = _chat(status, headers, 24)["timings"]
    metrics = httpx.get(status["url"] + "/metrics", headers=headers, timeout=10).text
    drafts = _counter(metrics, "llamacpp:spec_decode_num_drafts_total")
    assert timings["draft_n"] >= 3 * (timings["predicted_n"] - 1) * 0.5 and drafts > 0  # every step drafts 3
    assert _counter(metrics, "llamacpp:spec_decode_num_draft_tokens_total") >= timings["draft_n"]


def test_telemetry_names_the_cpu_pool_and_sees_it_compute(frank_cli, moe):
    from frank.telemetry.sampler import Sampler, snapshot_to_json, static_target

    home, status, headers = moe
    _chat(status, headers, 4)  # the pool's threads are told apart by the CPU they have used: not none yet
    once = frank_cli("telemetry", "--once", "--json", "--period", "0.3", home=home, timeout=600)
    assert once.returncode == 0, once.stderr
    pool = json.loads(once.stdout)["expert_pool"]
    tids = {int(t) for t in os.listdir(f"/proc/{status['pid']}/task")}
    assert pool["size"] == 2 and pool["size_from"] == "--threads-batch"
    assert [t["role"] for t in pool["threads"]] == ["main", "worker"]
    assert all(t["tid"] in tids and t["tid"] != status["pid"] for t in pool["threads"])  # never Python's thread
    assert all("busy_pct" in t for t in pool["threads"])
    # while a request decodes, both pool threads compute, and they are the engine's busiest threads
    reply: dict = {}
    sender = threading.Thread(target=lambda: reply.update(_chat(status, headers, 200)))
    sampler = Sampler(static_target(status["url"], status["pid"], headers["Authorization"][7:]), gpu=False)
    sender.start()
    try:
        sampler.sample_once()
        busy = None
        deadline = time.monotonic() + 120
        while sender.is_alive() and time.monotonic() < deadline:
            time.sleep(0.5)
            snap = snapshot_to_json(sampler.sample_once())
            pool = snap["expert_pool"]
            if pool["workers_busy_pct"] and pool["threads"][0]["busy_pct"] > 0:
                busy = snap
                break
    finally:
        sender.join(300)
        sampler.stop()
    assert busy is not None, "the pool never showed its worker computing during a 200-token request"
    pool_tids = {t["tid"] for t in busy["expert_pool"]["threads"]}
    top = [t["tid"] for t in busy["cpu"]["engine"]["busiest"][:2]]
    assert set(top) == pool_tids, (top, pool_tids)
    assert 0 < busy["expert_pool"]["busy_pct"] <= 100 and busy["cost_ms"]["cpu"] < 50


def test_a_replay_records_verify_steps_and_the_cpu_expert_wait(frank_cli, moe, tmp_path):
    home, _, _ = moe
    write_short_workload(tmp_path / "short")
    out = frank_cli(
        "replay",
        str(tmp_path / "short"),
        "--mode",
        "full",
        "--max-tokens",
        "24",
        "--json",
        "--quiet",
        home=home,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    totals = summary["draws"]["draw-1"]
    assert totals["ok"] == 2, out.stderr
    records = [json.loads(line) for line in open(f"{summary['run_dir']}/draw-1.jsonl")]
    for server in (r["server"] for r in records):
        steps = server["decode_steps"]
        assert steps > 0 and (server["drafted_steps"] or 0) > 0 and server["verify_step_s"] > 0, server["reason"]
        assert server["sources"]["drafted_steps"] == "metrics-delta"  # drafted steps: /metrics around it
        assert server["sources"]["cpu_expert_wait_s"] == "expert-pool"
        # a worker computes within the steps: never more than the request's decode time (plus the client's
        # view of its edges), and something on this engine, where every op is on the CPU
        assert 0 < server["cpu_expert_wait_s"] <= server["decode_s"] + 0.05
        assert server["cpu_expert_wait_step_s"] == pytest.approx(server["cpu_expert_wait_s"] / steps)
    assert totals["cpu_expert_wait_s"] == pytest.approx(sum(r["server"]["cpu_expert_wait_s"] for r in records))
    assert 0 < totals["cpu_expert_wait_step_s"] <= totals["verify_step_s"]
    assert totals["drafted_steps"] > 0 and totals["decode_steps"] >= totals["drafted_steps"]


def test_fidelity_on_the_moe_against_its_transformers_checkpoint(frank_cli, moe, tmp_path):
    """The transformers DeepseekV4ForCausalLM of the same weights (MXFP4-exact experts) as the reference:
    llama.cpp's deepseek4 agrees with it to hundredths of a nat at most (8-bit activations into the MXFP4
    experts, a float16 KV cache), far above the reference's own noise."""
    from frank.fidelity.sets import Document, write_set

    home, _, _ = moe
    docs = [Document("d0", TEXT * 2), Document("d1", "Tool output:\n  KeyError: 'port'\n" * 6)]
    path = write_set(tmp_path / "small", "small", "two short documents", docs, max_tokens=48)
    out = frank_cli("fidelity", "run", "--sets", str(path), "--json", home=home, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    run = json.loads(out.stdout)
    [entry] = run["sets"]
    assert run["profile"] == "llamacpp-cpu-moe" and entry["positions"] == 2 * 47
    assert math.isfinite(entry["kl"]) and entry["floor"]["value"] < entry["kl"] < 0.1, entry


def test_fidelity_with_the_control_as_reference_measures_the_engine_on_its_own_tokens(moe, tmp_path):
    """A design's `[fidelity] reference = "control"` (frank-moe-gpu has no transformers checkpoint): a cell
    tokenizes the shipped short set on the engine and keeps its top 64; two cells of one engine scored the
    same token IDs, as many positions as the set scores, and agree (the KL of one against the other)."""
    from frank.experiments.fidelity import engine_floor_between, measure_cell, parse_fidelity
    from frank.fidelity.sets import load_set, resolve_set

    home, _, _ = moe
    rule = parse_fidelity({"sets": ["short"], "reference": "control"}, "d.toml")
    controller = EngineController(state_dir=home / "state")
    first, second = (measure_cell(rule, tmp_path / f"cell-{n}", controller) for n in (1, 2))
    short = load_set(resolve_set("short"))
    for cell in (first, second):
        entry = cell["sets"]["short"]
        assert entry["kl"] is None and entry["set_sha256"] == short.sha256  # no KL at cell time
        assert entry["positions"] == len(short.documents) * (short.max_tokens - 1) == 192
    assert first["sets"]["short"]["tokens_sha256"] == second["sets"]["short"]["tokens_sha256"]
    assert engine_floor_between(first["candidate"], second["candidate"], "short") < 1e-6


SCHEDULE_DESIGN = """
name = "sched-mini"
question = "Does the pinned schedule shorten a verify step?"
profile = "llamacpp-cpu-moe"

[[arms]]
name = "sched-1"
knobs = {{ cpu_experts_sched = 1 }}

[[arms]]
name = "sched-2"
knobs = {{ cpu_experts_sched = 2 }}

[design]
kind = "blocks"
blocks = 1

[workload]
name = "{workload}"
mode = "full"
max_tokens = 12

[measure]
name = "time_per_verify_step"

[rule]
test = "sign"
treatment = "sched-2"
control = "sched-1"
direction = "lower"
require_all = true

[guards]
no_failed_requests = true
"""


def test_a_registered_schedule_run_on_the_moe_stops_at_its_time_limit_and_resumes(frank_cli, tmp_path):
    """The schedule test's path on a real llama.cpp engine, in a FRANK_HOME of its own: each cell starts the
    engine with the arm's schedule, replays through the engine's key (llama.cpp's server refuses a request
    without it), and records the time per verify step and the CPU-expert wait beside it. `--stop-after`
    stops the runner between cells (reason time_limit, nothing interrupted); the next run does the cell
    that is left, at its first attempt."""
    home = tmp_path / "home"
    write_short_workload(tmp_path / "short")
    design = tmp_path / "sched-mini.toml"
    design.write_text(SCHEDULE_DESIGN.format(workload=tmp_path / "short"))
    run = frank_cli.json("experiment", "register", str(design), "--seed", "1", home=home)["run_id"]
    first = frank_cli.json("experiment", "run", run, "--stop-after", "0.5", home=home, timeout=600, ok=(3,))
    assert (first["reason"], first["cells_run"]) == ("time_limit", 1), first
    second = frank_cli.json("experiment", "run", run, home=home, timeout=600)
    assert (second["reason"], second["cells_run"]) == ("finished", 1), second
    events = [json.loads(line) for line in open(home / "data/runs/experiments" / run / "journal.jsonl")]
    assert not [e for e in events if e["event"] in ("cell_failed", "cell_interrupted")]
    done = [e for e in events if e["event"] == "cell_done"]
    assert [(e["attempt"], e["failed"]) for e in done] == [(1, 0), (1, 0)]
    for e in done:
        m = e["measures"]
        assert e["value"] == m["time_per_verify_step"] > 0
        assert 0 < m["cpu_expert_wait_per_step"] <= m["time_per_verify_step"]  # every op is on this CPU pool
    report = frank_cli.json("experiment", "report", run, home=home)
    assert report["decision"] in ("confirmed", "not confirmed") and report["p_fraction"] in ("1/2", "1")
    assert [g["status"] for g in report["guards"]] == ["pass"]
