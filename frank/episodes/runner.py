"""Episode runs: draws of a task suite run live against the engine, graded, timed on the client, recorded.

A run folder (`runs_dir()/episodes/<run-id>/`, 0700) holds:

- `run.json`: the suite (path, name, manifest sha256), the number of draws, the settings;
- `results.jsonl`: one line per finished episode, appended with an fsync before the next episode starts;
- `events.jsonl`: live progress (episode started, each turn with its last tool call, episode done, run
  started/stopped/finished), fsynced too; the console and `status` fold it;
- `harness.log`: the agent harness's own output (one inspect-ai worker process per run session);
- `episodes/d<draw>-<task>/`: the episode's harness spec and result, and inspect's eval log (inspect/);
- `workspaces/d<draw>-<task>/`: the finished workspace the grader judged;
- `answers/`: each episode's hidden answer and the run's secret (its draws' seeds derive from it);
- `recording/`: a workload (docs/workload-format.md) that `frank record`'s proxy wrote: every live request
  of the run, one recorder session (one workload draw) per episode draw and run session.

One draw runs every task of the suite in the manifest's order, in one fresh prompt-cache namespace
(`cache_salt`, fresh per draw and per resumed session). An engine that keys no cache on the salt (llama.cpp)
shares its cache across draws, unless the caller gives `fresh_draw`, which readies a fresh engine for each
draw (the experiment runner restarts it) and says how. `run_episodes` on an existing folder resumes at the
first unfinished episode; an episode cut off half-way (killed, or stopped by SIGTERM/Ctrl-C) is started
again from a fresh workspace. An episode whose grader crashes is `error` and the run goes on; an engine
that stops answering marks the episode `error` and stops the run (exit status 3), which a later `run`
resumes after the engine is restarted.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

import httpx

from frank import jsonl, readfile
from frank.episodes.grade import run_grader
from frank.episodes.harness import EpisodeSettings, HarnessWorker, harness_spec
from frank.episodes.sandbox import check_available, prepare_workspace
from frank.episodes.suite import Suite, load_suite
from frank.episodes.target import EngineTarget, engine_target
from frank.episodes.tasks import answer_path, draw_seed, materialize, run_secret
from frank.errors import FrankError
from frank.jobs import lock_holder
from frank.paths import private_dir, runs_dir, write_private

# (draw number) -> (the URL of the engine the draw runs on, how its prompt cache is fresh: "cache_salt" or
# "fresh engine start"); called as each draw begins
FreshDraw = Callable[[int], tuple[str, str]]
RESULTS = "results.jsonl"
EVENTS = "events.jsonl"
RUN_FILE = "run.json"
LOCK = "job.lock"  # the job layer's lock (frank.jobs): held by whoever runs the episodes
EPISODE_FIELDS = (
    "task",
    "draw",
    "outcome",
    "client_s",
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "turns",
    "tool_calls",
    "tool_call_mode",
    "calls_in_sandbox",
    "invalid_answers",
)


def episodes_root() -> Path:
    return private_dir(runs_dir() / "episodes")


def run_path(run_id: str | Path) -> Path:
    path = Path(run_id)
    if (path / RUN_FILE).is_file():
        return path
    candidate = episodes_root() / str(run_id)
    if (candidate / RUN_FILE).is_file():
        return candidate
    raise FrankError(f"no episode run {run_id!r} in {episodes_root()} (see `frank episodes list`)")


def _sha256(path: Path) -> str:
    return hashlib.sha256(readfile.read_bytes(path, readfile.TOML)).hexdigest()


class EpisodeRunMeta(TypedDict):
    """A run folder's run.json (written by `create_run`, read back by every later session of the run)."""

    run_id: str
    suite: str  # the manifest's path
    suite_name: str
    suite_sha256: str
    suite_version: NotRequired[int]  # runs created before versions: 1
    seed: int
    scale: str
    draws: int
    tasks: list[str]
    settings: dict[str, Any]  # EpisodeSettings
    created_at: float


