"""The console side of the agent harness: runs one episode through inspect-ai in the agent venv.

inspect-ai and its dependencies live in `.venv-agent` (`make agent-venv`), never in the console's venv:
this module only writes the episode's spec, starts `python -m frank.episodes.inspect_harness SPEC` there
and reads the result back. The subprocess runs offline: its proxies point at a closed loopback port
(NO_PROXY covers loopback only, where the recorder and the engine listen), and the usual telemetry and hub
switches are off, so anything inspect or a tool tried to download would fail in the log instead of
silently reaching the internet.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frank.episodes.suite import TaskSpec

from frank import readfile
from frank.errors import FrankError
from frank.paths import REPO_ROOT

SYSTEM_PROMPT = (
    "You are an expert software engineer working in a shell. The task's files are in the current "
    "directory. Use the tools to inspect and change them; when the task is done, call submit()."
)
DEAD_PROXY = "http://127.0.0.1:9"  # discard port: nothing listens, so any non-loopback request fails at once


def agent_python() -> Path:
    """The agent venv's interpreter (`make agent-venv`); FRANK_AGENT_PYTHON overrides it."""
    override = os.environ.get("FRANK_AGENT_PYTHON")
    return Path(override) if override else REPO_ROOT / ".venv-agent" / "bin" / "python"


def offline_env(log_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(
        {
            "PYTHONPATH": str(REPO_ROOT),
            "HTTP_PROXY": DEAD_PROXY,
            "HTTPS_PROXY": DEAD_PROXY,
            "ALL_PROXY": DEAD_PROXY,
            "http_proxy": DEAD_PROXY,
            "https_proxy": DEAD_PROXY,
            "all_proxy": DEAD_PROXY,
            "NO_PROXY": "127.0.0.1,localhost,::1",
            "no_proxy": "127.0.0.1,localhost,::1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "DO_NOT_TRACK": "1",
            "INSPECT_LOG_DIR": str(log_dir),
            "INSPECT_DISPLAY": "none",
            "INSPECT_TELEMETRY": "",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return env


@dataclass(frozen=True)
class EpisodeSettings:
    """What one request of the episode asks for: the seed's settings by default."""

    temperature: float = 1.0
    # the engine's sampling seed on every request (None: the engine draws one). A fixed seed makes an
    # episode repeatable on one machine and one engine build; it is not a seed across engines.
    sampling_seed: int | None = None
    thinking: bool = True  # chat_template_kwargs.thinking: templates without it ignore it
    tool_timeout_s: int = 60
    request_timeout_s: int = 600


def harness_spec(
    task: TaskSpec,
    workspace: Path,
    folder: Path,
    base_url: str,
    model: str,
    cache_salt: str,
    settings: EpisodeSettings,
    api_key: str = "frank",
    tool_calls: str = "native",
    context_tokens: int | None = None,
) -> dict[str, Any]:
    """The episode's spec for the agent venv. `tool_calls`: the engine's mode (its profile's); with
    "schema", `context_tokens` (the engine's context) bounds what tool output later requests carry."""
    extra: dict[str, Any] = {"cache_salt": cache_salt}
    if settings.thinking:
        extra["chat_template_kwargs"] = {"thinking": True}
    return {
        "task": task.id,
        "instruction": task.instruction,
        "workspace": str(workspace),
        "tools": list(task.tools),
        "system_prompt": SYSTEM_PROMPT,
        "max_turns": task.max_turns,
        "max_tokens": task.max_tokens_per_turn,
        "wall_time_s": task.wall_time_s,
        "tool_timeout_s": settings.tool_timeout_s,
        "temperature": settings.temperature,
        "seed": settings.sampling_seed,
        "max_retries": 0,
        "request_timeout_s": settings.request_timeout_s,
        "extra_body": extra,
        "model": model,
        "base_url": base_url.rstrip("/") + "/v1",
        "api_key": api_key,
        "tool_calls": tool_calls,
        "context_tokens": context_tokens,
        "log_dir": str(folder / "inspect"),
        "result": str(folder / "result.json"),
    }


class HarnessWorker:
    """One agent-venv process for a whole run (`inspect_harness --worker`): inspect-ai is imported once,
    not once per episode. Each episode is a spec path on its stdin; its result is the spec's `result`
    file, which the worker writes atomically. The worker's own output goes to the run's harness.log. A
    worker that dies, runs past an episode's wall time or is stopped is killed (with what its tools
    started) and a fresh one starts with the next episode."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def _ensure(self, log_dir: Path) -> subprocess.Popen[bytes]:
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        python = agent_python()
        if not python.exists():
            raise FrankError(f"agent venv missing: {python} (run `make agent-venv`)")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(python), "-m", "frank.episodes.inspect_harness", "--worker"],
                cwd=str(REPO_ROOT),
                env=offline_env(log_dir),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE,
            )
        return self.proc

    def run(self, spec: dict[str, Any], folder: Path, stop_check: Callable[[], bool] | None = None) -> dict[str, Any]:
        """Run one episode. Returns the harness's result, or {"error": ...} when the worker produced none
        (crashed, ran past the wall time plus a margin, or was stopped)."""
        folder.mkdir(parents=True, exist_ok=True)
        spec_path = folder / "spec.json"
        spec_path.write_text(json.dumps(spec, indent=1))
        result_path = Path(spec["result"])
        result_path.unlink(missing_ok=True)
        proc = self._ensure(Path(spec["log_dir"]))
        assert proc.stdin is not None
        try:
            proc.stdin.write(f"{spec_path}\n".encode())
            proc.stdin.flush()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + spec["wall_time_s"] + 120  # inspect's own time limit fires first
        stopped = None
        while not result_path.exists():
            if proc.poll() is not None:
                return {"error": f"harness exited {proc.returncode} without a result (see {self.log_path})"}
            if time.monotonic() > deadline:
                stopped = f"harness ran past the wall time ({spec['wall_time_s']} s) plus 120 s"
            elif stop_check is not None and stop_check():
                stopped = "stopped by the operator"
            if stopped:
                self.close()
                return {"error": f"harness: {stopped}"}
            time.sleep(0.02)
        return readfile.read_object(result_path)

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            try:
                proc.stdin.close()  # a worker between episodes ends on EOF
            except BrokenPipeError:
                pass
        try:
            proc.wait(timeout=0.5 if proc.poll() is None else 0)
            return
        except subprocess.TimeoutExpired:
            pass
        _kill_tree(proc)


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """The worker and what its tools started (it shares the runner's process group, so that killing a
    detached runner's group takes the worker with it; here only the worker's own tree goes)."""
    import psutil

    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    for child in tree:
        try:
            child.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)
    psutil.wait_procs(tree, timeout=5)
