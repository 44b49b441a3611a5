"""The replay client's own time per request does not grow with the draw: at request 10 against request 135.

    .venv/bin/python benchmarks/bench_replay_growth.py [--url URL] [--n 135] [--json]

Without --url it uses the running engine (frank engine status) or starts the embedded one and stops it at
the end. One draw of N short requests (engine mode: one output token, streamed) is replayed by the real
replay runner. For each request the benchmark takes, from the runner's own progress events:

  own          the replay thread's CPU time from one request's `request` event to the next one's: all the
               client does for a request (the /metrics scrapes and their parsing, the request's body, the
               streamed response's parsing, its record, the tally and summary.json), none of the engine's
               time; CPU time, so another process on the machine does not move it (the target's figure);
  own_wall     the wall time between the same events less the HTTP exchange (the record's client
               total_s): it also holds the waits on the engine's /metrics and the fsyncs;
  bookkeeping  the part of it after the response: the record's append + fsync, the tally, summary.json
               (timed around the runner's own `_write_summary` and the append);

and, side by side on the same records, what the summary cost before it was a running tally (`refold`: the
whole draw file read again and folded from scratch after each request, `draw_totals(read_records(...))`),
timed after the run on the file as it stood after each request, so it does not weigh on `own`.
Printed per window of ten requests (1-10 and N-9..N) as medians, and their ratio: the target is within
1.2x for `own`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_engine import engine_url  # noqa: E402
from frank.workloads import replay  # noqa: E402
from frank.workloads.format import load_workload, write_workload  # noqa: E402
from frank.workloads.record import draw_totals  # noqa: E402
from frank.workloads.replay import ReplayOptions, ReplayRunner, read_records  # noqa: E402


def workload(folder: Path, n: int) -> Path:
    records = [
        {
            "id": f"r{i:03d}",
            "task": "bench",
            "episode": f"e{i}",
            "turn": 1,
            "offset_s": 0.0,
            "body": {"messages": [{"role": "user", "content": f"Count to {i}."}], "max_tokens": 1},
        }
        for i in range(n)
    ]
    return write_workload(folder / "wl", "growth", "replay client growth", [("d", records)])


def run(url: str, n: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        wl = load_workload(workload(Path(tmp), n))
        marks: list[tuple[str, float, object, float]] = []
        book: list[float] = []
        refold: list[float] = []

        def progress(p: replay.ReplayProgress) -> None:
            marks.append((p.phase, time.perf_counter(), p.last, time.thread_time()))

        runner = ReplayRunner(wl, url, ReplayOptions(mode="engine"), Path(tmp) / "run", progress)
        write_summary, append = runner._write_summary, replay._append
        pending = [0.0]

        def timed_append(path, record):  # noqa: ANN001
            pending[0] = time.perf_counter()
            append(path, record)

        def timed_summary(state, error=None):  # noqa: ANN001
            out = write_summary(state, error)
            if state == "running" and pending[0]:
                book.append(time.perf_counter() - pending[0])
                pending[0] = 0.0
            return out

        replay._append, runner._write_summary = timed_append, timed_summary
        try:
            summary = runner.run_sync()
        finally:
            replay._append = append
        lines = runner.draw_file("d").read_text().splitlines(keepends=True)
        planned = [r.id for r in runner.planned("d")]
        prefix = Path(tmp) / "prefix.jsonl"
        for k in range(1, len(lines) + 1):  # the peer: the file after request k, read and folded again
            prefix.write_text("".join(lines[:k]))
            t0 = time.perf_counter()
            draw_totals("d", planned, read_records(prefix))
            refold.append(time.perf_counter() - t0)
    starts = [(t, cpu) for phase, t, _, cpu in marks if phase == "request"]
    results = [last for phase, _, last, _ in marks if phase == "result"]
    own = [starts[i + 1][1] - starts[i][1] for i in range(len(starts) - 1)]
    own_wall = []
    for i in range(len(starts) - 1):
        total = results[i].client.total_s if results[i] is not None and results[i].client else None
        if total is not None:
            own_wall.append(starts[i + 1][0] - starts[i][0] - total)
    window = 10

    def ms(values: list[float], first: bool) -> float:
        part = values[:window] if first else values[-window:]
        return statistics.median(part) * 1000

    out = {"requests": n, "state": summary.state}
    for name, values in (("own", own), ("own_wall", own_wall), ("bookkeeping", book), ("refold", refold)):
        early, late = ms(values, True), ms(values, False)
        out[name] = {"first_ms": early, "last_ms": late, "ratio": late / early if early else None}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None)
    parser.add_argument("--n", type=int, default=135)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with engine_url(args.url) as url:
        result = run(url, args.n)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['requests']} requests, one draw ({result['state']}); medians over 10 requests:")
    for name in ("own", "own_wall", "bookkeeping", "refold"):
        r = result[name]
        print(f"  {name:12s} requests 1-10 {r['first_ms']:7.3f} ms   last 10 {r['last_ms']:7.3f} ms", end="")
        print(f"   x{r['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
