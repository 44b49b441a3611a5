"""CPU-side decode figures, live: what the engine's CPU experts cost a verify step, beside the verify step.

Two sources, one object per snapshot (`CpuDecode`, in `Snapshot.cpu_decode`; the dashboard's metrics panel and
the Prometheus export read it, nothing computes these figures again):

- frank's own CPU-expert wait a verify step (`window_cpu_expert_wait`): the pool workers' busy share over the
  rate window (frank.telemetry.expert_pool; llama.cpp's pool, and exllamav3's, where it is an upper bound since
  its workers spin between jobs) times the window, over the window's verify steps.
- exllamav3's own figures, read from the engine log as they are printed (`LogLines` follows the log; the
  formats are frank.engine.exl3.prof_log's): the pool's compute, the GPU's stall waiting for it, the GPU's
  idle share of a verify step, and whether the hot/cold placement has settled. Other engines print none:
  their figures read None with the reason in `why`.

How each figure is made (`Exl3ProfWatch.figures`):
- compute a job: the last EXL3_MOE_CPU_PROF line's phases summed, the mean over every job since the worker
  started (exllamav3 prints running means to 0.1 us; the difference of two lines is no better than the
  rounding times the jobs, so no figure between two lines is made from them).
- compute a step: compute a job x the split layers (the load's `CPU split experts` lines): at most, since a
  layer whose step picked no CPU-resident expert runs no job.
- stall a step: the last EXL3_SPLIT_PROF [wait] line's median collect bracket (the GPU stream's time waiting
  for the CPU's experts and reading them back, over its last 2048 brackets; exllamav3 prints no mean) x the
  split layers (one collect a split layer a step).
- GPU idle share: stall a step / the window's verify step (the engine's /metrics): the share of a verify step
  the GPU spends waiting for the CPU's experts.
- the pool's side (the last EXL3_MOE_HANDOFF_PROF line, its last 64 jobs): its busy share (compute over gap +
  spin + compute), its spin a job waiting for the GPU's inputs, and the share of jobs that selected no
  CPU-resident expert. A busy pool with little spin is the bottleneck; a pool that spins waits on the GPU.
- swaps: see `placement_verdict`.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from frank.engine import measures
from frank.engine.exl3 import prof_log
from frank.telemetry import procfs

MAX_LINE = 4096  # a profile line is under 300 bytes: a longer line is dropped, never held whole
FIRST_READ_BYTES = 8 << 20  # a log met bigger than this (a console opened late) is read from its last 8 MiB
MAX_READ_BYTES = 4 << 20  # at most this much a poll: a burst beyond it is skipped to its last 4 MiB
SWAP_INTERVAL_STEPS = 128  # exllamav3's EXL3_MOE_CPU_SWAP_INTERVAL default (the profile leaves it)
SETTLE_STEPS = 2 * 4 * SWAP_INTERVAL_STEPS  # see placement_verdict
SWAP_DEBUG_ENV = "EXL3_MOE_CPU_SWAP_DEBUG"  # exllamav3 logs swaps only with it set
PROMOTE_KEPT = 64  # promote-on-miss lines kept (one every 128 steps: 8192 steps)
MAX_LAYERS = 1024  # split layers kept (a real model has tens): a log naming more is not believed past it


class LogLines:
    """The complete lines appended to one growing file since the last `poll`, read from an offset.

    Bounded: the first read of a file (and of one that replaced it) takes at most its last FIRST_READ_BYTES, a
    poll at most MAX_READ_BYTES (a burst beyond that is skipped to its end), and a line longer than MAX_LINE is
    dropped as it streams by (counted in `dropped`), never held whole. A last line still waiting for its
    newline is kept until the rest arrives. A file replaced (rotated: another inode) or truncated is read
    again from its start, and `poll` says so: the figures read from the old one are the old engine's.
    Bytes that are not UTF-8 are replaced, not refused (a log is not a record)."""

    def __init__(
        self, max_line: int = MAX_LINE, first_read: int = FIRST_READ_BYTES, max_read: int = MAX_READ_BYTES
    ) -> None:
        self.max_line, self.first_read, self.max_read = max_line, first_read, max_read
        self.path: str | None = None
        self.dropped = 0  # lines longer than max_line
        self.skipped_bytes = 0  # bytes never read (a big log's head, a burst's middle)
        self.from_start = False  # the file was read from its first byte
        self._key: tuple[int, int] | None = None
        self._offset = 0
        self._partial = b""
        self._skipping = False  # inside a line already too long: drop up to its newline

    def poll(self, path: str | Path) -> tuple[list[str], bool]:
        """(new complete lines, whether the file is another one or restarted since the last poll)."""
        path = str(path)
        try:
            st = os.stat(path)
        except OSError:
            restarted = self._key is not None or path != self.path
            self._restart(path, None)
            return [], restarted
        key = (st.st_dev, st.st_ino)
        restarted = path != self.path or key != self._key or st.st_size < self._offset
        if restarted:
            self._restart(path, key)
            if st.st_size > self.first_read:
                self._skip_to(st.st_size - self.first_read)
            else:
                self.from_start = True
        if st.st_size <= self._offset:
            return [], restarted
        if st.st_size - self._offset > self.max_read:
            self._skip_to(st.st_size - self.max_read)
        try:
            with open(path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read(st.st_size - self._offset)
        except OSError:
            return [], restarted
        self._offset += len(data)
        return self._take(data), restarted

    def _restart(self, path: str, key: tuple[int, int] | None) -> None:
        self.path, self._key, self._offset, self._partial, self._skipping = path, key, 0, b"", False
        self.from_start = False

    def _skip_to(self, offset: int) -> None:
        """Go on from `offset`, mid-line: what is before its next newline is a line's tail, dropped."""
        self.skipped_bytes += offset - self._offset
        self._offset, self._partial, self._skipping = offset, b"", True

    def _take(self, data: bytes) -> list[str]:
        if self._skipping:
            end = data.find(b"\n")
            if end < 0:
                return []
            data, self._skipping = data[end + 1 :], False
        *complete, rest = (self._partial + data).split(b"\n")
        lines = []
        for raw in complete:
            if len(raw) > self.max_line:
                self.dropped += 1
            else:
                lines.append(raw.decode("utf-8", "replace").rstrip("\r"))
        if len(rest) > self.max_line:
            self.dropped += 1
            self._partial, self._skipping = b"", True
        else:
            self._partial = rest
        return lines


