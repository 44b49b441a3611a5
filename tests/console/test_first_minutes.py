"""A newcomer's first minutes, piece by piece: the words for a machine without NVIDIA's driver, vLLM's exit
chatter after a clean stop folded away, what quitting leaves running, the jobs table's rows (whole figures,
the followed job's own state) and the request table's marks for a live knob's flip."""

from __future__ import annotations

import dataclasses

from frank.console.app import quit_message
from frank.console.log_follow import fold_shutdown
from frank.console.screens.jobs_text import job_cells
from frank.console.screens.replays import request_cells
from frank.console.state import ConsoleState, JobsView
from frank.console.widgets.gpu_panel import no_gpu_words
from frank.jobs import JobStatus
from tests.console.conftest import READY, fixed_engine
from tests.console.realistic import FLIP, jobs_view, request


def test_no_nvml_reads_as_no_nvidia_driver():
    assert no_gpu_words("no GPU telemetry (NVML Shared Library Not Found)") == (
        "no NVIDIA driver on this machine: no GPU telemetry"
    )
    assert no_gpu_words("no GPU telemetry (Driver Not Loaded)").startswith("the NVIDIA driver is installed but not")
    assert no_gpu_words("no GPU telemetry (GPU is lost)") == "no GPU telemetry (GPU is lost)"  # as NVML says it
    assert no_gpu_words(None) == "no GPU telemetry (no NVIDIA device)"


# What vLLM 0.32 (CPU build) printed here when `frank engine stop` stopped it (SIGTERM) after its start
# (shortened: the leak reports run to about 60 lines): the "[shutdown]" steps, force-killed workers,
# uvicorn's shutdown, nanobind's and multiprocessing's leak reports, then the supervisor's last line.
STOPPED_LOG = [
    "INFO:     Application startup complete.",
    "(EngineCore pid=10907) INFO 12-07 02:56:52 [core.py:1454] [shutdown] EngineCore: trigger received signal=SIGTERM",
    "(APIServer pid=10659) INFO 12-07 02:56:52 [launcher.py:254] [shutdown] API server: shutdown triggered",
    "(APIServer pid=10659) WARNING 12-07 02:56:52 [utils.py:648] [shutdown] Process manager: force killing "
    "remaining processes count=1",
    "(APIServer pid=10659) WARNING 12-07 02:56:52 [system_utils.py:225] [shutdown] force killing sub process "
    "VLLM::Worker pid 11220",
    "INFO:     Shutting down",
    "INFO:     Application shutdown complete.",
    "nanobind: leaked 4 instances!",
    ' - leaked instance 0x7fb4eda54bc8 of type "triton._C.libtriton.ir.attribute"',
    "nanobind: leaked 64 types!",
    "/root/.pyenv/versions/3.11.7/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: "
    "resource_tracker: There appear to be 2 leaked shared_memory objects to clean up at shutdown",
    "  warnings.warn('resource_tracker: There appear to be %d '",
    "[frank] 2026-12-07 02:56:53 server exited: exit code 0",
]


def test_a_clean_stops_shutdown_chatter_is_folded_out_of_the_tail():
    lines, folded = fold_shutdown(STOPPED_LOG)
    assert folded == 10
    assert lines == (*STOPPED_LOG[:2], STOPPED_LOG[-1])  # what came before, the shutdown's start, the end
    assert not any("leaked" in line or "WARNING" in line for line in lines)
    crashed = STOPPED_LOG[:2]  # no shutdown began: nothing is folded (a crash keeps every line)
    assert fold_shutdown(crashed) == (tuple(crashed), 0)
    running = STOPPED_LOG[:-1]  # no "server exited" yet: the engine is still going down, shown as it comes
    assert fold_shutdown(running) == (tuple(running), 0)


def test_quitting_says_what_keeps_running_and_how_to_stop_it():
    state = ConsoleState(engine=fixed_engine(READY))
    said = quit_message(state)
    assert "the engine keeps running (embedded-cpu, pid 4242, http://127.0.0.1:8000)" in said
    assert "frank engine stop" in said
    with_job = dataclasses.replace(state, jobs=jobs_view())
    assert "replay 20261207-101502-w01-mini-full-3f9a keeps running" in quit_message(with_job)
    stopped = dataclasses.replace(READY, state="stopped", pid=None, url=None)
    assert quit_message(ConsoleState(engine=fixed_engine(stopped))) == ""


def test_jobs_rows_hold_whole_figures_with_the_run_ids_time_and_name():
    job = JobStatus("20261207-101502-w01-mini-full-3f9a", "replay", "finished", 135, 135, None, "/r")
    assert job_cells(job) == ("finished", "135/135", "12-07 10:15", "replay w01-mini-full")
    odd = dataclasses.replace(job, run_id="my-run", planned=None, state="running", done=9)
    assert job_cells(odd) == ("running", "9/?", "–", "replay my-run")


def test_the_followed_jobs_row_says_its_own_state(monkeypatch):
    """The jobs list is read every few seconds, the followed job every second: its row takes the newer."""
    from frank.console.sources.jobs import JobsSource

    view = jobs_view()
    running = view.jobs[0]
    source = JobsSource(lambda message: None)
    source._all = view.jobs
    source._listed_at, source._relist = 1e18, False  # listed just now: no new list read
    ended = dataclasses.replace(running, state="finished", done=135)
    source._followed = dataclasses.replace(view.followed, status=ended)
    monkeypatch.setattr(source, "_poll_followed", lambda: None)
    read: JobsView = source.read()
    assert read.jobs[0] == ended  # finished 135/135, as the toast says; not running 134/135


def test_a_flip_marks_its_request_and_each_row_says_what_it_was_served_with():
    before, flipped, after = request(2, 3, "off"), request(2, 4, "on", (FLIP,)), request(2, 5, "on")
    assert request_cells(before)["cache"] == "off"
    assert str(request_cells(flipped)["cache"]) == "→on"
    assert request_cells(after)["cache"] == "on"
    during = dataclasses.replace(flipped, flips=(dataclasses.replace(FLIP, during=True),))
    assert str(request_cells(during)["cache"]) == "⇄on"
    failed = dataclasses.replace(before, status="failed", ttft_s=None)
    assert str(request_cells(failed)["ttft"]) == "failed"
