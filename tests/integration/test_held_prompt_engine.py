"""The held-prompt part inside the real embedded vLLM engine (the shared session engine), and the campaign's
revert loop on it.

1. Outputs identical: a three-turn conversation (each turn's prompt the last one plus a turn, 1.5K-3K
   tokens) generated greedily with the part off and then on (flipped live), then on with the region cache
   on too (the common prefix found region by region); everything the client gets is compared (generated
   token IDs, text, logprobs with alternatives, prompt token IDs). The part's counters must show later
   turns went as deltas, and the prompts the engine core rebuilt and holds must hash the same as the
   prompt token IDs the API server returned.
2. The revert loop: the part is served from a campaign (on a policy call: an adoption needs a registered
   8-start run, which a test cannot afford), a replay without it is the control, a replay with it is
   checked ok, then the part is broken on purpose with its own fault (`lost-sync`: the API-server half names
   a held prompt the engine core never held in every delta, the two halves out of step; the engine core's
   check fails those requests rather than guess) and a third replay fails only there: `frank campaign watch`
   fires `treatment_only_failures`, `frank campaign revert` needs no reason and puts the profile default
   back, and `frank engine knob held_prompt off` turns it off on the running engine.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import httpx
import pytest

from frank.engine.parts_client import PartsClient
from frank.paths import user_profiles_dir
from frank.plugins.front_end.held_prompt import FAULT_LOST_SYNC, prompt_digest
from frank.workloads.format import write_workload

pytestmark = pytest.mark.engine

CONTEXT = "Repository context follows.\n" + "".join(
    f"src/mod_{i}.py: def handler_{i}(req):  # ünï 🙂\n    return req.get('id') or {i}\n" for i in range(70)
)
TURNS = [
    ("Fix handler_7.", "I changed handler_7 to return the id or 7, and added a test for the empty request."),
    ("Now handler_12, and explain.", "handler_12 now checks the key first; explained in the docstring below."),
    ("Run the tests.", ""),
]


def _conversation(context: str = CONTEXT) -> list[list[dict]]:
    """The messages of each turn: the system context, then every earlier user/assistant pair."""
    out, msgs = [], [{"role": "system", "content": context}]
    for user, assistant in TURNS:
        msgs = msgs + [{"role": "user", "content": user}]
        out.append(list(msgs))
        msgs = msgs + [{"role": "assistant", "content": assistant}]
    return out


@pytest.fixture
def parts(engine):
    client = PartsClient(engine.status().url, engine.token)
    yield client
    client.set_fault("held-prompt", None)
    engine.set_knob("held_prompt", "off")
    engine.set_knob("region_cache", "off")


def _chat(url: str, messages: list[dict]) -> dict:
    body = {
        "model": "tiny-frank",
        "messages": messages,
        "temperature": 0.0,
        "max_tokens": 12,
        "logprobs": True,
        "top_logprobs": 3,
        "return_token_ids": True,
        # a fresh prefix-cache namespace: each prompt computed whole, so logprobs cannot differ by how much
        # of the prompt came from vLLM's prefix cache
        "cache_salt": secrets.token_hex(8),
    }
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    out = r.json()
    return {"choices": out["choices"], "prompt_token_ids": out["prompt_token_ids"]}


def test_outputs_identical_with_the_held_prompt_on_and_off(engine, parts):
    url = engine.status().url
    engine.set_knob("held_prompt", "off")
    off = [_chat(url, m) for m in _conversation()]
    assert all(len(o["prompt_token_ids"]) > 1100 for o in off)  # above the part's MIN_TOKENS: all eligible

    before = parts.part("held-prompt")
    assert engine.set_knob("held_prompt", "on").applied == "live"
    on = [_chat(url, m) for m in _conversation()]
    assert on == off

    after = parts.part("held-prompt")
    api = {k: v - before["counts"].get(k, 0) for k, v in after["counts"].items()}
    core = {k: v - before["engine_core"]["counts"].get(k, 0) for k, v in after["engine_core"]["counts"].items()}
    assert api.get("sent_delta", 0) >= 2 and core.get("rebuilt", 0) == api["sent_delta"]  # later turns: deltas
    assert core.get("tokens_not_decoded", 0) > 2 * 1100
    assert core.get("hashes_reused", 0) == 0  # each request its own cache salt: no block hash reused across salts
    assert after["counts"].get("errors", 0) == 0 and after["engine_core"]["counts"].get("errors", 0) == 0
    # vLLM's copy is the prompt held for the next turn, the rebuilt list the one that grows (idle_release.py:
    # what the requests left behind was freed in the engine core's idle time, between them)
    assert core.get("token_lists_swapped", 0) == core["rebuilt"]
    assert after["engine_core"]["idle_release"]["released"] > before["engine_core"]["idle_release"]["released"]
    # the engine core holds exactly the prompts the API server returned: rebuilt, not just sent
    held = {h["sha256"] for h in after["engine_core"]["held"]}
    assert {prompt_digest(o["prompt_token_ids"]) for o in on} <= held

    # with the region cache on, the common prefix is found region by region from the cache's records (the
    # lists vLLM hands to the engine client are the very lists the encoder returned). Another context, so
    # the turns above (held, and equal to these) are not the longest common prefix: each later turn's is
    # the previous turn of this conversation, which the cache encoded
    other = _conversation("Second checkout. " + CONTEXT)
    engine.set_knob("held_prompt", "off")
    engine.set_knob("region_cache", "on")
    off_cached = [_chat(url, m) for m in other]
    after = parts.part("held-prompt")
    engine.set_knob("held_prompt", "on")
    on_cached = [_chat(url, m) for m in other]
    assert on_cached == off_cached
    final = parts.part("held-prompt")
    api = {k: v - after["counts"].get(k, 0) for k, v in final["counts"].items()}
    core = {k: v - after["engine_core"]["counts"].get(k, 0) for k, v in final["engine_core"]["counts"].items()}
    assert api.get("sent_delta", 0) >= 2 and core.get("rebuilt", 0) == api["sent_delta"]
    assert api.get("compared_by_regions", 0) >= 2 and final["engine_core"]["counts"].get("errors", 0) == 0
    held = {h["sha256"] for h in final["engine_core"]["held"]}
    assert {prompt_digest(o["prompt_token_ids"]) for o in on_cached} <= held


def test_a_broken_served_part_is_sent_back_by_the_revert_watch(frank_cli, engine, parts, tmp_path: Path):
    records = [
        {
            "id": f"t{k + 1}",
            "task": "t",
            "episode": "e",
            "turn": k + 1,
            "offset_s": 0.0,
            "body": {"model": "tiny-frank", "max_tokens": 1, "temperature": 0, "messages": msgs},
        }
        for k, msgs in enumerate(_conversation())
    ]
    workload = write_workload(tmp_path / "wl", "held-prompt-loop", "three turns", [("1", records)])
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(
        'version = 1\nname = "revert-loop"\n\n[[parts]]\nname = "held-prompt"\nprofile = "embedded-cpu"\n'
        'knobs = { held_prompt = "on" }\nstate = "passed"\n'
        'design = "@designs/part-held-prompt.toml"\n\n[[parts.evidence]]\nstate = "passed"\n'
        'policy = "the revert loop test: passed on a policy call"\n\n[[parts.revert_rules]]\n'
        'name = "only-held-prompt-fails"\nkind = "treatment_only_failures"\n'
    )
    override = user_profiles_dir() / "embedded-cpu.toml"
    had_override = override.exists()
    try:
        assert frank_cli("campaign", "init", "--file", str(campaign)).returncode == 0
        served = frank_cli(
            "campaign", "serve", "held-prompt", "--policy", "to watch it", "--file", str(campaign), "--json"
        )
        assert served.returncode == 0, served.stderr
        assert json.loads(served.stdout)["takes_effect"]["running_engine"]["differs"] == {"held_prompt": "off"}

        def replay() -> str:
            res = frank_cli("replay", str(workload), "--json", "--quiet")
            assert res.returncode in (0, 1), res.stderr[-2000:]
            return json.loads(res.stdout)["run_id"]

        engine.set_knob("held_prompt", "off")
        control = replay()
        assert frank_cli("engine", "knob", "held_prompt", "on").returncode == 0  # what serve's answer says to do
        healthy = replay()
        parts.set_fault("held-prompt", FAULT_LOST_SYNC)  # broken on purpose, on the running engine
        broken = replay()
        assert parts.part("held-prompt")["counts"].get("faulted", 0) == 3  # every turn went as a broken delta

        watch = frank_cli("campaign", "watch", "--file", str(campaign), "--json")
        assert watch.returncode == 0, watch.stderr
        checks = {c["run_id"]: c for c in json.loads(watch.stdout)["new_checks"]}
        assert checks[healthy]["control"]["run_id"] == control and checks[healthy]["fired"] == []
        fired = checks[broken]
        assert fired["control"]["run_id"] == control and fired["fired"] == ["only-held-prompt-fails"]
        assert fired["rules"][0]["detail"] == "3 failure(s) with the part, 0 without"

        status = json.loads(frank_cli("campaign", "status", "--file", str(campaign), "--json").stdout)
        assert status["parts"][0]["fired"], status["parts"][0]
        reverted = frank_cli("campaign", "revert", "held-prompt", "--file", str(campaign), "--json")
        assert reverted.returncode == 0, reverted.stderr  # no --reason: the fired rule is the reason
        out = json.loads(reverted.stdout)
        assert out["state"] == "reverted" and out["rule"]["run_id"] == broken
        assert out["restored_defaults"] == {"held_prompt": "off"}
        assert 'default = "off"' in override.read_text().split("[knobs.held_prompt]")[1].split("[knobs.")[0]
        assert frank_cli("engine", "knob", "held_prompt", "off").returncode == 0
        assert parts.part("held-prompt")["enabled"] is False
    finally:
        if not had_override:
            override.unlink(missing_ok=True)  # the session's other tests see the built-in profile again
