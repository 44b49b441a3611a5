"""The fleet's edges without a cluster: the fleet file's refusals (FILE:LINE and the field), a design's
`hosts` (refused where it cannot mean anything), blocks dealt to hosts in drawn order, the scrape config, the
exporter's labels, and that `import frank` and the CLI's start import no Ray."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from frank.experiments.design import DesignError, parse_design_text
from frank.experiments.randomize import Slot, hosts_by_slot
from frank.fleet.fleetfile import FleetError, load_fleet
from frank.fleet.prometheus import scrape_config
from frank.paths import REPO_ROOT
from tests.unit.experiment_helpers import BALANCED_DESIGN, BLOCKS_DESIGN, FLEET


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    return path


def test_a_fleet_file_reads_hosts_in_order(tmp_path: Path) -> None:
    fleet = load_fleet(write(tmp_path, FLEET))
    assert [(h.name, h.exporter, h.resource) for h in fleet.hosts] == [
        ("a", "127.0.0.1:9464", "host-a"),
        ("b", "127.0.0.1:9465", "host-b"),
    ]
    assert fleet.prometheus_url == "http://127.0.0.1:9090" and fleet.scrape_interval_s == 2 and fleet.ray_address == ""
    with pytest.raises(FleetError, match="no host 'c'"):
        fleet.host("c")


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ('"127.0.0.1:9465"', '"127.0.0.1:70000"', ":10: hosts.b.exporter: expected HOST:PORT"),
        ('"127.0.0.1:9465"', '"nowhere"', ":10: hosts.b.exporter: expected HOST:PORT"),
        ('"host-b"', '"host-a"', ":5: hosts: two hosts name the Ray resource 'host-a'"),
        ("scrape_interval_s = 2", "scrape_interval_s = 0", ":3: prometheus.scrape_interval_s: must be at least 1"),
        ("scrape_interval_s = 2", "scrape_every = 2", ":3: prometheus.scrape_every: unknown field"),
        ("[hosts.b]", '[hosts."b c"]', ":5: hosts: host name 'b c'"),
        ('resource = "host-b"', "resource = 7", ":11: hosts.b.resource: expected a string"),
    ],
)
def test_a_wrong_field_is_named_with_its_line(tmp_path: Path, old: str, new: str, where: str) -> None:
    path = write(tmp_path, FLEET.replace(old, new))
    with pytest.raises(FleetError) as exc:
        load_fleet(path)
    assert str(exc.value).startswith(f"{path}{where}"), str(exc.value)


def test_a_fleet_without_hosts_or_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match="hosts: missing required field"):
        load_fleet(write(tmp_path, '[prometheus]\nlisten = "127.0.0.1:9090"\n'))
    with pytest.raises(FleetError, match="no fleet file"):
        load_fleet(tmp_path / "absent.toml")


def with_hosts(design: str, hosts: str) -> str:
    return design.replace('kind = "blocks"\n', f'kind = "blocks"\nhosts = {hosts}\n')


def test_hosts_join_the_design_and_its_hash_only_when_set() -> None:
    plain = parse_design_text(BLOCKS_DESIGN)
    placed = parse_design_text(with_hosts(BLOCKS_DESIGN, '["a", "b"]'))
    assert plain.hosts == () and placed.hosts == ("a", "b")
    assert '"hosts"' not in plain.canonical and plain.sha256 != placed.sha256  # older designs keep their hash


@pytest.mark.parametrize(
    ("hosts", "message"),
    [
        ("[]", "design.hosts: must list at least one host"),
        ('["a", "a"]', "design.hosts[1]: 'a' is listed twice"),
        ('["a", "b c"]', "design.hosts[1]: expected a host name"),
        ('"a"', "design.hosts: expected an array"),
    ],
)
def test_bad_hosts_are_refused_at_their_line(hosts: str, message: str) -> None:
    with pytest.raises(DesignError) as exc:
        parse_design_text(with_hosts(BLOCKS_DESIGN, hosts), "d.toml")
    assert str(exc.value).startswith("d.toml:16: ") and message in str(exc.value), str(exc.value)


def test_only_blocks_designs_deal_hosts() -> None:
    text = BALANCED_DESIGN.replace('kind = "balanced"\n', 'kind = "balanced"\nhosts = ["a"]\n')
    with pytest.raises(DesignError, match="only a 'blocks' design deals blocks to hosts"):
        parse_design_text(text)


def test_blocks_are_dealt_to_hosts_in_drawn_order() -> None:
    slots = tuple(Slot(i, arm, block) for i, (arm, block) in enumerate(
        [("x", 3), ("y", 3), ("y", 1), ("x", 1), ("x", 2), ("y", 2)]))  # fmt: skip
    assert hosts_by_slot(("a", "b"), slots) == {0: "a", 1: "a", 2: "b", 3: "b", 4: "a", 5: "a"}
    assert set(hosts_by_slot(("a",), slots).values()) == {"a"}


def test_the_scrape_config_labels_each_target_with_its_host(tmp_path: Path) -> None:
    text = scrape_config(load_fleet(write(tmp_path, FLEET)))
    assert "scrape_interval: 2s" in text and "scrape_timeout: 2s" in text  # silent within one interval
    assert '- targets: ["127.0.0.1:9464"]\n        labels: {host: "a"}' in text
    assert '- targets: ["127.0.0.1:9465"]\n        labels: {host: "b"}' in text


def test_the_exporter_puts_the_activity_labels_on_every_series(fresh_frank_home: Path) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from frank.telemetry.activity import activity_labels, clear_activity, write_activity
    from frank.telemetry.export import SnapshotCollector
    from frank.telemetry.sampler import Sampler, static_target

    write_activity(experiment="run-1", arm="a2", part="held-prompt")
    sampler = Sampler(static_target(None), period_s=1.0, gpu=False)
    try:
        snap = sampler.sample_once()
    finally:
        sampler.stop()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snap, lambda: activity_labels("llamacpp-cpu-moe")))
    lines = [l for l in generate_latest(registry).decode().splitlines() if l and not l.startswith("#")]
    assert lines and all(
        'arm="a2"' in l
        and 'experiment="run-1"' in l
        and 'part="held-prompt"' in l
        and 'profile="llamacpp-cpu-moe"' in l
        for l in lines
    )
    clear_activity()
    assert activity_labels(None) == {"profile": "", "experiment": "", "arm": "", "part": ""}


def test_import_frank_and_the_cli_start_without_ray() -> None:
    code = "import sys, frank.console.cli, frank.experiments.registry; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


def test_a_run_of_a_campaign_parts_design_records_the_part(frank_cli, fresh_frank_home: Path) -> None:
    """What the exporter's `part` label of a placed cell is read from (run.json's `part`)."""
    designs = REPO_ROOT / "frank/experiments/designs"
    campaign = fresh_frank_home / "config" / "campaign.toml"
    campaign.parent.mkdir(parents=True, exist_ok=True)
    campaign.write_text(
        'version = 1\nname = "t"\n\n[[parts]]\nname = "cache"\nprofile = "embedded-cpu"\n'
        'knobs = { region_cache = "on" }\nstate = "candidate"\ndesign = "@designs/region-cache-on-off.toml"\n'
    )

    def part_of(design: str, *more: str) -> Any:
        out = frank_cli.json("experiment", "register", str(designs / design), *more, home=fresh_frank_home)
        meta = json.loads((Path(out["folder"]) / "run.json").read_text())
        assert meta.get("part") == out["part"]
        return out["part"]

    assert part_of("region-cache-on-off.toml") == "cache"
    assert part_of("region-cache-on-off.toml", "--campaign", str(fresh_frank_home / "none.toml")) is None
    others = sorted(p.name for p in designs.glob("*.toml") if p.name != "region-cache-on-off.toml")
    assert part_of(others[0]) is None  # a design no part names