def create_run(
    suite_spec: str | Path,
    draws: int,
    settings: EpisodeSettings | None = None,
    out: Path | None = None,
    secret: str | None = None,
) -> Path:
    """Check the suite (nothing is created if it has an error) and write a new run folder, with the secret
    its draws' seeds come from (`secret`, or a fresh one) among its hidden answers."""
    if draws < 1:
        raise FrankError(f"--draws: expected 1 or more, got {draws}")
    suite = load_suite(suite_spec)
    settings = settings or EpisodeSettings()
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{suite.name}-{secrets.token_hex(3)}"
    folder = private_dir(Path(out) if out else episodes_root() / run_id)
    if (folder / RUN_FILE).exists():
        raise FrankError(f"{folder} already holds a run: resume it with `frank episodes run --resume {folder}`")
    meta = EpisodeRunMeta(
        {
            "run_id": folder.name,
            "suite": str(suite.path),
            "suite_name": suite.name,
            "suite_sha256": _sha256(suite.path),
            "suite_version": suite.version,
            "seed": suite.seed,
            "scale": suite.scale,
            "draws": draws,
            "tasks": [t.id for t in suite.tasks],
            "settings": asdict(settings),
            "created_at": time.time(),
        }
    )
    run_secret(folder, secret)
    write_private(folder / RUN_FILE, json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return folder


def read_run(folder: Path) -> EpisodeRunMeta:
    return cast(EpisodeRunMeta, readfile.read_object(folder / RUN_FILE))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every whole record (frank.jsonl: a torn last line is skipped, a damaged one is an error)."""
    return jsonl.read(path)


def engine_endpoint(url: str | None) -> str:
    """The given URL, or the running engine's (a resumed run goes to the engine of now)."""
    from frank.workloads.replay_job import engine_url

    found = url or engine_url()
    if not found:
        raise FrankError("no engine is ready; start one with `frank engine start` or pass --url")
    return found.rstrip("/")


def engine_healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=5.0).status_code == 200
    except httpx.HTTPError:
        return False


class RecorderThread:
    """`frank record`'s proxy (frank.workloads.recorder.Recorder) on its own event loop in a thread: the harness
    talks to it, it forwards to the engine and writes every answered request into the run's recording."""

    def __init__(
        self,
        upstream: str,
        out: Path,
        on_record: Callable[[dict[str, Any]], None],
        meta: dict[str, Any] | None = None,
    ) -> None:
        from frank.workloads.recorder import Recorder

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="episodes-recorder", daemon=True)
        self.recorder = Recorder(upstream, out, name="episodes-recording", on_record=on_record, meta=meta)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.recorder.start(), self.loop).result(10)

    @property
    def url(self) -> str:
        return self.recorder.url

    async def _shutdown(self) -> None:
        """Close the recorder (and the connections the harness keeps alive to it), then let their handlers
        end before the loop does."""
        await self.recorder.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(15)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@dataclass
class RunOutcome:
    folder: Path
    status: str  # finished | interrupted (engine) | stopped (operator) | failed (an error)
    reason: str = ""
    ran: int = 0  # episodes finished in this session
    episodes: list[dict[str, Any]] = field(default_factory=list)


def episode_key(draw: int, task: str) -> str:
    return f"d{draw}-{task}"


def run_episodes(
    run: str | Path,
    url: str | None = None,
    *,
    stop: threading.Event | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    fresh_draw: FreshDraw | None = None,
) -> RunOutcome:
    """Run (or resume) a run folder's episodes in order. The caller holds the run's lock (frank.episodes
    .job.run does, through the job layer). `fresh_draw(draw)`, called as each draw begins, gives the URL of
    the draw's engine and says how its prompt cache is fresh (else: the salt, on the given engine)."""
    folder = run_path(run)
    meta = read_run(folder)
    suite = load_suite(meta["suite"])
    if _sha256(suite.path) != meta["suite_sha256"]:
        raise FrankError(
            f"{suite.path} changed since the run was created (sha256 {meta['suite_sha256'][:12]}...): start a new run"
        )
    settings = EpisodeSettings(**meta["settings"])
    try:
        check_available()
    except RuntimeError as exc:
        raise FrankError(f"cannot sandbox the agent's tools: {exc}") from None
    return _run(folder, meta, suite, settings, engine_target(url), stop or threading.Event(), on_event, fresh_draw)


