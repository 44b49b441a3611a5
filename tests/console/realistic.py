"""A console state as a working session leaves it, built by hand from the real view types (no files, no
sources): a W01 mini replay running (its first draw done, the region cache flipped on in the second), a finished
one, a fidelity run and an interrupted episodes run in the jobs table; a screen run with its pick; a
campaign of three parts; an episodes run; a fleet of two hosts. The snapshot tests render every screen from
it at 80x24 and 120x40, and `KNOWN` lists the figures each screen must show whole."""

from __future__ import annotations

from dataclasses import replace

from frank.console.state import (
    CampaignPart,
    CampaignView,
    ConsoleState,
    EpisodeRunRow,
    EpisodesView,
    ExperimentsView,
    FidelityRun,
    FidelitySet,
    FidelityView,
    FleetView,
    FollowedExperiment,
    FollowedJob,
    JobRecord,
    JobsView,
    SuiteRow,
    WorkloadRow,
)
from frank.episodes.runner import EpisodesState, LiveEpisode
from frank.experiments.board import CellView, ExperimentState
from frank.experiments.screen import ScreenResult, SettingResult
from frank.fleet.query import HostStatus
from frank.jobs import JobStatus
from frank.workloads.record import KnobFlip

RUNNING = "20261207-101502-w01-mini-full-3f9a"
FINISHED = "20261207-093011-w01-mini-full-c2d1"
SCREEN_RUN = "20261207-081500-cpu-pool-local-9b0e"
TASKS = ("fi", "re", "te")


def request(draw: int, n: int, cache: str, flips: tuple[KnobFlip, ...] = ()) -> JobRecord:
    """The n-th request of a draw, with timings of the size W01 mini gives on the CPU engine."""
    rid = f"d{draw}-{TASKS[n % 3]}-r{n:02d}"
    front = 0.0081 if cache == "on" else 0.1337 + 0.01 * (n % 4)
    prefill = 1.104 + 0.021 * n
    return JobRecord(
        draw=f"draw-{draw}",
        id=rid,
        status="ok",
        ttft_s=front + prefill + 0.0003,
        queue_s=0.0003,
        prefill_s=prefill,
        front_end_s=front,
        prompt_tokens=11_600 + 431 * n,
        timed=True,
        live_knobs=(("region_cache", cache), ("detok_tail", "off"), ("held_prompt", "off")),
        flips=flips,
    )


FLIP = KnobFlip("region_cache", "off", "on", 4, "d2-re-r04")  # `c` pressed between two requests of draw-2


def draw_totals(ok: int, planned: int, flips: tuple[KnobFlip, ...] = ()) -> dict[str, object]:
    return {
        "ok": ok,
        "planned": planned,
        "failed": 0,
        "ttft_s": 61.82 * ok / 45,
        "queue_s": 0.0141 * ok / 45,
        "prefill_s": 58.37 * ok / 45,
        "front_end_s": 3.431 * ok / 45,
        "verify_step_s": 0.01372,
        "acceptance_length": 2.61,
        "knob_flips": [
            {"name": f.name, "old": f.old, "new": f.new, "index": f.index, "request": f.request, "during": f.during}
            for f in flips
        ],
    }


def replay_job(run_id: str, state: str, parts: dict[str, tuple[int, int]], draws: dict[str, object]) -> JobStatus:
    done = sum(d for d, _ in parts.values())
    return JobStatus(
        run_id=run_id,
        kind="replay",
        state=state,  # type: ignore[arg-type]
        done=done,
        planned=sum(p for _, p in parts.values()),
        pid=4711 if state == "running" else None,
        run_dir=f"/home/op/.local/share/frank/runs/replays/{run_id}",
        detail=f"{done} ok, 0 failed",
        parts=parts,
        extra={"draws": draws, "mode": "full", "workload": "w01-mini", "error": None},
    )


