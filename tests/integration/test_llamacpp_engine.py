"""llama.cpp as the second engine kind, real (xllamacpp's CPU wheel serving SmolLM2's GGUF; ready in
seconds): the same controller and supervisor start, adopt, guard with the token, and stop it; the CLI names
its kind. One engine for the module, in its own FRANK_HOME (the session's vLLM engine may run beside it)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import httpx
import pytest

from frank.engine.controller import EngineController, EngineError, _group_members
from tests.short_workload import write_short_workload

pytestmark = pytest.mark.engine
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def llamacpp(frank_cli, tmp_path_factory):
    """(home, status JSON of the started engine); stopped at the end of the module."""
    home = tmp_path_factory.mktemp("llamacpp-home")
    started = frank_cli("engine", "start", "--profile", "llamacpp-cpu", "--json", home=home, timeout=600)
    assert started.returncode == 0, started.stderr
    status = json.loads(started.stdout)
    assert _group_members(status["pgid"])
    yield home, status
    stopped = frank_cli("engine", "stop", "--json", home=home, timeout=600)
    assert stopped.returncode == 0 and json.loads(stopped.stdout)["state"] == "stopped", stopped.stderr
    assert _group_members(status["pgid"]) == []  # the supervisor's group, xllamacpp's server in it, is gone


def test_start_status_adopt_and_the_token(frank_cli, llamacpp):
    home, status = llamacpp
    assert status["state"] == "ready" and status["kind"] == "llamacpp" and status["profile"] == "llamacpp-cpu"
    assert status["url"].startswith("http://127.0.0.1:")
    shown = frank_cli("engine", "status", "--json", home=home, timeout=600)
    assert shown.returncode == 0 and json.loads(shown.stdout)["kind"] == "llamacpp"
    assert "llamacpp-cpu  (llama.cpp)" in frank_cli("engine", "status", home=home, timeout=600).stdout
    controller = EngineController(state_dir=home / "state")  # a later process adopts the running engine
    assert controller.status().state == "ready" and controller.status().pid == status["pid"]
    key = controller.client_api_key
    assert key and key == controller.token  # llama.cpp's api key is the control token
    body = {"model": "smollm2-135m", "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4}
    assert httpx.post(status["url"] + "/v1/chat/completions", json=body, timeout=60).status_code == 401
    assert httpx.get(status["url"] + "/metrics", timeout=10).status_code == 401
    reply = httpx.post(
        status["url"] + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=120
    )
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] > 0
    assert reply.json()["model"] == "smollm2-135m"
    metrics = httpx.get(status["url"] + "/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=10).text
    assert "llamacpp:tokens_predicted_total" in metrics
    with pytest.raises(EngineError, match="already running"):
        controller.start("llamacpp-cpu")


def test_replay_runs_on_llamacpp_with_its_response_timings(frank_cli, llamacpp, tmp_path):
    home, _ = llamacpp
    write_short_workload(tmp_path / "short")
    out = frank_cli(
        "replay", str(tmp_path / "short"), "--draws", "draw-1", "--mode", "full", "--max-tokens", "8",
        "--json", "--quiet",
        home=home, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["state"] == "finished" and summary["draws"]["draw-1"]["ok"] == 2, out.stderr
    records = [json.loads(line) for line in open(f"{summary['run_dir']}/draw-1.jsonl")]
    first, second = (r["server"] for r in records)
    assert first["sources"]["prefill_s"] == "llamacpp-timings" and first["prefill_s"] > 0
    assert first["queue_s"] is None  # llama.cpp reports no queue time: absent, not 0
    assert second["cached_tokens"] > 0  # the second turn reuses the first one's prompt from the slot's cache
    assert all(r["client"]["ttft_s"] > 0 for r in records)


def _key(home) -> str:
    return EngineController(state_dir=home / "state").client_api_key


def test_the_default_slot_holds_w01_minis_prompts_in_a_yarn_stretched_context(llamacpp):
    """W01 mini's prompts (11.6K-21.3K SmolLM2 tokens) pass SmolLM2's trained 8192: llama.cpp gives the one
    slot the whole 32768 (it does not cap it at the GGUF's context_length) and applies YaRN. A real W01 mini
    draw takes half an hour of prefill on one thread here: it is measured in benchmarks/, not in the suite."""
    home, status = llamacpp
    props = httpx.get(status["url"] + "/props", headers={"Authorization": f"Bearer {_key(home)}"}, timeout=30).json()
    assert props["default_generation_settings"]["n_ctx"] == 32768
    log = (home / "state" / "logs" / "engine.log").read_text()
    assert "--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 8192" in log and "n_ctx_slot = 32768" in log


def test_llamacpps_top_k_is_the_whole_vocabularys_softmax_before_any_sampler(llamacpp):
    """What fidelity reads: n_probs with post_sampling_probs false is the raw distribution. A greedy request
    (temperature 0, top_k 1, min_p 0.9) returns the very same 64 values as neutral samplers, and they hold
    less than all the mass (a truncating sampler would renormalize to 1 over fewer tokens). The prefix
    cache makes each next position cost one new token."""
    from frank.fidelity.candidate_llamacpp import next_token_logprobs

    home, status = llamacpp
    client = httpx.Client(timeout=120, headers={"Authorization": f"Bearer {_key(home)}"})
    prompt = [1, *client.post(status["url"] + "/tokenize", json={"content": TEXT}).json()["tokens"]]
    raw = next_token_logprobs(client, status["url"], prompt, 64)
    greedy = {"temperature": 0.0, "top_k": 1, "min_p": 0.9, "n_predict": 1, "n_probs": 64, "cache_prompt": True}
    answer = client.post(status["url"] + "/completion", json={"prompt": prompt, **greedy}).json()
    top = answer["completion_probabilities"][0]["top_logprobs"]
    assert {e["id"]: e["logprob"] for e in top} == raw
    assert 0.3 < sum(math.exp(lp) for lp in raw.values()) < 0.9999
    longer = client.post(status["url"] + "/completion", json={"prompt": prompt + [top[0]["id"]], **greedy}).json()
    assert longer["tokens_evaluated"] == len(prompt) + 1 and longer["timings"]["prompt_n"] <= 2


TEXT = (
    "The engine keeps a prefix cache of blocks. A request that shares its opening with an earlier one reuses "
    "the blocks already computed, so its prefill is shorter. def merge(a, b):\n    return sorted(a + b)\n"
)


def test_the_floor_starts_llamacpp_twice_and_a_third_time_with_yarn(frank_cli, tmp_path):
    """`frank fidelity floor` teacher-forces llama.cpp (as trained: context 8192, no YaRN; engines of its own,
    ready in a second) on the reference's IDs, twice, then a third time with YaRN's 4x stretch (context
    32768). Q4_1 weights with 8-bit activations and a float16 KV cache against the float32 reference of the
    same weights: far above the reference's own noise, yet thousandths of a nat (the shipped sets: 2-3e-3);
    a position shifted by one token would cost nats. Two starts of one configuration agree (one thread: the
    same sums in the same order); YaRN changes the model at every position, so it stands far above them."""
    from frank.fidelity.sets import Document, write_set

    home = tmp_path / "home"
    texts = [TEXT * 3, "Tool output:\n  File \"app.py\", line 12, in main\n    run()\nKeyError: 'port'\n" * 4]
    docs = [Document(f"d{i}", t) for i, t in enumerate(texts)]
    path = write_set(tmp_path / "small", "small", "two short documents", docs, max_tokens=64)
    floor = frank_cli.json(
        "fidelity", "floor", "--profile", "llamacpp-cpu", "--knob", "context=8192", "--versus", "context=32768",
        "--sets", str(path), home=home, timeout=600,
    )  # fmt: skip
    assert frank_cli.json("engine", "status", home=home)["state"] == "stopped", "the floor stops what it started"
    [entry] = floor["sets"]
    assert floor["kind"] == "floor" and floor["profile"] == "llamacpp-cpu" and floor["knobs"]["context"] == 8192
    assert floor["top_k"] == 64 and entry["positions"] == 2 * 63
    assert 0 <= entry["engine_floor"] < 1e-9, entry  # the two starts agree
    assert entry["floor"]["value"] == max(entry["floor"]["reference"], entry["engine_floor"])
    assert math.isfinite(entry["kl"]) and 1000 * entry["floor"]["value"] < entry["kl"] < 0.05, entry
    assert entry["kl_start_2"] == pytest.approx(entry["kl"], rel=1e-6)
    assert entry["max_kl"] < 0.5 and entry["kl_over_floor"] > 1000
    versus = entry["versus"]
    assert versus["knobs"] == {"context": 32768} and versus["kl"] > 1000 * max(entry["engine_floor"], 1e-9), versus
    assert versus["kl_reference"] > entry["kl"], "YaRN moves the engine away from the model as trained"


def test_an_engine_that_refuses_to_start_shows_its_own_lines_and_the_profile_field(frank_cli, tmp_path):
    """A model path that is not a model: the start fails with llama.cpp's own log lines and names `model`."""
    home = tmp_path / "home"
    profiles = home / "config" / "profiles"
    profiles.mkdir(parents=True)
    fake = tmp_path / "not-a-model.gguf"
    fake.write_text("this is not a GGUF file\n")
    text = (REPO / "frank" / "engine" / "profiles" / "llamacpp-cpu.toml").read_text()
    text = text.replace('name = "llamacpp-cpu"', 'name = "badmodel"').replace(
        'model = "@models/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf"', f'model = "{fake}"'
    )
    (profiles / "badmodel.toml").write_text(text)
    started = frank_cli("engine", "start", "--profile", "badmodel", "--json", home=home, timeout=600)
    assert started.returncode != 0
    # frank's own refusal (the engine's lines below it may hold the xllamacpp launcher's traceback)
    assert started.stderr.startswith("frank: error: engine badmodel exited during start"), started.stderr
    assert f"the profile field behind it: model ({fake})" in started.stderr, started.stderr
    assert "the engine's last lines:" in started.stderr and "[frank]" not in started.stderr.split("last lines:")[1]
    status = json.loads(frank_cli("engine", "status", "--json", home=home, timeout=600).stdout)
    assert status["state"] == "crashed" and not _group_members(status["pgid"])
    assert frank_cli("engine", "stop", home=home, timeout=600).returncode == 0


def test_a_killed_supervisor_shows_in_status_and_stop_still_stops_the_server(frank_cli, llamacpp):
    """kill -9 of the supervisor: the server runs on, unsupervised; status says so; stop leaves no process.
    The module's engine ends here (its fixture's stop then finds nothing to stop)."""
    import signal
    import time

    import psutil

    home, status = llamacpp
    supervisor, server = status["pgid"], status["pid"]
    assert status["supervisor_alive"] is True and status["warning"] is None
    os.kill(supervisor, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while True:
        now = json.loads(frank_cli("engine", "status", "--json", home=home, timeout=600).stdout)
        if now["supervisor_alive"] is False or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert now["supervisor_alive"] is False, now
    assert now["state"] == "ready" and now["healthy"] is True and now["pid"] == server
    assert f"supervisor (pid {supervisor}) is gone while the server runs" in now["warning"]
    assert psutil.Process(server).status() != psutil.STATUS_ZOMBIE  # the server still serves
    stopped = frank_cli("engine", "stop", "--json", home=home, timeout=600)
    assert stopped.returncode == 0 and json.loads(stopped.stdout)["state"] == "stopped", stopped.stderr
    assert _group_members(supervisor) == []
    assert not psutil.pid_exists(server) or psutil.Process(server).status() == psutil.STATUS_ZOMBIE