def _run(
    folder: Path,
    meta: EpisodeRunMeta,
    suite: Suite,
    settings: EpisodeSettings,
    target: EngineTarget,
    stop: threading.Event,
    on_event: Callable[[dict[str, Any]], None] | None,
    fresh_draw: FreshDraw | None = None,
) -> RunOutcome:
    def note(event: str, **fields: Any) -> None:
        record = {"event": event, "t": round(time.time(), 3), **fields}
        jsonl.append(folder / EVENTS, record)
        if on_event is not None:
            on_event(record)

    done = {episode_key(r["draw"], r["task"]) for r in read_jsonl(folder / RESULTS)}
    todo = [(d, t) for d in range(1, meta["draws"] + 1) for t in suite.tasks if episode_key(d, t.id) not in done]
    outcome = RunOutcome(folder, "finished")
    base = target.url
    note(
        "run_started",
        engine=base,
        model=target.model,
        profile=target.profile,
        tool_call_mode=target.tool_calls,
        context_tokens=target.context_tokens,
        remaining=len(todo),
    )
    current: dict[str, Any] = {}

    def on_record(record: dict[str, Any]) -> None:
        last = _last_tool_call(record["body"].get("messages", []))
        note(
            "turn",
            draw=current.get("draw"),
            task=current.get("task"),
            turn=record["turn"],
            last_tool=last,
            recorded_id=record["id"],
        )

    salt_draw = None
    namespace = "cache_salt"
    recorder: RecorderThread | None = None
    worker = HarnessWorker(folder / "harness.log")
    try:
        for draw, task in todo:
            if stop.is_set():
                outcome.status, outcome.reason = "stopped", "stopped by the operator"
                break
            if draw != salt_draw:  # a fresh prompt-cache namespace per draw (and per resumed session)
                if recorder is not None:
                    recorder.close()
                    recorder = None
                if fresh_draw is not None:  # the draw's own engine: its key, model and tool-call mode
                    url, namespace = fresh_draw(draw)
                    target = engine_target(url)
                graded = {"suite": suite.name, "suite_version": suite.version}
                recorder = RecorderThread(target.url, folder / "recording", on_record, meta=graded)
                salt, salt_draw = f"frank-episodes-{secrets.token_hex(8)}", draw
                note(
                    "draw_started",
                    draw=draw,
                    seed=draw_seed(run_secret(folder), suite.seed, draw),
                    suite_version=suite.version,
                    cache_salt=salt,
                    cache_namespace=namespace,
                    engine=target.url,
                    recording_draw=recorder.recorder.draw_name,
                )
            current.update(draw=draw, task=task.id)
            recorder.recorder.task_hint = task.id
            before = recorder.recorder.recorded
            result = _run_episode(folder, suite, task, draw, recorder, worker, target, salt, settings, stop, note)
            result["recorded_requests"] = recorder.recorder.recorded - before
            result["recording_draw"] = recorder.recorder.draw_name
            result["cache_namespace"] = namespace
            if result.get("error_kind") == "stopped":  # cut off, not finished: a resumed run runs it again
                note("episode_cut", draw=draw, task=task.id, reason=result["detail"])
                outcome.status, outcome.reason = "stopped", "stopped by the operator"
                break
            jsonl.append(folder / RESULTS, result, sort_keys=True)
            note("episode_done", **{k: result.get(k) for k in (*EPISODE_FIELDS, "detail")})
            outcome.ran += 1
            outcome.episodes.append(result)
            if result["outcome"] == "error" and result.get("error_kind") == "engine":
                outcome.status = "interrupted"
                outcome.reason = (
                    f"the engine stopped answering during {task.id} (draw {draw}): restart it and run again"
                )
                break
    except BaseException as exc:
        outcome.status, outcome.reason = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        worker.close()
        if recorder is not None:
            recorder.close()
        note(
            "run_" + ("finished" if outcome.status == "finished" else "stopped"),
            status=outcome.status,
            reason=outcome.reason,
        )
    return outcome