def jobs_view() -> JobsView:
    running = replay_job(
        RUNNING,
        "running",
        {"draw-1": (45, 45), "draw-2": (7, 45), "draw-3": (0, 45)},
        {"draw-1": draw_totals(45, 45), "draw-2": draw_totals(7, 45, (FLIP,))},
    )
    finished = replay_job(
        FINISHED,
        "finished",
        {"draw-1": (45, 45), "draw-2": (45, 45), "draw-3": (45, 45)},
        {f"draw-{d}": draw_totals(45, 45) for d in (1, 2, 3)},
    )
    fidelity = JobStatus("20261207-070102-run-77aa", "fidelity", "finished", 3, 3, None, "/f", "3 sets")
    episodes = JobStatus("20261206-221500-w01-mini-a1b2c3", "episodes", "interrupted", 4, 12, None, "/e", "")
    records = tuple(request(1, n, "off") for n in range(45))
    records += tuple(request(2, n, "off" if n < 4 else "on", (FLIP,) if n == 4 else ()) for n in range(7))
    followed = FollowedJob(RUNNING, running, records, len(records))
    workloads = (
        WorkloadRow("w01-mini", "3 × 45", "synthetic W01"),
        WorkloadRow("w01-full", "3 × 45", "synthetic W01 (made on first use)"),
        WorkloadRow("agent-tuesday", "1 × 212", "recording"),
    )
    return JobsView((running, finished, fidelity, episodes), workloads, followed)


