"""Summarize a GPU run's logs folder (scripts/device_llamacpp_gpu.sh): what the telemetry saw on the GPU
(utilisation, memory, the engine's own memory, PCIe, power, clocks), the engine's own timings from its
/metrics, and the W01 mini replay's figures. Prints plain text; runs on the device and here.

    python scripts/summarize_gpu_run.py LOGS_DIR [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
LLAMACPP_COUNTERS = (
    "prompt_tokens_total",
    "prompt_seconds_total",
    "tokens_predicted_total",
    "tokens_predicted_seconds_total",
    "n_decode_total",
)


def _stats(values: list[float]) -> dict[str, float] | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"n": len(vals), "mean": statistics.fmean(vals), "max": max(vals), "min": min(vals)}


# run.log's step stamps ("== 05:32:14 [21 s] replay ...") that open and close each phase of the recording
PHASES = {"replay": ("replay w01-mini", "load:"), "load": ("load:", "after the load")}


def phase_windows(run_log: Path, day: datetime) -> dict[str, tuple[float, float]]:
    stamps: list[tuple[float, str]] = []
    for line in run_log.read_text(errors="replace").splitlines():
        m = re.match(r"== (\d\d):(\d\d):(\d\d) \[\d+ s\] (.*)", line)
        if m:
            at = day.replace(hour=int(m[1]), minute=int(m[2]), second=int(m[3]), microsecond=0)
            stamps.append((at.timestamp(), m[4]))
    out = {}
    for name, (first, last) in PHASES.items():
        start = next((t for t, text in stamps if text.startswith(first)), None)
        end = next((t for t, text in stamps if text.startswith(last)), None)
        if start is not None and end is not None:
            out[name] = (start, end + 1.0)  # stamps are whole seconds
    return out


def telemetry(path: Path, run_log: Path | None = None) -> dict[str, Any]:
    samples = json.loads(path.read_text())["samples"]
    out = gpu_figures(samples)
    if run_log is not None and run_log.exists() and samples:
        day = datetime.fromtimestamp(samples[0]["wall_time"], UTC)
        for name, (start, end) in phase_windows(run_log, day).items():
            part = [s for s in samples if start <= s["wall_time"] < end]
            out[f"during_{name}"] = gpu_figures(part) | {"seconds": end - start}
    return out


def gpu_figures(samples: list[dict[str, Any]]) -> dict[str, Any]:
    gpu = [s["gpus"][0] for s in samples if s["gpus"]]
    rates = [s["engine"]["rates"] for s in samples if (s["engine"].get("rates") or {}).get("valid")]
    busy = [g for g in gpu if (g["util_gpu"] or 0) > 0]
    return {
        "samples": len(samples),
        "with_gpu": len(gpu),
        "gpu_error": next((s["gpu_error"] for s in samples if s["gpu_error"]), None),
        "gpu_name": gpu[0]["name"] if gpu else None,
        "util_gpu_percent": _stats([g["util_gpu"] for g in gpu]),
        "samples_util_above_0": len(busy),
        "memory_used_mib": _stats([g["memory_used"] / MIB for g in gpu if g["memory_used"] is not None]),
        "engine_memory_mib": _stats([g["engine_memory"] / MIB for g in gpu if g["engine_memory"] is not None]),
        "pcie": f"gen{gpu[0]['pcie_gen']} x{gpu[0]['pcie_width']}" if gpu else None,
        "pcie_tx_mib_s": _stats([g["pcie_tx_bps"] / MIB for g in gpu if g["pcie_tx_bps"] is not None]),
        "pcie_rx_mib_s": _stats([g["pcie_rx_bps"] / MIB for g in gpu if g["pcie_rx_bps"] is not None]),
        "power_w": _stats([g["power_w"] for g in gpu]),
        "sm_clock_mhz": _stats([g["sm_clock_mhz"] for g in gpu]),
        "engine_states": sorted({s["engine"]["state"] for s in samples}),
        "engine_cpu_percent": _stats(
            [(s["cpu"].get("engine") or {}).get("cpu_percent") for s in samples if s["cpu"].get("engine")]
        ),
        "engine_generation_tokens_per_s": _stats([r.get("generation_tokens_per_s") for r in rates]),
        "engine_prompt_tokens_per_s": _stats([r.get("prompt_tokens_per_s") for r in rates]),
    }


def llamacpp_metrics(path: Path) -> dict[str, Any]:
    """The server's own counters (llama.cpp's /metrics, `llamacpp:` prefix) and the rates they imply."""
    found: dict[str, float] = {}
    for line in path.read_text().splitlines():
        m = re.match(r"llamacpp:(\w+)(?:\{[^}]*\})?\s+(\S+)$", line)
        if m and m.group(1) in LLAMACPP_COUNTERS:
            found[m.group(1)] = float(m.group(2))
    out: dict[str, Any] = dict(found)
    if found.get("prompt_seconds_total"):
        out["prompt_tokens_per_s"] = found["prompt_tokens_total"] / found["prompt_seconds_total"]
    if found.get("tokens_predicted_seconds_total", 0) >= 0.05:  # one-token answers take ~0 s: no rate
        out["generation_tokens_per_s"] = found["tokens_predicted_total"] / found["tokens_predicted_seconds_total"]
    return out


def replays(logs: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    main = logs / "replay-w01-mini.json"
    if main.exists() and main.stat().st_size:
        out["w01_mini_draw_1"] = json.loads(main.read_text())
    return out


def summarize(logs: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if (logs / "telemetry.json").exists():
        out["telemetry"] = telemetry(logs / "telemetry.json", logs / "run.log")
    if (logs / "metrics.txt").exists():
        out["engine_metrics"] = llamacpp_metrics(logs / "metrics.txt")
    out["replays"] = replays(logs)
    if (logs / "load.json").exists():
        out["load"] = json.loads((logs / "load.json").read_text())
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("logs", type=Path)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    summary = summarize(args.logs)
    print(json.dumps(summary, indent=None if args.json else 2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