def _last_tool_call(messages: list[Any]) -> str | None:
    for msg in reversed(messages):
        if isinstance(msg, dict) and msg.get("role") == "assistant" and msg.get("tool_calls"):
            fn = msg["tool_calls"][-1].get("function", {})
            return f"{fn.get('name')}({str(fn.get('arguments', ''))[:80]})"
    return None


def _run_episode(
    folder: Path,
    suite: Suite,
    task,
    draw: int,
    recorder: RecorderThread,
    worker: HarnessWorker,
    target: EngineTarget,
    salt: str,
    settings: EpisodeSettings,
    stop: threading.Event,
    note,
) -> dict[str, Any]:
    key = episode_key(draw, task.id)
    workspace = folder / "workspaces" / key
    episode_dir = folder / "episodes" / key
    answer = answer_path(folder, key)
    for stale in (workspace, episode_dir):  # a cut-off attempt starts again from scratch
        shutil.rmtree(stale, ignore_errors=True)
    answer.unlink(missing_ok=True)
    private_dir(workspace.parent)
    private_dir(answer.parent)
    seed = draw_seed(run_secret(folder), suite.seed, draw)
    expected = materialize(task, seed, suite.scale, workspace, answer)
    prepare_workspace(workspace)  # the sandbox's user owns it; the sandbox mounts it and nothing around it
    started = time.time()
    note("episode_started", draw=draw, task=task.id)
    spec = harness_spec(
        task,
        workspace,
        episode_dir,
        recorder.url,
        target.model,
        salt,
        settings,
        api_key=target.api_key,
        tool_calls=target.tool_calls,
        context_tokens=target.context_tokens,
    )
    harness = worker.run(spec, episode_dir, stop_check=stop.is_set)
    record: dict[str, Any] = {
        "task": task.id,
        "draw": draw,
        "suite_version": suite.version,
        "seed": seed,
        "cache_salt": salt,
        "started_at": round(started, 3),
        "client_s": harness.get("client_s"),
        "working_s": harness.get("working_s"),
        "model_s": harness.get("model_s"),
        "tool_s": harness.get("tool_s"),
        "call_s": harness.get("call_s"),
        "requests": harness.get("requests", 0),
        "prompt_tokens": harness.get("prompt_tokens", 0),
        "cached_prompt_tokens": harness.get("cached_prompt_tokens", 0),
        "completion_tokens": harness.get("completion_tokens", 0),
        "turns": harness.get("turns", 0),
        "tool_call_mode": target.tool_calls,
        "tool_calls": harness.get("tool_calls", 0),
        "calls_in_sandbox": harness.get("calls_in_sandbox", 0),
        "tool_errors": harness.get("tool_errors", 0),
        "invalid_answers": harness.get("invalid_answers", 0),
        "invalid_reasons": harness.get("invalid_reasons", []),
        "outputs_cut": harness.get("outputs_cut", 0),
        "longest_prompt_tokens": harness.get("longest_prompt_tokens"),
        "longest_prompt_bound": harness.get("longest_prompt_bound"),
        "submitted": harness.get("submitted", False),
        "last_tool": harness.get("last_tool"),
        "limit": harness.get("limit"),
        "harness_wall_s": harness.get("harness_wall_s"),
        "harness_log": str(worker.log_path),
        "inspect_log": harness.get("log"),
        "workspace": str(workspace),
    }
    if harness.get("error"):
        kind = (
            "stopped"
            if "stopped by the operator" in harness["error"]
            else ("engine" if not engine_healthy(recorder.recorder.upstream) else "harness")
        )
        record.update(outcome="error", detail=harness["error"], error_kind=kind, grader_s=None)
    else:
        verdict = run_grader(task, workspace, expected)
        record.update(
            outcome=verdict.outcome,
            detail=verdict.detail,
            grader_s=round(verdict.seconds, 3),
            error_kind="grader" if verdict.outcome == "error" else None,
        )
    record["ended_at"] = round(time.time(), 3)
    return record


