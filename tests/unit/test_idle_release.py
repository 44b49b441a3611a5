"""What held-prompt's engine-core half leaves to the engine core's idle time (front_end/idle_release.py): a
deferred list or a finished request is freed only when nothing else holds it, and only while idle."""

from __future__ import annotations

import gc
import queue
import threading
import types
import weakref

from frank.plugins import compat
from frank.plugins.front_end import idle_release
from frank.plugins.front_end.held_prompt import HeldPrompts
from frank.plugins.front_end.idle_release import IdleRelease, install
from tests.polling import wait_for


class Tokens(list):  # a list that can be watched for being freed
    pass


class FakeRequest:
    """Only what the release reads of vLLM's Request: whether it is finished."""

    def __init__(self) -> None:
        self.finished = False
        self.tokens = Tokens(range(1000))

    def is_finished(self) -> bool:
        return self.finished


def _alive(ref: weakref.ref) -> bool:
    return ref() is not None


def test_deferred_lists_live_until_the_release():
    releaser = IdleRelease()
    held = Tokens(range(10))
    gone = weakref.ref(held)
    releaser.defer(held)
    del held
    assert _alive(gone) and releaser.waiting() == 1
    assert releaser.release() == 1
    assert not _alive(gone) and releaser.waiting() == 0


def test_a_request_goes_only_once_finished_and_held_nowhere_else():
    releaser = IdleRelease()
    request = FakeRequest()
    tokens = weakref.ref(request.tokens)
    releaser.watch(request)
    elsewhere = request  # the engine core's input thread still holds the last request it preprocessed
    del request
    assert releaser.release() == 0 and releaser.waiting() == 1  # running
    elsewhere.finished = True
    assert releaser.release() == 0 and releaser.waiting() == 1  # finished, but held elsewhere: not freed here
    del elsewhere  # the input thread moves on: the request is not freed there, this still holds it
    gc.collect()
    assert _alive(tokens)
    assert releaser.release() == 1 and not _alive(tokens)


def test_past_the_bound_the_oldest_goes_at_once():
    releaser = IdleRelease(bound=3)
    lists = [Tokens([k]) for k in range(5)]
    refs = [weakref.ref(x) for x in lists]
    for x in lists:
        releaser.defer(x)
    del lists, x
    assert [_alive(r) for r in refs] == [False, False, True, True, True]
    assert releaser.dropped_at_bound == 2 and releaser.waiting() == 3


def test_the_idle_hook_releases_only_while_the_engine_core_has_no_work(monkeypatch):
    # the Core below is no vLLM class: the compat check (tested in test_plugin_compat.py) is answered here
    verdict = compat.Verdict("idle-release", "test", ["0.32.0"], True, "0.32.0")
    monkeypatch.setattr(idle_release.compat, "admit", lambda patches: verdict)

    class Core:
        def __init__(self) -> None:
            self.work = True
            self.input_queue: queue.Queue = queue.Queue()
            self.idle_calls = 0
            self.asked = threading.Event()  # the release thread asked whether there is work

        def has_work(self) -> bool:
            work = self.work
            self.asked.set()
            return work

        def _notify_idle_state_callbacks(self) -> None:
            self.idle_calls += 1

    module = types.SimpleNamespace(EngineCoreProc=Core)
    releaser = IdleRelease(delay_s=0.0)
    assert install(module, releaser) and install(module, releaser)  # idempotent
    core = Core()
    releaser.defer(Tokens([1]))
    core._notify_idle_state_callbacks()  # woken, but the engine core has work again: nothing released
    assert core.asked.wait(5)  # the thread asked, was told "work", and so releases nothing on this wake-up
    assert core.idle_calls == 1 and releaser.waiting() == 1 and releaser.released == 0
    core.work = False
    core._notify_idle_state_callbacks()
    assert wait_for(lambda: releaser.waiting() == 0, 5)
    assert releaser.released == 1
    assert not install(types.SimpleNamespace(), releaser)  # a vLLM without the hook: nothing deferred


def test_held_prompts_hand_over_what_they_let_go():
    held = HeldPrompts(hold=2)
    let_go: list[list[int]] = []
    held.let_go = let_go.append
    for n in (1, 2, 3, 4):
        held.put(0, n, [n])
    assert let_go == [[1], [2]] and [n for n, _ in held.newest_first(0)] == [4, 3]
