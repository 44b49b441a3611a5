"""Time stamps at a request's phase boundaries in each vLLM process, for benchmarks/front_end_phases.py.

Armed from sitecustomize before vLLM is imported: once vLLM has loaded its general plugins (frank's parts
among them, so the wrappers below sit outside theirs), the methods at each boundary are wrapped to append
`event time.time() thread [minor page faults during the call]` to `<dir>/<pid>-<process name>.log`, and
the cyclic GC's collections are logged too. Only a benchmark loads this; nothing in frank imports it."""

from __future__ import annotations

import importlib.abc
import importlib.util
import inspect
import multiprocessing
import os
import resource
import sys
import threading
import time

_lock = threading.RLock()  # a GC callback can log from inside log()
_path = ""
_installed = False


def log(event: str, extra: str = "") -> None:
    global _path
    if not _path:  # named at the first event, once vLLM has named this process (EngineCore_DP0, ...)
        name = multiprocessing.current_process().name
        _path = os.path.join(os.environ["FRANK_FRONT_END_PHASES"], f"{os.getpid()}-{name}.log")
    with _lock, open(_path, "a") as out:
        out.write(f"{event} {time.time():.6f} {threading.current_thread().name.replace(' ', '_')} {extra}\n")


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def wrap(owner: object, name: str, before: str | None = None, after: str | None = None, static: bool = False) -> None:
    original = getattr(owner, name)
    if inspect.iscoroutinefunction(original):

        async def wrapped(*args, **kwargs):
            if before:
                log(before)
            result = await original(*args, **kwargs)
            if after:
                log(after)
            return result

    else:

        def wrapped(*args, **kwargs):
            faults = _faults()
            if before:
                log(before)
            result = original(*args, **kwargs)
            if after:
                log(after, f"faults {_faults() - faults}")
            return result

    setattr(owner, name, staticmethod(wrapped) if static else wrapped)


def _gc_callback(phase: str, info: dict) -> None:
    log(f"gc_{phase}", str(info.get("generation")))


def install() -> None:
    """The boundaries (vLLM 0.32). API server: render_chat_async (arrival_time is taken at its start),
    AsyncLLM.add_request, the engine client's send, the output processor. Engine core: its preprocessing
    of an added request, the scheduler's add_request (the QUEUED event), schedule, update_from_output
    (the first token's timestamp), and frank's held-prompt rebuild and vLLM's Request inside them."""
    global _installed
    if _installed:
        return
    _installed = True
    import gc

    gc.callbacks.append(_gc_callback)
    from vllm.renderers.base import BaseRenderer
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.engine.core import EngineCore, EngineCoreProc
    from vllm.v1.engine.core_client import AsyncMPClient
    from vllm.v1.engine.output_processor import OutputProcessor
    from vllm.v1.request import Request

    wrap(BaseRenderer, "render_chat_async", "arrival", "rendered")
    wrap(AsyncLLM, "add_request", "api_add")
    wrap(AsyncMPClient, "add_request_async", "send0", "send1")
    wrap(OutputProcessor, "process_outputs", "api_out")
    wrap(EngineCore, "preprocess_add_request", "core_pre0", "core_pre1")
    wrap(Scheduler, "add_request", "queued")
    wrap(Scheduler, "update_from_output", "core_upd0", "core_upd1")
    wrap(Request, "__init__", "request0", "request1")
    wrap(Request, "append_output_token_ids", "append0", "append1")
    wrap(EngineCoreProc, "_handle_client_request", "handle0", "handle1")
    wrap(Scheduler, "_free_request", "free0", "free1")
    wrap(EngineCoreProc, "_send_msg_tracking_payload", "outsend0", "outsend1", static=True)
    import queue

    import zmq

    wrap(queue.Queue, "put_nowait", "put0", "put1")
    wrap(zmq.Poller, "poll", "poll0", "poll1")
    try:
        from frank.plugins.front_end import held_prompt

        wrap(held_prompt, "rebuild", "rebuild0", "rebuild1")
        wrap(held_prompt.HeldPrompts, "put", "hold0", "hold1")
    except ImportError:
        pass


class _AfterPlugins(importlib.abc.MetaPathFinder):
    """Wraps vllm.plugins.load_general_plugins as that module is first imported, so `install` runs right
    after the plugins have loaded in this process."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "vllm.plugins":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_wrap(module):
            exec_module(module)
            load = module.load_general_plugins

            def load_general_plugins(*args, **kwargs):
                result = load(*args, **kwargs)
                try:
                    install()
                except Exception as exc:  # a probe must never stop the engine
                    log("probe_error", repr(exc).replace(" ", "_"))
                return result

            module.load_general_plugins = load_general_plugins

        spec.loader.exec_module = exec_and_wrap
        return spec


def arm() -> None:
    os.makedirs(os.environ["FRANK_FRONT_END_PHASES"], exist_ok=True)
    sys.meta_path.insert(0, _AfterPlugins())