# -- reading runs back ---------------------------------------------------------------------------------


def draw_totals(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per draw: episodes, total_s (client seconds summed over its episodes), passed, failed, errors."""
    by_draw: dict[int, list[dict[str, Any]]] = {}
    for r in results:
        by_draw.setdefault(r["draw"], []).append(r)
    out = []
    for draw in sorted(by_draw):
        m = episode_measures(by_draw[draw])
        out.append(
            {
                "draw": draw,
                "episodes": m["episodes"],
                "total_s": round(m["episode_total_time"], 3),
                "passed": m["episodes_passed"],
                "failed": m["episodes_failed"],
                "errors": m["episode_errors"],
            }
        )
    return out


def episode_measures(results: list[dict[str, Any]]) -> dict[str, float]:
    """The measures of a set of episodes (an experiment arm's start, or a whole run): the one definition.

    episode_total_time: client seconds summed over the episodes (the seed's "total time over the episodes");
    episodes_passed: episodes whose grader passed. Errors count as not passed; their time still counts."""
    return {
        "episode_total_time": round(sum(r.get("client_s") or 0.0 for r in results), 6),
        "episodes_passed": sum(r["outcome"] == "pass" for r in results),
        "episodes_failed": sum(r["outcome"] == "fail" for r in results),
        "episode_errors": sum(r["outcome"] == "error" for r in results),
        "episodes": len(results),
        "requests": sum(r.get("requests") or 0 for r in results),
    }


@dataclass(frozen=True)
class EpisodesReport:
    """An episode run as recorded: its episodes (EPISODE_FIELDS and a few more, as results.jsonl has them),
    per-draw totals and the run's sums. `to_json` is what `frank episodes report --json` prints."""

    run_id: str
    folder: str
    suite: str
    suite_version: int
    suite_sha256: str
    draws_planned: int
    episodes_planned: int
    episodes_done: int
    complete: bool
    episodes: tuple[dict[str, Any], ...]
    draws: tuple[dict[str, Any], ...]  # draw_totals
    total_s: float
    passed: int
    tool_calls: int
    invalid_answers: int
    tool_call_modes: tuple[str, ...]
    recording: str
    settings: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {
            "episodes": list(self.episodes),
            "draws": list(self.draws),
            "tool_call_modes": list(self.tool_call_modes),
        }


def report(run: str | Path) -> EpisodesReport:
    folder = run_path(run)
    meta = read_run(folder)
    results = read_jsonl(folder / RESULTS)
    planned = meta["draws"] * len(meta["tasks"])
    draws = draw_totals(results)
    keep = (*EPISODE_FIELDS, "detail", "working_s", "error_kind", "suite_version", "seed")
    return EpisodesReport(
        run_id=meta["run_id"],
        folder=str(folder),
        suite=meta["suite_name"],
        suite_version=meta.get("suite_version", 1),
        suite_sha256=meta["suite_sha256"],
        draws_planned=meta["draws"],
        episodes_planned=planned,
        episodes_done=len(results),
        complete=len(results) >= planned,
        episodes=tuple({k: r.get(k) for k in keep} for r in results),
        draws=tuple(draws),
        total_s=round(sum(d["total_s"] for d in draws), 3),
        passed=sum(d["passed"] for d in draws),
        tool_calls=sum(r.get("tool_calls") or 0 for r in results),
        invalid_answers=sum(r.get("invalid_answers") or 0 for r in results),
        tool_call_modes=tuple(sorted({r["tool_call_mode"] for r in results if r.get("tool_call_mode")})),
        recording=str(folder / "recording"),
        settings=meta["settings"],
    )


@dataclass(frozen=True)
class LiveEpisode:
    draw: int
    task: str
    turn: int
    last_tool: str | None
    started_at: float
    outcome: str | None = None  # None while running
    client_s: float | None = None


@dataclass(frozen=True)
class EpisodesState:
    """A run's live state from its files: what `status` prints and the console renders."""

    run_id: str
    suite: str
    status: str  # created | running | stopped | interrupted | finished
    runner_pid: int | None
    planned: int
    done: int
    episodes: tuple[LiveEpisode, ...]
    draws: tuple[dict[str, Any], ...]
    reason: str = ""

    @property
    def current(self) -> LiveEpisode | None:
        return (
            next((e for e in reversed(self.episodes) if e.outcome is None), None) if self.status == "running" else None
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        cur = self.current
        out["current"] = None if cur is None else {**asdict(cur), "elapsed_s": round(time.time() - cur.started_at, 1)}
        return out


def load_state(run: str | Path) -> EpisodesState:
    folder = run_path(run)
    meta = read_run(folder)
    results = read_jsonl(folder / RESULTS)
    events = read_jsonl(folder / EVENTS)
    live: dict[str, LiveEpisode] = {}
    status, reason = "created", ""
    for ev in events:
        kind = ev.get("event")
        if kind == "run_started":
            status = "running"
        elif kind in ("run_finished", "run_stopped"):
            status, reason = ev.get("status", "stopped"), ev.get("reason", "")
        elif kind == "episode_started":
            live[episode_key(ev["draw"], ev["task"])] = LiveEpisode(ev["draw"], ev["task"], 0, None, ev["t"])
        elif kind == "episode_cut":
            live.pop(episode_key(ev["draw"], ev["task"]), None)
        elif kind == "turn" and ev.get("task") is not None:
            key = episode_key(ev["draw"], ev["task"])
            if key in live:
                old = live[key]
                live[key] = LiveEpisode(
                    old.draw, old.task, ev["turn"], ev.get("last_tool") or old.last_tool, old.started_at
                )
    for r in results:
        key = episode_key(r["draw"], r["task"])
        old = live.get(key)
        live[key] = LiveEpisode(
            r["draw"],
            r["task"],
            r.get("turns", 0),
            (r.get("last_tool") or {}).get("function")
            if isinstance(r.get("last_tool"), dict)
            else (old.last_tool if old else None),
            old.started_at if old else r.get("started_at", 0.0),
            r["outcome"],
            r.get("client_s"),
        )
    holder = lock_holder(folder / LOCK)
    if status == "running" and holder is None:
        status, reason = "interrupted", "the runner is gone (killed?): `frank episodes run --resume` continues"
    planned = meta["draws"] * len(meta["tasks"])
    if status == "finished" and len(results) < planned:
        status = "stopped"
    return EpisodesState(
        meta["run_id"],
        meta["suite_name"],
        status,
        holder,
        planned,
        len(results),
        tuple(live.values()),
        tuple(draw_totals(results)),
        reason,
    )


def list_runs() -> list[dict[str, Any]]:
    out = []
    root = episodes_root()
    for child in sorted(root.iterdir()):
        if not (child / RUN_FILE).is_file():
            continue
        state = load_state(child)
        out.append(
            {
                "run_id": state.run_id,
                "suite": state.suite,
                "status": state.status,
                "done": state.done,
                "planned": state.planned,
                "total_s": round(sum(d["total_s"] for d in state.draws), 3),
                "passed": sum(d["passed"] for d in state.draws),
                "folder": str(child),
            }
        )
    return out