@dataclass(frozen=True)
class CpuDecode:
    """One snapshot's CPU-side decode figures. Every figure None where the engine gives none, `why` saying so."""

    why: str | None  # why the pool's figures (compute) read "–" (None: there are some)
    kind: str | None = None  # the engine kind (exl3: its log is read), None with no engine
    cpu_wait_step_s: float | None = None  # frank's CPU-expert wait a verify step (window_cpu_expert_wait)
    jobs: int | None = None  # the CPU worker's jobs since it started (one job: a layer's CPU experts, a step)
    compute_us_per_job: float | None = None  # the pool's mean compute a job since its worker started
    compute_s: float | None = None  # the pool's compute since its worker started
    split_layers: int | None = None  # MoE layers split between the GPU and the CPU
    compute_step_s: float | None = None  # compute a job x split layers (at most: a layer may run no job)
    stall_median_ms: float | None = None  # the GPU's collect bracket, median of the last EXL3_SPLIT_PROF line
    stall_p90_ms: float | None = None
    stall_step_s: float | None = None  # median bracket x split layers
    stall_why: str | None = None  # why the stall reads "–"
    gpu_wait_share: float | None = None  # stall a step / the window's verify step (0-1)
    pool_busy_share: float | None = None  # the CPU worker's compute over its time, last handoff line (0-1)
    pool_spin_ms: float | None = None  # its mean spin a job waiting for the GPU to publish the job's inputs
    pool_gap_ms: float | None = None  # its mean idle gap between jobs
    pool_job_ms: float | None = None  # its mean compute a job over the same jobs
    pool_empty_share: float | None = None  # jobs that selected no CPU-resident expert (0-1)
    pool_why: str | None = None  # why the pool's side reads "–"
    placement: str | None = None  # "static", "dynamic" or "promote-on-miss" (the load's lines)
    swaps_window: int | None = None  # swaps logged in the last rate window
    swaps_total: int | None = None  # swaps logged since the engine started (or since its log was read)
    steps_since_swap: float | None = None  # decode steps since the last logged swap
    settled: bool | None = None  # placement_verdict
    settled_why: str = ""  # the verdict's reading, or why there is none
    lines: int = 0  # profile lines read from this engine's log
    refused: int = 0  # lines in a profile line's shape refused (a number that is not one): they moved nothing
    dropped: int = 0  # log lines over MAX_LINE bytes, dropped unread


