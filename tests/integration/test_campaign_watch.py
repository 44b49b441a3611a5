"""The campaign's revert watch on a REAL run, and the experiment's HTML report in headless Chromium.

A served part `short-context` is a profile of its own (llamacpp-cpu with a 512-token context). A
registered 1-block experiment (two engine starts of llama.cpp, seconds each: what is checked here is the
watch, not the engine, so the cheapest real one) replays one short and one long request with it and with
plain llamacpp-cpu: the real engine answers the long one (about 750 tokens) with HTTP 400 only in the
part's arm. The watch must fire the part's `treatment_only_failures` and `pass_rate_drop` rules at the end of
`frank experiment run`, `frank campaign status` must show it, and `revert` must then go through without a
reason. The report page is rendered by Chromium with its plots.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import tomli_w

from frank.engine.profiles import BUILTIN_DIR
from frank.paths import user_profiles_dir
from frank.workloads.format import write_workload
from tests import chromium

pytestmark = pytest.mark.engine

CODE = "def add(a, b):\n    return a + b  # sums two numbers\n"

CAMPAIGN = """version = 1
name = "watch-test"

[[parts]]
name = "short-context"
title = "serve with a 512-token context"
profile = "llamacpp-cpu-ctx512"
state = "served"

[[parts.evidence]]
state = "served"
policy = "served to save memory, pending its test"

[[parts.revert_rules]]
name = "only-part-fails"
kind = "treatment_only_failures"

[[parts.revert_rules]]
name = "lower-pass-rate"
kind = "pass_rate_drop"
max_drop = 0.0
"""

DESIGN = """
name = "watch-short-context"
question = "Is a 512-token context as good as the full one on two review requests?"
profile = "llamacpp-cpu"

[[arms]]
name = "ctx512"
profile = "llamacpp-cpu-ctx512"

[[arms]]
name = "full"

[design]
kind = "blocks"
blocks = 1

[workload]
name = "{workload}"
mode = "full"

[measure]
name = "total_replay_time"

[rule]
test = "sign"
treatment = "ctx512"
control = "full"
direction = "lower"

[failure]
action = "retry"
max_retries = 0
"""


def short_profile() -> None:
    data = tomllib.loads((BUILTIN_DIR / "llamacpp-cpu.toml").read_text())
    data.update(name="llamacpp-cpu-ctx512", max_model_len=512, description="llamacpp-cpu with a 512-token context")
    data["knobs"]["context"].update(values=[512], default=512)
    del data["knobs"]["context"]["with_args"]  # YaRN is for 32768 only
    user_profiles_dir().mkdir(parents=True, exist_ok=True)
    (user_profiles_dir() / "llamacpp-cpu-ctx512.toml").write_text(tomli_w.dumps(data))


def workload(path: Path) -> Path:
    def request(rid: str, turn: int, text: str) -> dict:
        return {
            "id": rid,
            "task": "review",
            "episode": "e1",
            "turn": turn,
            "offset_s": 0.0,
            "body": {
                "model": "smollm2-135m",
                "max_tokens": 8,
                "temperature": 0,
                "messages": [{"role": "user", "content": f"Review this:\n{text}"}],
            },
        }

    records = [request("short", 1, CODE), request("long", 2, CODE * 40)]  # about 50 and 750 tokens
    return write_workload(path, "ctx-check", "one short, one long request", [("1", records)])


async def console_shows_the_fired_rule() -> None:
    from textual.widgets import DataTable

    from frank.console.app import FrankApp, Services
    from frank.engine.controller import EngineController
    from tests.console.conftest import wait_until

    app = FrankApp(Services(controller=EngineController()), poll_status=False, remember_theme=False, offer_start=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("5")
        table = app.screen.query_one("#parts-board", DataTable)
        assert await wait_until(pilot, lambda: table.row_count == 1, timeout_s=30)
        assert str(table.get_row("short-context")[3]) == "FIRED: only-part-fails, lower-pass-rate"
        assert str(table.get_row("short-context")[4]).startswith("revert: rule only-part-fails fired")
        assert "REVERT RULE FIRED" in str(app.screen.query_one("#campaign-status").content)


@pytest.mark.timeout(1200)
async def test_a_revert_rule_fires_on_a_real_experiment_and_its_report_renders(
    frank_cli, fresh_frank_home: Path, tmp_path: Path
) -> None:
    short_profile()
    config = fresh_frank_home / "config"
    (config / "campaign.toml").write_text(CAMPAIGN)
    init = frank_cli("campaign", "init", "--json", timeout=120)
    assert init.returncode == 0, init.stderr
    design = tmp_path / "design.toml"
    design.write_text(DESIGN.format(workload=workload(tmp_path / "wl")))
    reg = frank_cli("experiment", "register", str(design), "--json", timeout=120)
    assert reg.returncode == 0, reg.stderr
    run_id = json.loads(reg.stdout)["run_id"]

    before = frank_cli("campaign", "revert", "short-context", timeout=120)  # nothing fired yet: a reason is needed
    assert before.returncode == 1 and "no revert rule has fired" in before.stderr

    run = frank_cli("experiment", "run", run_id, "--json", timeout=1000)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "REVERT RULE FIRED: part short-context, rule only-part-fails" in run.stderr  # at once, in the CLI

    report = json.loads(frank_cli("experiment", "report", run_id, "--json", timeout=120).stdout)
    guards = {g["name"]: g for g in report["guards"]}
    assert guards["no_failed_requests"]["status"] == "fail"  # the failed request is real and recorded
    status = json.loads(frank_cli("campaign", "status", "--json", timeout=120).stdout)
    part = next(p for p in status["parts"] if p["name"] == "short-context")
    rules = {r["name"]: r["last_check"] for r in part["revert_rules"]}
    assert rules["only-part-fails"]["outcome"] == "fired"
    assert rules["only-part-fails"]["run_id"] == run_id and rules["only-part-fails"]["run_kind"] == "experiment"
    assert rules["only-part-fails"]["detail"].startswith("1 failure(s) with the part, 0 without")
    assert rules["lower-pass-rate"]["outcome"] == "fired"
    assert part["up_next"].startswith("revert: rule only-part-fails fired")
    assert any("only-part-fails" in line for line in status["alerts"])

    await console_shows_the_fired_rule()

    reverted = frank_cli("campaign", "revert", "short-context", "--json", timeout=120)  # the fired rule is the evidence
    assert reverted.returncode == 0, reverted.stderr
    out = json.loads(reverted.stdout)
    assert out["state"] == "reverted" and out["rule"]["run_id"] == run_id and out["reason"] is None
    history = json.loads(frank_cli("campaign", "history", "--json", timeout=120).stdout)["events"]
    assert [e["event"] for e in history] == ["init", "check", "revert"]

    page = tmp_path / "report.html"
    wrote = frank_cli("experiment", "report", run_id, "--html", str(page), timeout=120)
    assert wrote.returncode == 0, wrote.stderr
    dom = chromium.dump_dom(page.as_uri(), tmp_path)
    assert run_id in dom and json.loads(reg.stdout)["design_sha256"] in dom
    assert dom.count("<svg") >= 2 and 'id="plot-values"' in dom and 'id="plot-effects"' in dom
    assert "NOT CONFIRMED" in dom.upper() and "no_failed_requests" in dom
    png = chromium.screenshot(page.as_uri(), tmp_path / "report.png")
    assert chromium.colours(png) > 20, "the page rendered with its plots, not blank"
