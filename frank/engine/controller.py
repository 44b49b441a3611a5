"""The engine process controller: start, adopt, watch, flip knobs, restart and stop one engine server
(vLLM or llama.cpp: frank.engine.kinds says how each kind's profile becomes a launch).

One engine per state dir. Every controller instance reads the state files, so a console (or CLI) started
later adopts the running engine; nothing is kept only in memory. The process tree is:

    supervisor (session + process-group leader, frank/engine/supervisor.py)
      └─ the server: vLLM's API server (python -m vllm.entrypoints.openai.api_server ...) or llama.cpp's
           └─ engine-core and other children (vLLM)

Stop sends SIGTERM to the group, then SIGKILL to the group after the profile's grace period, and waits
until no process of the group is left.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import psutil

from frank import paths
from frank.engine.kinds import KINDS, build_launch, check_launch, kind_of
from frank.engine.profiles import DEFAULT_PROFILE, KnobValue, LaunchSpec, Profile, load_profile
from frank.engine.records import RUNNING_STATES, EngineRecord, EngineState, ExitRecord, SupervisorSpec
from frank.engine.state import StateFiles, tail_lines
from frank.errors import FrankError

SPAWN_GRACE_S = 60.0  # a record without a supervisor yet is a start in progress this long, then a failed one
CRASH_LOG_LINES = 50


class EngineError(FrankError):
    """The engine cannot be started, stopped or changed as asked; the message says why."""


@dataclass(frozen=True)
class EngineStatus:
    state: EngineState
    profile: str | None = None
    kind: str | None = None  # the engine kind: vllm or llamacpp (frank.engine.kinds)
    pid: int | None = None  # the vLLM API server
    pgid: int | None = None  # the supervisor's process group (the whole engine)
    host: str | None = None
    port: int | None = None
    url: str | None = None
    knobs: dict[str, Any] = field(default_factory=dict)
    started_at: float | None = None  # wall clock
    ready_s: float | None = None  # start-to-ready seconds
    uptime_s: float | None = None
    healthy: bool | None = None  # /health answered 200 just now
    log_path: str | None = None
    exit: ExitRecord | None = None  # for `crashed` (and `stopping`): how the server ended
    log_tail: tuple[str, ...] = ()  # for `crashed`: the last lines of the log
    supervisor_pid: int | None = None  # the parent that records the server's exit (frank.engine.supervisor)
    supervisor_alive: bool | None = None  # False: killed; the server runs unsupervised (stop still stops it)
    warning: str | None = None  # what the state alone does not say (a supervisor gone while the server runs)
    notes: tuple[str, ...] = ()  # what the launch resolved or warns of (LaunchSpec.notes)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["log_tail"] = list(self.log_tail)
        if self.exit is not None:
            out["exit"]["text"] = self.exit.describe()  # the one wording of how it ended, for a reader of the JSON
        return out


@dataclass(frozen=True)
class KnobChange:
    name: str
    old: Any
    new: Any
    applied: str  # "live", "restart", or "next-start" (no engine running)
    status: EngineStatus

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "old": self.old,
            "new": self.new,
            "applied": self.applied,
            "status": self.status.to_json(),
        }


ProgressFn = Callable[[float, str], None]  # (seconds since spawn, last log line)


class EngineController:
    def __init__(self, state_dir: Path | None = None, health_timeout_s: float = 2.0) -> None:
        self.files = StateFiles(state_dir or paths.state_dir(create=False))  # created on the first write
        self.health_timeout_s = health_timeout_s
        self._http: httpx.Client | None = None  # reused by status(): a console polls it

    # -- reading state ---------------------------------------------------------------------------
    @property
    def token(self) -> str | None:
        record = self.files.read_record()
        return record.token if record else None

    @property
    def client_api_key(self) -> str | None:
        """The bearer key clients send to the running engine (llama.cpp: the control token), or None."""
        record = self.files.read_record()
        return (record.api_key or None) if record else None

    def log_path(self) -> Path:
        return self.files.log

    def tail_log(self, count: int = 50) -> list[str]:
        return tail_lines(self.files.log, count)

    def status(self, check_health: bool = True) -> EngineStatus:
        record = self.files.read_record()
        if record is None:
            return EngineStatus(state="stopped", log_path=str(self.files.log))
        run = self.files.read_run()
        pgid = record.pgid or (run.supervisor_pid if run else None)
        server_pid = run.server_pid if run else None
        base = EngineStatus(
            state="starting",
            profile=record.profile,
            kind=record.kind,
            pgid=pgid,
            host=record.host,
            port=record.port,
            url=record.url,
            knobs=record.knobs,
            started_at=record.started_at,
            ready_s=record.ready_s,
            log_path=record.log_path,
            supervisor_pid=pgid,
            notes=tuple(record.notes),
        )
        exit_info = self.files.read_exit()
        if pgid is None:  # the record is written before the supervisor is spawned
            if time.time() - (record.started_at or 0) < SPAWN_GRACE_S:
                return base
            reason = "the start never spawned its supervisor (the starting process died?)"
            return replace(base, state="crashed", exit=ExitRecord(reason=reason))
        supervisor_alive = self._supervisor_alive(pgid, record.supervisor_create_time)
        members = _group_members(pgid)
        base = replace(base, pid=server_pid, supervisor_alive=supervisor_alive)
        if exit_info is not None and exit_info.stop_requested:
            if members:  # the group is going: nothing says stopped while a process of it lives
                return replace(base, state="stopping", exit=exit_info)
            self.files.clear_run()
            return EngineStatus(state="stopped", log_path=str(self.files.log))
        if exit_info is not None or not (supervisor_alive or members):
            if exit_info is None:
                exit_info = ExitRecord(reason=_gone_reason(record, server_pid))
            log_tail = tuple(tail_lines(Path(record.log_path or self.files.log), CRASH_LOG_LINES))
            from frank.engine.refusal import out_of_gpu_memory

            oom = out_of_gpu_memory(log_tail) if record.ready_s is None else None
            warning = f"out of GPU memory while loading: {oom}" if oom else None
            return replace(base, state="crashed", exit=exit_info, log_tail=log_tail, warning=warning)
        warning = None
        if not supervisor_alive:
            warning = (
                f"the engine's supervisor (pid {pgid}) is gone while the server runs: its exit status will be "
                "lost; `frank engine stop` still stops it"
            )
        uptime = time.time() - record.started_at if record.started_at else None
        healthy = self._healthy(record.url) if check_health and record.url else None
        # ready once it answered (or, health unasked, once the start saw it ready); a slow /health right now
        # does not make a ready engine a new start
        ready = healthy or record.ready_s is not None
        return replace(base, state="ready" if ready else "starting", uptime_s=uptime, healthy=healthy, warning=warning)

    # -- start -----------------------------------------------------------------------------------
    def dry_run(
        self, profile: str | Profile | None = None, knobs: dict[str, Any] | None = None, port: int | None = None
    ) -> LaunchSpec:
        prof = profile if isinstance(profile, Profile) else load_profile(profile or DEFAULT_PROFILE)
        values = self._knob_values(prof, knobs)
        chosen = port or (prof.port if isinstance(prof.port, int) else 0)
        return build_launch(prof, values, chosen, control_token="<generated at start>")

    def start(
        self,
        profile: str | None = None,
        knobs: dict[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
        on_progress: ProgressFn | None = None,
    ) -> EngineStatus:
        """Start the engine and return when /health answers 200; raise EngineError with the reason."""
        prof = load_profile(profile or DEFAULT_PROFILE)
        values = self._knob_values(prof, knobs)
        current = self.status()
        if current.state in RUNNING_STATES:
            raise EngineError(
                f"an engine is already running (profile {current.profile}, pid {current.pid}, "
                f"{current.url}); stop it first, or restart it with new knobs"
            )
        self.files.clear_run()  # a crashed engine's record is replaced by this start
        self._preflight(prof)
        port = self._choose_port(prof)
        token = secrets.token_urlsafe(32)
        spec = build_launch(prof, values, port, token)
        check_launch(prof, values, spec.argv)
        kind = kind_of(prof)
        # what the machine must hold for it (exl3: the split's fit against the GPU's free memory); refuses here
        started = kind.check_start(prof, list(spec.argv), dict(spec.env), self.files.root) if kind.check_start else None
        log = self.files.rotate_logs()
        self.files.write_spec(
            SupervisorSpec(
                argv=list(spec.argv),
                env=dict(spec.env),
                log_path=str(log),
                run_path=str(self.files.run),
                exit_path=str(self.files.exit),
                stop_marker=str(self.files.stop_marker),
            )
        )
        record = EngineRecord(
            profile=prof.name,
            kind=prof.kind,
            api_key=kind_of(prof).client_api_key(prof, token),
            knobs=values,
            host=spec.host,
            port=port,
            url=spec.url,
            token=token,
            started_at=time.time(),
            log_path=str(log),
            argv=list(spec.argv),
            env=dict(spec.env),
            notes=list(spec.notes) + list(started.notes if started else ()),
        )  # pgid: the supervisor's, once spawned (it also writes its pid to engine.run.json first)
        self.files.write_record(record)  # before anything is spawned
        t0 = time.monotonic()
        try:
            supervisor = subprocess.Popen(
                [sys.executable, "-m", "frank.engine.supervisor", str(self.files.spec)],
                cwd=str(paths.REPO_ROOT),
                start_new_session=True,
                close_fds=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            self.files.clear_run()
            raise EngineError(f"could not spawn the engine's supervisor ({sys.executable}): {exc}") from None
        record = replace(
            record,
            pgid=supervisor.pid,
            supervisor_pid=supervisor.pid,
            supervisor_create_time=_create_time(supervisor.pid),
        )
        self.files.write_record(record)
        self._wait_ready(prof, record, supervisor, t0, timeout_s or prof.startup_timeout_s, on_progress)
        ready_s = round(time.monotonic() - t0, 3)
        self.files.write_record(replace(record, ready_s=ready_s))
        try:
            self.files.note_ready(prof.name, ready_s)
        except FrankError:  # a full disk here: the start itself went well
            pass
        if started is not None:
            try:
                started.at_ready()  # exl3: the floor this start measured (frank.engine.split_fit)
            except FrankError:
                pass
        return self.status()

    def _wait_ready(
        self,
        prof: Profile,
        record: EngineRecord,
        supervisor: subprocess.Popen[bytes],
        t0: float,
        timeout_s: float,
        on_progress: ProgressFn | None,
    ) -> None:
        with httpx.Client(timeout=self.health_timeout_s) as client:
            while True:
                elapsed = time.monotonic() - t0
                if supervisor.poll() is not None or self.files.exit.exists():
                    supervisor.wait()
                    status = self.status(check_health=False)
                    raise EngineError(_start_failure(prof, record, status))
                try:
                    if client.get(f"{record.url}{kind_of(prof).health_path}").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if elapsed > timeout_s:
                    tail = "\n".join(self.tail_log(15))
                    self.stop()
                    raise EngineError(
                        f"engine {prof.name} was not ready after {timeout_s:.0f} s and was stopped; "
                        f"log {record.log_path}, last lines:\n{tail}"
                    )
                if on_progress:
                    lines = self.tail_log(1)
                    on_progress(elapsed, lines[-1] if lines else "")
                time.sleep(0.5)

    def knob_values(self, prof: Profile, overrides: dict[str, Any] | None = None) -> dict[str, KnobValue]:
        """The values a start would use: the profile's defaults, the values saved while no engine ran, then
        `overrides`."""
        return self._knob_values(prof, overrides)

    def _knob_values(self, prof: Profile, overrides: dict[str, Any] | None) -> dict[str, KnobValue]:
        saved = self.files.read_json(self.files.saved_knobs_path(prof.name)) or {}
        saved = {k: v for k, v in saved.items() if k in prof.knobs}
        return prof.resolve_knobs({**saved, **(overrides or {})})

    def _preflight(self, prof: Profile) -> None:
        kind_of(prof).preflight(prof)

    def _choose_port(self, prof: Profile) -> int:
        if prof.port == "auto":
            with socket.socket(_family(prof.host), socket.SOCK_STREAM) as sock:
                sock.bind((prof.host, 0))
                return int(sock.getsockname()[1])
        port = int(prof.port)
        with socket.socket(_family(prof.host), socket.SOCK_STREAM) as sock:
            try:
                sock.bind((prof.host, port))
            except OSError:
                raise EngineError(
                    f"{prof.source}: port: {port} on {prof.host} is taken{_port_owner(port)}; "
                    f"stop that process or choose another port"
                ) from None
        return port

    # -- stop ------------------------------------------------------------------------------------
    def stop(self, grace_s: float | None = None) -> EngineStatus:
        """Stop the engine: SIGTERM the group, SIGKILL it after the grace period, wait until it is gone."""
        record = self.files.read_record()
        if record is None:
            return EngineStatus(state="stopped", log_path=str(self.files.log))
        run = self.files.read_run()
        pgid = record.pgid or (run.supervisor_pid if run else None)
        if grace_s is None:
            try:
                grace_s = load_profile(record.profile).stop_grace_s
            except FrankError:
                grace_s = 10.0
        self.files.root.mkdir(parents=True, exist_ok=True)
        self.files.stop_marker.touch(mode=0o600)
        if pgid and self._group_alive(pgid, record.supervisor_create_time):
            self._before_stop(record)
            _signal_group(pgid, signal.SIGTERM)
            if not _wait_group_gone(pgid, grace_s):
                _signal_group(pgid, signal.SIGKILL)
                if not _wait_group_gone(pgid, 15.0):
                    left = ", ".join(str(p) for p in _group_members(pgid))
                    raise EngineError(f"engine process group {pgid} survived SIGKILL (pids {left})")
        self.files.clear_run()
        return EngineStatus(state="stopped", log_path=str(self.files.log))

    def _before_stop(self, record: EngineRecord) -> None:
        """The kind's measurement as its engine is stopped (exl3: the split's floor after serving); what it
        cannot read or write never keeps the engine from stopping."""
        kind = KINDS.get(record.kind)
        if kind is None or kind.before_stop is None:
            return
        try:
            kind.before_stop(record.profile, record.started_at, record.env, self.files.root)
        except (FrankError, OSError):
            pass

    # -- knobs and restart -----------------------------------------------------------------------
    def restart(self, knobs: dict[str, Any] | None = None, *, on_progress: ProgressFn | None = None) -> EngineStatus:
        current = self.status(check_health=False)
        profile = current.profile or DEFAULT_PROFILE
        values = {**current.knobs, **(knobs or {})}
        load_profile(profile).resolve_knobs(values)  # validate before stopping anything
        self.stop()
        return self.start(profile, values, on_progress=on_progress)

    def set_knob(
        self, name: str, value: Any, *, profile: str | None = None, on_progress: ProgressFn | None = None
    ) -> KnobChange:
        """Flip a knob: live knobs without a restart, others by restarting (recorded either way)."""
        current = self.status()
        running = current.state in RUNNING_STATES
        prof = load_profile((current.profile if running else None) or profile or DEFAULT_PROFILE)
        if name not in prof.knobs:
            prof.resolve_knobs({name: value})  # raises naming the unknown knob
        knob = prof.knobs[name]
        new = knob.parse(value)
        old = (current.knobs if running else self._knob_values(prof, None)).get(name, knob.default)
        if not running:
            saved = self.files.read_json(self.files.saved_knobs_path(prof.name)) or {}
            saved[name] = new
            self.files.write_json(self.files.saved_knobs_path(prof.name), saved)
            applied, status = "next-start", current
        elif knob.apply == "live":
            if current.state != "ready":
                raise EngineError(
                    f"knob {name} is applied live, but the engine is still starting: try again when ready"
                )
            from frank.engine.live_knobs import apply_live

            apply_live(knob, new, current.url or "", self.token or "")
            record = self.files.read_record()
            if record is not None:
                self.files.write_record(replace(record, knobs={**record.knobs, name: new}))
            applied, status = "live", self.status()
        else:
            status = self.restart({name: new}, on_progress=on_progress)
            applied = "restart"
        self.files.append_knob_change({"profile": prof.name, "name": name, "old": old, "new": new, "applied": applied})
        return KnobChange(name=name, old=old, new=new, applied=applied, status=status)

    # -- process helpers -------------------------------------------------------------------------
    def _supervisor_alive(self, pid: int, create_time: float | None) -> bool:
        """The supervisor itself (same pid AND same start time) lives and is not a zombie."""
        try:
            proc = psutil.Process(pid)
            if create_time is not None and abs(proc.create_time() - create_time) >= 0.01:
                return False
            return proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def _group_alive(self, pgid: int | None, create_time: float | None) -> bool:
        """True while the supervisor (same pid AND same start time) or any process of its group lives."""
        if not pgid:
            return False
        try:
            proc = psutil.Process(pgid)
            if create_time is None or abs(proc.create_time() - create_time) < 0.01:
                if proc.status() != psutil.STATUS_ZOMBIE:
                    return True
        except psutil.Error:
            pass
        return bool(_group_members(pgid))

    def _healthy(self, url: str) -> bool:
        if self._http is None:
            self._http = httpx.Client(timeout=self.health_timeout_s)
        try:
            return self._http.get(url + "/health").status_code == 200
        except httpx.HTTPError:
            return False


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _group_members(pgid: int) -> list[int]:
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                members.append(pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _wait_group_gone(pgid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _reap(pgid)
        if not _group_members(pgid):
            return True
        time.sleep(0.1)
    return not _group_members(pgid)


def _reap(pid: int) -> None:
    """Collect the supervisor's exit status when this process started it (else it stays a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _port_owner(port: int) -> str:
    try:
        for conn in psutil.net_connections(kind="inet"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                return f" (pid {conn.pid}, {psutil.Process(conn.pid).name()})"
    except (psutil.Error, OSError):
        pass
    return ""


def _start_failure(prof: Profile, record: EngineRecord, status: EngineStatus) -> str:
    """The engine's refusal: how it ended, the profile field behind it (where the log points at one), and
    the engine's own last log lines."""
    from frank.engine.refusal import blame, out_of_gpu_memory

    fields = blame(prof, record.argv, status.log_tail, status.exit)
    own = [line for line in status.log_tail if not line.startswith("[frank]")][-15:]
    how = status.exit.describe() if status.exit is not None else "exit status unknown"
    behind = f"; the profile field behind it: {', '.join(fields)} in {prof.source}" if fields else ""
    lines = "\n".join(own) if own else "(the engine wrote nothing)"
    oom = out_of_gpu_memory(status.log_tail)
    if oom:  # never a ready engine, nor a bare crash: what ran out, and what fits
        hint = kind_of(prof).oom_hint.format(profile=prof.name)
        return (
            f"engine {prof.name} ran out of GPU memory while loading ({how}): {oom}{'; ' + hint if hint else ''}"
            f"{behind}; log {record.log_path}, the engine's last lines:\n{lines}"
        )
    return (
        f"engine {prof.name} exited during start ({how}){behind}; log {record.log_path}, "
        f"the engine's last lines:\n{lines}"
    )


def _gone_reason(record: EngineRecord, server_pid: int | None) -> str:
    if server_pid is None:
        return "the engine's supervisor is gone before it spawned the server (killed?)"
    return (
        f"the engine's supervisor (pid {record.pgid}) is gone and so is the server (pid {server_pid}): "
        "the server's exit status is lost (the supervisor was killed before it)"
    )