def placement_verdict(
    placement: str | None,
    swap_logged: bool,
    steps_since_swap: float | None,
    promote: Sequence[prof_log.PromoteProf] = (),
) -> tuple[bool | None, str]:
    """(settled, why): whether exllamav3's hot/cold expert placement has settled.

    The rule. exllamav3's dynamic placement counts decode steps and, every EXL3_MOE_CPU_SWAP_INTERVAL (128)
    of them, marks a sweep due; the sweep runs when the generator's queue drains, or inline once 4 intervals
    are due, so one runs within any 512 decode steps. A sweep swaps a CPU expert in only while its decayed
    hit count clears twice the coldest GPU expert's and 8x the mean (its hysteresis and floor), so a settled
    placement makes every sweep a no-op. Settled: at least SETTLE_STEPS (1024: two such bounds) decode steps
    since the last logged swap (or since the engine started, if it never swapped): two or more sweeps in a
    row found nothing to move. Settling otherwise. The steps are the engine's verify steps (its /metrics).
    - promote-on-miss (the pinned arena) moves experts every step, and logs its running totals every 128 of
      its own steps: settled when the promotions did not grow over the last SETTLE_STEPS of its steps.
    - static: the experts never move: settled.
    - exllamav3 logs swaps only with EXL3_MOE_CPU_SWAP_DEBUG set (the profile sets it): without it, no
      verdict (a sweep of none prints nothing either, so silence proves nothing)."""
    if placement is None:
        return None, "no CPU split layer in the log yet"
    if placement == "static":
        return True, "static placement: experts never move"
    if not swap_logged:
        return None, f"{SWAP_DEBUG_ENV} unset: swaps unlogged"
    if placement == "promote-on-miss":
        if not promote:
            return None, "no promote-on-miss line yet"
        last = promote[-1]
        base = next((p for p in reversed(promote) if last.step - p.step >= SETTLE_STEPS), None)
        if base is None:
            return False, f"{last.step}/{SETTLE_STEPS} steps logged"
        moved = last.promotions - base.promotions
        if moved:
            return False, f"{moved} promotions in {last.step - base.step} steps"
        return True, f"no promotion in {last.step - base.step} steps"
    if steps_since_swap is None:
        return None, "the engine's /metrics counts no steps"
    if steps_since_swap >= SETTLE_STEPS:
        return True, f"{steps_since_swap:.0f} steps since a swap"
    return False, f"{steps_since_swap:.0f}/{SETTLE_STEPS} steps since a swap"


def no_figures_why(kind: str | None, log_path: str | None) -> str:
    """Why an engine that is not exllamav3 (or no engine) has no exllamav3 figures (short: the dashboard shows
    it on one line; llama.cpp's CPU-expert wait is frank's own, from its pool's threads)."""
    if kind == "vllm":
        return "vLLM: no CPU-expert profile"
    if kind == "llamacpp":
        return "llama.cpp: no pool profile"
    if kind is None or not log_path:
        return "no engine log (a server by --url)"
    return f"{kind}: no CPU-expert profile"


