"""A short recorded workload for the llama.cpp engines' tests: one conversation of two turns that fits
SmolLM2's 8192-token context (W01 mini's prompts do not) and the tiny MoE's."""

from __future__ import annotations

from pathlib import Path


def write_short_workload(path: Path) -> None:
    from frank.workloads.format import write_workload

    system = {"role": "system", "content": "You are a terse coding assistant. " * 20}
    first = [system, {"role": "user", "content": "Write a Python function that adds two numbers."}]
    second = [*first, {"role": "assistant", "content": "def add(a, b):\n    return a + b"}]
    second.append({"role": "user", "content": "Now one that multiplies them."})
    records = [
        {"id": f"r{i}", "task": "t", "episode": "e", "turn": i, "offset_s": 0.0, "body": {"messages": msgs}}
        for i, msgs in enumerate((first, second), 1)
    ]
    write_workload(path, "short", "two turns of one conversation", [("draw-1", records)])
