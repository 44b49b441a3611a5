"""frank/plugins/shm_idle.py: how long a reader of vLLM's shared-memory ring sleeps, and when the patch applies."""

from __future__ import annotations

import pytest

from frank.plugins import shm_idle


def test_the_sleep_grows_with_the_idle_time_between_its_bounds():
    assert shm_idle.sleep_for(0.0) == shm_idle.MIN_SLEEP_S
    assert shm_idle.sleep_for(0.05) == pytest.approx(0.0005)  # 1% of the gap while steps flow
    assert shm_idle.sleep_for(3600.0) == shm_idle.MAX_SLEEP_S  # idle: at most 200 wake-ups a second


@pytest.mark.parametrize("value", ["", "spin", "vllm", "bogus"])
def test_only_sleep_installs_anything(monkeypatch, value):
    installed = []
    monkeypatch.setattr(shm_idle, "install", lambda: installed.append(True))
    monkeypatch.setenv(shm_idle.ENV, value)
    shm_idle.register()
    assert installed == []


def test_sleep_installs(monkeypatch):
    installed = []
    monkeypatch.setattr(shm_idle, "install", lambda: installed.append(True))
    monkeypatch.setenv(shm_idle.ENV, "Sleep")
    shm_idle.register()
    assert installed == [True]