def screen_result() -> ScreenResult:
    def setting(name: str, values: tuple[float, ...], wins: int, control: bool = False) -> SettingResult:
        median = sorted(values)[len(values) // 2]
        effects = tuple(None if control else (v / c - 1) * 100 for v, c in zip(values, (0.04121, 0.04098)))
        return SettingResult(name, {}, values, median, sum(values) / 2, effects, wins, 2, wins == 2, control)

    settings = (
        setting("default", (0.04121, 0.04098), 0, control=True),
        setting("threads-1", (0.03177, 0.03202), 2),
        setting("poll-50", (0.04013, 0.04155), 1),
        setting("sched-2", (0.03844, 0.03791), 2),
    )
    return ScreenResult(
        "cpu-pool-local", "ab" * 32, "time_per_verify_step", "lower", 2, True, settings, "threads-1",
        "threads-1: the best median of the 2 candidates that beat the control in 2 of 2 repeats", 3.1, 6,
    )  # fmt: skip


def experiments_view() -> ExperimentsView:
    from frank.console.sources.experiments import design_row, screen_files, screen_row
    from frank.experiments.registry import BUILTIN_DESIGNS

    # the shipped screen for this machine and the seed's designs (files a later change leaves alone)
    local = next(p for p in screen_files() if p.stem == "cpu-pool-local")
    rows = (screen_row(local), *(design_row(p) for p in sorted(BUILTIN_DESIGNS.glob("seed-*.toml"))))

    cells = tuple(
        CellView(i, i + 1, i // 4 + 1, arm, "done", 1, value)
        for i, (arm, value) in enumerate(
            [("default", 0.04121), ("threads-1", 0.03177), ("poll-50", 0.04013), ("sched-2", 0.03844)]
            + [("sched-2", 0.03791), ("default", 0.04098), ("poll-50", 0.04155), ("threads-1", 0.03202)]
        )
    )
    state = ExperimentState(
        SCREEN_RUN, "cpu-pool-local", "screen", "cd" * 32, "finished", None, None, cells, (), 0, 0, 0, 0, True,
        None, None,
    )  # fmt: skip
    followed = FollowedExperiment(SCREEN_RUN, state, None, None, "", screen_result())
    fidelity = FidelityRun(
        "20261207-070102-run-77aa",
        "run",
        (("dtype", "float32"),),
        (
            FidelitySet("code", 1.9e-7, 2.1e-7, 0.9),
            FidelitySet("agent", 2.4e-7, 2.2e-7, 1.09),
            FidelitySet("prose", 1.2e-7, 1.5e-7, 0.8),
        ),
    )
    return ExperimentsView(rows, (SCREEN_RUN,), followed, FidelityView(fidelity, None))


def episodes_view() -> EpisodesView:
    episodes = tuple(
        LiveEpisode(1, task, turns, tool, 1.7e9, outcome, client)
        for task, turns, tool, outcome, client in (
            ("fix-parser", 9, "bash", "pass", 212.4),
            ("rename-api", 14, "text_editor", "fail", 388.1),
            ("add-test", 6, "python", "pass", 141.9),
            ("explain-log", 3, "bash", "pass", 52.3),
        )
    )
    run = EpisodesState(
        "20261206-221500-w01-mini-a1b2c3", "w01-mini", "interrupted", None, 12, 4, episodes,
        ({"draw": 1, "total_s": 794.7, "passed": 3, "episodes": 4},), "the engine stopped answering",
    )  # fmt: skip
    rows = (EpisodeRunRow(run.run_id, "w01-mini", "interrupted", 4, 12, 794.7, 3),)
    suites = (SuiteRow("w01-mini", "frank/episodes/suites/w01/mini.toml", 6), SuiteRow("w01-full", "full.toml", 6))
    return EpisodesView(suites, rows, run)


def campaign_view() -> CampaignView:
    def part(name: str, state: str, evidence: str, rules: str, up_next: str) -> CampaignPart:
        return CampaignPart(name, state, evidence, rules, up_next, f"{name}: {evidence}", "embedded-cpu", "", "")

    return CampaignView(
        "/home/op/.config/frank/campaign.toml",
        "seed",
        (),
        (
            part("region-cache", "served", "confirmed, p = 1/70, region-cache-gpu", "front_end: ok (3 runs)", "watch"),
            part("schedule-2", "adopted", "confirmed, p = 1/32, seed-schedule-2", "verify_step: ok", "serve"),
            part("block-hash-memo", "rejected", "not confirmed, p = 0.34", "–", "nothing"),
        ),
    )


def fleet_view() -> FleetView:
    figures = {
        "cpu_percent": 41.0,
        "gpu_util_percent": 87.0,
        "gpu_memory_used_bytes": 88.6 * 2**30,
        "gpu_memory_total_bytes": 96 * 2**30,
        "pcie_bytes_per_s": 9.1e9,
        "cpu_pool_busy_percent": 76.0,
        "cpu_pool_threads": 24.0,
        "verify_step_s": 0.0412,
        "tokens_per_s": 38.2,
    }
    hosts = (
        HostStatus("ws-a", "10.0.0.11:9464", True, "ready", {"profile": "frankenstein"}, figures,
                   {"tokens_per_s": [30.0, 34.5, 38.2, 36.0, 38.2]}),
        HostStatus("ws-b", "10.0.0.12:9464", False, "not answering", {}, dict.fromkeys(figures)),
    )  # fmt: skip
    return FleetView("/home/op/.config/frank/fleet.toml", "http://127.0.0.1:9090", hosts)


def session(base: ConsoleState) -> ConsoleState:
    """`base` (its engine and telemetry) with every other view of a working session."""
    return replace(
        base,
        jobs=jobs_view(),
        experiments=experiments_view(),
        episodes=episodes_view(),
        campaign=campaign_view(),
        fleet=fleet_view(),
    )


# What each screen must show whole (never cut mid-number), with the key that opens it.
KNOWN: dict[str, tuple[str, tuple[str, ...]]] = {
    "dashboard": ("1", ("● ready", "embedded-cpu", "52/135", "verify step")),
    "replays": (
        "2",
        (
            "● running",
            "d2-fi-r06",  # the newest request row: the table follows new rows
            "1.24 s",  # its TTFT
            "14186",  # its prompt tokens
            "→on",  # the request served first after the flip, marked
            "draw-2 7/45 ok · 0 failed · spans a flip",  # draw summaries scroll: the newest is in sight
            "region_cache off → on at d2-re-r04",
            "total front end 534 ms",
        ),
    ),
    "replays-menu": ("m", ("running", "52/135", "finished", "135/135", "interrupted", "4/12")),
    "experiments": ("3", ("cpu-pool-local", "threads-1 ◀ pick", "0.03177", "0.04098")),
    "campaign": ("5", ("region-cache", "SERVED", "p = 1/70")),
    "episodes": ("6", ("fix-parser", "388.1 s", "4/12", "794.70")),
    "fleet": ("7", ("ws-a", "38.2", "88.6/96 GiB", "not answering")),
}