class Exl3ProfWatch:
    """exllamav3's profile lines of one engine's log, followed from sample to sample (the sampler owns one;
    single-threaded). Memory is bounded: the last line of each kind, the layers' keys, the swaps of the last
    window and PROMOTE_KEPT promote-on-miss lines."""

    def __init__(
        self,
        window_s: float = 10.0,
        environ: Callable[[int], Mapping[str, str]] = procfs.environ,
        lines: LogLines | None = None,
    ) -> None:
        self.window_s = window_s
        self._environ = environ
        self._tail = lines or LogLines()
        self._reset()
        self._env_pid: int | None = None
        self._swap_logged = False

    def _reset(self) -> None:
        self._pool: prof_log.PoolProf | None = None
        self._wait: prof_log.SplitProf | None = None
        self._handoff: prof_log.HandoffProf | None = None
        self._layers: dict[str, str] = {}  # key -> placement
        self._swaps: deque[tuple[float, int]] = deque()  # (when read, swaps) within the window
        self._swaps_total = 0
        self._swap_steps: float | None = None  # decode steps at the last swap read
        self._swap_unplaced = False  # a swap read while /metrics gave no step count: placed at the next one
        self._base_steps: float | None = None  # decode steps when the log's reading began
        self._promote: deque[prof_log.PromoteProf] = deque(maxlen=PROMOTE_KEPT)
        self._lines = self._refused = 0

    def update(self, log_path: str | None, pid: int | None, now: float, steps_total: float | None) -> None:
        """Read what the log gained; `now` is the sample's monotonic time, `steps_total` the engine's decode
        steps so far (its /metrics), which places the swaps read now."""
        if pid != self._env_pid:
            self._env_pid = pid
            self._swap_logged = bool(pid and self._environ(pid).get(SWAP_DEBUG_ENV, "0") not in ("", "0"))
        if log_path is None:
            return
        lines, restarted = self._tail.poll(log_path)
        if restarted:
            self._reset()
        if self._base_steps is None:
            self._base_steps = 0.0 if self._tail.from_start else steps_total
        # A file's first read catches up on what it held: its swaps are the engine's past, placed at no
        # time (not in the window) and at the current steps (the settle count starts again: conservative).
        when = None if restarted else now
        for line in lines:
            if prof_log.looks_like(line):
                self._take(line, when, steps_total)
        if self._swap_unplaced and steps_total is not None:
            self._swap_steps, self._swap_unplaced = steps_total, False
        while self._swaps and self._swaps[0][0] <= now - self.window_s:
            self._swaps.popleft()

    def _take(self, line: str, now: float | None, steps_total: float | None) -> None:
        event = prof_log.parse_line(line)
        if event is None:
            self._refused += 1
            return
        self._lines += 1
        if isinstance(event, prof_log.PoolProf):
            self._pool = event  # a worker restarted counts from 0 again: its line is the news all the same
        elif isinstance(event, prof_log.SplitProf):
            if event.kind == "wait":
                self._wait = event
        elif isinstance(event, prof_log.HandoffProf):
            self._handoff = event
        elif isinstance(event, prof_log.SplitLayer):
            if len(self._layers) < MAX_LAYERS or event.key in self._layers:
                self._layers[event.key] = event.placement
            else:
                self._lines, self._refused = self._lines - 1, self._refused + 1
        elif isinstance(event, prof_log.SwapSweep):
            if event.swaps:
                if now is not None:
                    self._swaps.append((now, event.swaps))
                self._swaps_total += event.swaps
                self._swap_steps, self._swap_unplaced = steps_total, steps_total is None
        else:
            last = self._promote[-1] if self._promote else None
            if last is not None and event.step < last.step:  # a reload: its totals count from 0 again
                self._promote.clear()
                last = None
            if last is not None and event.promotions > last.promotions:
                if now is not None:
                    self._swaps.append((now, event.promotions - last.promotions))
                self._swaps_total += event.promotions - last.promotions
            self._promote.append(event)

    def placement(self) -> str | None:
        modes = set(self._layers.values())
        for mode in ("promote-on-miss", "dynamic", "static"):
            if mode in modes:
                return mode
        return None

    def figures(
        self, steps_total: float | None, verify_step_s: float | None, cpu_wait_step_s: float | None = None
    ) -> CpuDecode:
        pool, wait, handoff = self._pool, self._wait, self._handoff
        layers = len(self._layers) or None
        placement = self.placement()
        since: float | None = None
        if placement == "promote-on-miss" and self._promote:
            kept = list(self._promote)
            # its own steps since the first line that showed the last promotion (at least that many)
            changed = [cur.step for prev, cur in zip(kept, kept[1:]) if cur.promotions > prev.promotions]
            first = kept[0]
            since = float(kept[-1].step - (changed[-1] if changed else (0 if not first.promotions else first.step)))
        elif steps_total is not None and not self._swap_unplaced:
            base = self._swap_steps if self._swap_steps is not None else self._base_steps
            since = None if base is None else max(0.0, steps_total - base)
        settled, settled_why = placement_verdict(placement, self._swap_logged, since, tuple(self._promote))
        compute_step = None if pool is None or layers is None else pool.compute_us_per_job * layers / 1e6
        stall_step = None if wait is None or layers is None else wait.median_ms * layers / 1e3
        why = stall_why = pool_why = None
        if pool is None or wait is None or handoff is None:
            missing = self._tail.path and not os.path.exists(self._tail.path)
            if pool is None:  # one every 512 CPU jobs; none with cpu_split 0
                why = f"no engine log at {self._tail.path}" if missing else "no EXL3_MOE_CPU_PROF line yet"
            if wait is None:  # one every 2048 collects
                stall_why = "no engine log" if missing else "no EXL3_SPLIT_PROF line yet"
            if handoff is None:  # one every 64 CPU jobs, with EXL3_MOE_HANDOFF_PROF set
                pool_why = "no engine log" if missing else "no EXL3_MOE_HANDOFF_PROF line yet"
        swapped = self._swap_logged and placement in ("dynamic", "promote-on-miss")
        return CpuDecode(
            why=why,
            kind="exl3",
            cpu_wait_step_s=cpu_wait_step_s,
            jobs=pool.jobs if pool else None,
            compute_us_per_job=round(pool.compute_us_per_job, 3) if pool else None,
            compute_s=round(pool.compute_s, 6) if pool else None,
            split_layers=layers,
            compute_step_s=compute_step,
            stall_median_ms=wait.median_ms if wait else None,
            stall_p90_ms=wait.p90_ms if wait else None,
            stall_step_s=stall_step,
            stall_why=stall_why,
            gpu_wait_share=measures.ratio(stall_step, verify_step_s) if verify_step_s else None,
            pool_busy_share=handoff.busy_share if handoff else None,
            pool_spin_ms=handoff.spin_ms if handoff else None,
            pool_gap_ms=handoff.gap_ms if handoff else None,
            pool_job_ms=handoff.compute_ms if handoff else None,
            pool_empty_share=handoff.empty / prof_log.HANDOFF_WINDOW if handoff else None,
            pool_why=pool_why,
            placement=placement,
            swaps_window=sum(n for _, n in self._swaps) if swapped else (0 if placement == "static" else None),
            swaps_total=self._swaps_total if swapped else (0 if placement == "static" else None),
            steps_since_swap=since if swapped else None,
            settled=settled,
            settled_why=settled_why,
            lines=self._lines,
            refused=self._refused,
            dropped=self._tail.dropped,
        )
