"""The replay record (one line of a draw's results file) as a type, and the one per-draw aggregation.

`ReplayRecord` is what the replay runner writes for each request and what everything else reads back
(the replay's summary, experiment cells, the campaign's watch, the console, the benchmarks): typed fields
instead of keys, with `to_json` / `from_json` at the file's seam (the JSON is unchanged).

`DrawTally` folds records into a draw's totals: adding a record is O(1) (the runner updates its summary
after every request, between timed requests), and `totals()` is O(1) too, but for the knob flips, found
again over the draw's requests (tens) after a record that carries live knob values. Its rule for a value
missing from a record is one: a sum over requests is the sum of what they carried, and it is absent (None)
as soon as one request that should carry it does not: never 0. A request's latest record wins (a resumed run
replays failed requests again).

Each record carries the live knob values the request was sent with (`live_knobs`: the region cache's state,
say) and, when one changed while it ran, those at its end (`live_knobs_end`); `knob_flips` lists where a
draw's live knobs changed, so a draw that spans a flip says so.

`StartMeasures` is what one engine start's replay measures over its draws (frank.engine.measures'
definitions), read by experiment cells and by the campaign's revert watch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from frank.engine import measures
from frank.engine.metrics import RequestDelta

_DELTA_FIELDS = {f.name for f in fields(RequestDelta)}
# Names records written before 2026-12-04 used (docs/measures.md, "The replay record's names"): still read.
_RENAMED = {"verify_steps": "drafted_steps"}


@dataclass(frozen=True)
class ClientTimes:
    """Timed on the client (seconds from the send): first byte, first token, last byte; streamed chunks; and
    when each streamed event with output arrived (`output_at_s`: the steps' times come from their gaps,
    frank.engine.measures.step_times)."""

    ttfb_s: float | None = None
    ttft_s: float | None = None
    total_s: float | None = None
    chunks: int | None = None
    output_at_s: tuple[float, ...] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClientTimes:
        kw = {k: v for k, v in data.items() if k in _CLIENT}
        if isinstance(kw.get("output_at_s"), list):
            kw["output_at_s"] = tuple(kw["output_at_s"])
        return cls(**kw)


@dataclass(frozen=True)
class ServerValues:
    """The request's server-side values (RequestDelta's fields), the CPU-expert decode wait read from the
    engine's pool threads around it (frank.engine.measures.cpu_expert_wait_s; None where there is no pool),
    and where each value came from (`sources`)."""

    values: RequestDelta
    sources: Mapping[str, str] = field(default_factory=dict)
    cpu_expert_wait_s: float | None = None
    cpu_expert_wait_step_s: float | None = None  # measures.cpu_expert_wait_per_step

    def to_json(self) -> dict[str, Any]:
        return asdict(self.values) | {
            "cpu_expert_wait_s": self.cpu_expert_wait_s,
            "cpu_expert_wait_step_s": self.cpu_expert_wait_step_s,
            "sources": dict(self.sources),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServerValues:
        data = {_RENAMED.get(k, k): v for k, v in data.items() if _RENAMED.get(k) not in data}
        kw = {k: v for k, v in data.items() if k in _DELTA_FIELDS}
        kw.setdefault("attributed", False)
        kw.setdefault("reason", "")
        if isinstance(kw.get("acceptance_per_position"), list):
            kw["acceptance_per_position"] = tuple(kw["acceptance_per_position"])
        return cls(
            RequestDelta(**kw),
            dict(data.get("sources") or {}),
            data.get("cpu_expert_wait_s"),
            data.get("cpu_expert_wait_step_s"),
        )


@dataclass(frozen=True)
class KnobFlip:
    """A live knob that changed within a draw, at request `request` (0-based `index` in the draw): it was sent
    with `new` after a request that ended with `old`; `during`: the change landed while this request ran (it
    was sent with `old` and ended with `new`)."""

    name: str
    old: Any
    new: Any
    index: int
    request: str
    during: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KnobFlip:
        return cls(
            str(data.get("name", "")),
            data.get("old"),
            data.get("new"),
            int(data.get("index") or 0),
            str(data.get("request", "")),
            bool(data.get("during")),
        )

    def describe(self) -> str:
        """The flip in words: "region_cache off → on at d1-ab-r03" (", during it": while that request ran)."""
        return f"{self.name} {self.old} → {self.new} at {self.request}" + (", during it" if self.during else "")


def knob_flips(previous: ReplayRecord | None, record: ReplayRecord) -> tuple[KnobFlip, ...]:
    """The live knobs that changed between `previous` (the draw's request before, or None) and `record`, or
    while `record` ran. A record without live knob values (an engine not this user's) shows no change."""
    start = record.live_knobs
    if start is None:
        return ()
    flips: list[KnobFlip] = []
    before = None if previous is None else (previous.live_knobs_end or previous.live_knobs)
    if before is not None:
        for name, value in start.items():
            if name in before and before[name] != value:
                flips.append(KnobFlip(name, before[name], value, record.index, record.id))
    for name, value in (record.live_knobs_end or {}).items():
        if name in start and start[name] != value:
            flips.append(KnobFlip(name, start[name], value, record.index, record.id, during=True))
    return tuple(flips)


@dataclass(frozen=True)
class ReplayRecord:
    """One request of a replay: what was sent, how it went, its client and server timings."""

    id: str
    draw: str
    index: int  # position in the draw (0-based)
    attempt: int
    status: str  # ok | failed
    task: str | None = None
    episode: str | None = None
    turn: int | None = None
    salt: str | None = None
    mode: str | None = None
    stream: bool | None = None
    sent_at: float | None = None
    error: str | None = None
    http_status: int | None = None
    client: ClientTimes | None = None
    server: ServerValues | None = None
    response_metrics: Mapping[str, Any] | None = None
    prompt_tokens: int | None = None
    prompt_ids_count: int | None = None
    prompt_ids_sha256: str | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    output_sha256: str | None = None
    metrics_scrape_s: tuple[float, ...] | None = None
    live_knobs: Mapping[str, Any] | None = None  # the engine's live knob values when the request was sent
    live_knobs_end: Mapping[str, Any] | None = None  # those at its end, only when one changed while it ran

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def attributed(self) -> bool:
        return self.server is not None and self.server.values.attributed

    def step_times(self) -> tuple[float, ...] | None:
        """Its verify steps' times as the client saw them (frank.engine.measures.step_times over the arrivals
        of its streamed output and the server's decode steps); None where they cannot be told apart."""
        v = self.server.values if self.attributed and self.server is not None else None
        at = self.client.output_at_s if self.client else None
        return measures.step_times(at, v.decode_steps if v else None, v.decode_s if v else None)

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["client"] = None if self.client is None else asdict(self.client)
        out["server"] = None if self.server is None else self.server.to_json()
        out["metrics_scrape_s"] = None if self.metrics_scrape_s is None else list(self.metrics_scrape_s)
        for name in ("live_knobs", "live_knobs_end"):
            out[name] = None if out[name] is None else dict(out[name])
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReplayRecord:
        kw = {f.name: data.get(f.name) for f in fields(cls) if f.name in data}
        client, server = data.get("client"), data.get("server")
        kw["client"] = ClientTimes.from_json(client) if client else None
        kw["server"] = ServerValues.from_json(server) if isinstance(server, Mapping) else None
        if kw.get("metrics_scrape_s") is not None:
            kw["metrics_scrape_s"] = tuple(kw["metrics_scrape_s"])
        kw.setdefault("draw", "")
        kw.setdefault("index", 0)
        kw.setdefault("attempt", 0)
        kw.setdefault("status", "failed")
        return cls(**kw)


_CLIENT = {f.name for f in fields(ClientTimes)}


def as_records(items: Iterable[ReplayRecord | Mapping[str, Any]]) -> list[ReplayRecord]:
    return [r if isinstance(r, ReplayRecord) else ReplayRecord.from_json(r) for r in items]


# -- per-draw totals ------------------------------------------------------------------------------------

# Server values summed per draw over attributed, measured requests.
SERVER_SUMS = ("ttft_s", "queue_s", "prefill_s", "decode_s", "front_end_s", "drafted_steps", "decode_steps")


@dataclass(frozen=True)
class DrawTotals:
    """Per-draw totals over the latest record of each request (server values over attributed ones)."""

    draw: str
    planned: int
    requests: int = 0
    ok: int = 0
    failed: int = 0
    unattributed: int = 0  # measured ok requests whose server values are not theirs alone
    measured: int = 0  # ok requests past the warm-up
    ttft_s: float | None = 0.0
    queue_s: float | None = 0.0  # None: an attributed record lacked it (llama.cpp exports no queue time)
    prefill_s: float | None = 0.0
    decode_s: float | None = 0.0
    front_end_s: float | None = 0.0  # None: likewise (it needs the queue time)
    drafted_steps: float | None = 0.0  # drafted steps (spec_decode_num_drafts)
    decode_steps: float | None = 0.0  # verify steps, drafted or not (inter-token latency count)
    counted_decode_s: float = 0.0  # decode seconds and steps of the requests that carried a decode-step count
    counted_decode_steps: float = 0.0
    waited_s: float = 0.0  # the CPU-expert wait and decode steps of the requests that carried both
    wait_steps: float = 0.0
    verify_step_s: float | None = None  # frank.engine.measures.time_per_verify_step over the draw
    cpu_expert_wait_s: float | None = None  # summed over the draw (None: no record carried one)
    cpu_expert_wait_step_s: float | None = None  # per verify step, over the requests with a wait and steps
    acceptance_length: float | None = None  # frank.engine.measures.acceptance_length over the draw
    client_ttft_s: float = 0.0
    client_total_s: float = 0.0  # over measured ok requests
    output_tokens: int = 0  # completion tokens of measured ok requests
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cold_requests: int = 0  # requests that start a conversation (turn 1)
    cold_front_end_s: float | None = 0.0
    prompt_ids_sha256: str | None = None  # over every request's prompt-ID hash, in order (None: some missing)
    outputs_sha256: str | None = None  # over every request's output hash (text and token IDs), likewise
    knob_flips: tuple[KnobFlip, ...] = ()  # live knobs that changed within the draw (it spans a flip)

    @property
    def complete(self) -> bool:
        return self.ok == self.planned


ReplayState = Literal["running", "finished", "stopped", "interrupted", "failed"]


@dataclass(frozen=True)
class ReplayTotals:
    """Sums over a run's draws; a value is None when some draw has no such measure."""

    requests: int
    ok: int
    failed: int
    unattributed: int
    ttft_s: float | None
    queue_s: float | None
    prefill_s: float | None
    decode_s: float | None
    front_end_s: float | None
    drafted_steps: float | None
    decode_steps: float | None
    client_ttft_s: float
    client_total_s: float
    prompt_tokens: int
    cached_tokens: int
    cold_requests: int
    cold_front_end_s: float | None

    @classmethod
    def over(cls, draws: Iterable[DrawTotals]) -> ReplayTotals:
        draws = list(draws)

        def total(name: str) -> Any:
            values = [getattr(t, name) for t in draws]
            return None if any(v is None for v in values) else sum(values)

        return cls(**{f.name: total(f.name) for f in fields(cls)})


@dataclass(frozen=True)
class ReplaySummary:
    """A replay run as it stands (summary.json, rewritten after every request): what `ReplayRunner.run`
    returns. `to_json` keeps the file's keys and their order."""

    run_id: str
    run_dir: str
    state: ReplayState
    error: str | None
    workload: dict[str, Any] | None  # run.json's: name, path, manifest_sha256
    mode: str
    stream: bool
    base_url: str
    model: str | None
    attempts: int | None
    updated_at: float
    draws: dict[str, DrawTotals]
    totals: ReplayTotals

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        # knob_flips as a list, as summary.json reads back (asdict keeps a tuple)
        out["draws"] = {
            d: asdict(t) | {"complete": t.complete, "knob_flips": [asdict(f) for f in t.knob_flips]}
            for d, t in self.draws.items()
        }
        out["totals"] = asdict(self.totals)
        return out


class _Sum:
    """A sum of per-request values that becomes None for good once a request lacks its value."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: float | None = 0.0

    def add(self, v: float | None) -> None:
        self.value = None if v is None or self.value is None else self.value + v


class DrawTally:
    """A draw's totals, folded one record at a time. `warmup`: the first N requests of the draw (by index)
    are replayed but not measured (an experiment's warm-up); they still count as requests, ok or failed."""

    def __init__(self, draw: str, planned: Iterable[str], warmup: int = 0) -> None:
        self.draw = draw
        self.planned = list(planned)
        self._position = {rid: i for i, rid in enumerate(self.planned)}
        self.warmup = warmup
        self.latest: dict[str, ReplayRecord] = {}
        self._reset()

    def _reset(self) -> None:
        self._counts = dict.fromkeys(
            ("requests", "ok", "failed", "unattributed", "measured", "prompt_tokens", "cached_tokens"), 0
        )
        self._counts.update(cold_requests=0, output_tokens=0)
        self._sums = {key: _Sum() for key in (*SERVER_SUMS, "cold_front_end_s")}
        self._client_ttft = self._client_total = self._accepted = 0.0
        self._counted_decode_s = self._counted_steps = 0.0
        self._wait = self._waited = self._wait_steps = 0.0
        self._wait_carried = False
        self._hashes: tuple[str | None, str | None] | None = None
        self._flips: tuple[KnobFlip, ...] | None = None

    def add(self, record: ReplayRecord | Mapping[str, Any]) -> None:
        rec = record if isinstance(record, ReplayRecord) else ReplayRecord.from_json(record)
        if rec.id not in self._position:
            return
        replaced = rec.id in self.latest
        self.latest[rec.id] = rec
        if replaced:  # a request replayed again (a resumed run): fold the draw again, latest records only
            self._reset()
            for r in self.latest.values():
                self._fold(r)
        else:
            self._fold(rec)
        self._hashes = None
        if rec.live_knobs is not None or self._flips:
            self._flips = None  # read again (once per totals) from the latest records in draw order

    def add_all(self, records: Iterable[ReplayRecord | Mapping[str, Any]]) -> DrawTally:
        latest = {r.id: r for r in as_records(records)}
        for rec in latest.values():
            self.add(rec)
        return self

    def _fold(self, rec: ReplayRecord) -> None:
        c = self._counts
        c["requests"] += 1
        if not rec.ok:
            c["failed"] += 1
            return
        c["ok"] += 1
        c["prompt_tokens"] += int(rec.prompt_tokens or 0)
        cold = rec.turn == 1
        c["cold_requests"] += int(cold)
        if self._position[rec.id] < self.warmup:
            return
        c["measured"] += 1
        client = rec.client or ClientTimes()
        self._client_ttft += client.ttft_s or 0.0
        self._client_total += client.total_s or 0.0
        c["output_tokens"] += int(rec.completion_tokens or 0)
        if not rec.attributed:
            c["unattributed"] += 1
            return
        assert rec.server is not None  # attributed: the server's values are there
        v = rec.server.values
        for key in SERVER_SUMS:
            self._sums[key].add(getattr(v, key))
        if cold:
            self._sums["cold_front_end_s"].add(v.front_end_s)
        c["cached_tokens"] += int(v.cached_tokens or 0)
        self._accepted += v.accepted_tokens or 0.0
        if v.decode_steps:  # both halves of the ratio from the same requests
            self._counted_decode_s += v.decode_s or 0.0
            self._counted_steps += v.decode_steps
        wait = rec.server.cpu_expert_wait_s
        if wait is not None:  # a pool measured: its wait, and per step over requests with decode steps
            self._wait_carried = True
            self._wait += wait
            if v.decode_steps:
                self._waited += wait
                self._wait_steps += v.decode_steps

    def measured(self) -> list[ReplayRecord]:
        """The latest records of the draw's measured requests (ok, past the warm-up), in draw order."""
        recs = (self.latest.get(rid) for rid in self.planned[self.warmup :])
        return [r for r in recs if r is not None and r.ok]

    def _draw_hashes(self) -> tuple[str | None, str | None]:
        if self._hashes is None:
            recs = [self.latest.get(rid) for rid in self.planned]
            self._hashes = (
                _hash_all([r.prompt_ids_sha256 if r and r.ok else None for r in recs]),
                _hash_all([r.output_sha256 if r and r.ok else None for r in recs]),
            )
        return self._hashes

    def _knob_flips(self) -> tuple[KnobFlip, ...]:
        if self._flips is None:
            flips: list[KnobFlip] = []
            previous: ReplayRecord | None = None
            for rid in self.planned:
                rec = self.latest.get(rid)
                if rec is None or rec.live_knobs is None:
                    continue
                flips.extend(knob_flips(previous, rec))
                previous = rec
            self._flips = tuple(flips)
        return self._flips

    def totals(self) -> DrawTotals:
        sums = {key: s.value for key, s in self._sums.items()}
        drafted_steps = sums["drafted_steps"]
        complete = self._counts["ok"] == len(self.planned)
        prompt_hash, output_hash = self._draw_hashes() if complete else (None, None)
        return DrawTotals(
            draw=self.draw,
            planned=len(self.planned),
            **self._counts,
            **sums,
            counted_decode_s=self._counted_decode_s,
            counted_decode_steps=self._counted_steps,
            verify_step_s=measures.time_per_verify_step(self._counted_decode_s, self._counted_steps),
            cpu_expert_wait_s=self._wait if self._wait_carried else None,
            cpu_expert_wait_step_s=measures.cpu_expert_wait_per_step(self._waited, self._wait_steps)
            if self._wait_carried
            else None,
            waited_s=self._waited,
            wait_steps=self._wait_steps,
            acceptance_length=measures.acceptance_length(self._accepted, drafted_steps),
            client_ttft_s=self._client_ttft,
            client_total_s=self._client_total,
            prompt_ids_sha256=prompt_hash,
            outputs_sha256=output_hash,
            knob_flips=self._knob_flips(),
        )


def _hash_all(hashes: list[str | None]) -> str | None:
    if not hashes or not all(hashes):
        return None
    return hashlib.sha256("\n".join(hashes).encode()).hexdigest()


def draw_totals(
    draw: str, planned: Iterable[str], records: Iterable[ReplayRecord | Mapping[str, Any]], warmup: int = 0
) -> DrawTotals:
    """A draw's totals over the latest record of each planned request."""
    return DrawTally(draw, planned, warmup).add_all(records).totals()


# -- one engine start's measures ------------------------------------------------------------------------


@dataclass(frozen=True)
class StartMeasures:
    """What one engine start's replay measures (frank.engine.measures' definitions, docs/measures.md)."""

    time_per_verify_step: float | None  # decode seconds / decode steps over the start's measured requests
    # the median of the measured requests' step times (the `median` aggregate; None: a request with decode
    # steps whose steps the client could not tell apart, or none recorded)
    time_per_verify_step_median: float | None
    front_end_per_draw: float | None  # front-end seconds per draw, mean over draws (None: not exported)
    total_replay_time: float  # client seconds, send to last byte, over measured requests
    client_time_per_draw: float | None
    tokens_per_s: float | None  # output tokens / client seconds
    cpu_expert_wait_per_step: float | None  # the CPU-expert decode wait per verify step (None: no pool)
    decode_steps: float
    decode_s: float
    front_end_by_draw: dict[str, float | None]
    measured_requests: int
    failed: int
    unattributed: int
    prompt_hashes: dict[str, str | None]  # "draw/id" -> the request's prompt-ID hash
    output_hashes: dict[str, str | None]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def tallies_of(
    records_by_draw: Mapping[str, Iterable[ReplayRecord | Mapping[str, Any]]], warmup: int = 0
) -> dict[str, DrawTally]:
    """Each draw's tally, its planned requests being those its records name (in file order)."""
    out = {}
    for draw, items in records_by_draw.items():
        records = as_records(items)
        out[draw] = DrawTally(draw, dict.fromkeys(r.id for r in records), warmup).add_all(records)
    return out


def start_measures(tallies: Mapping[str, DrawTally]) -> StartMeasures:
    totals = {draw: tally.totals() for draw, tally in tallies.items()}
    client = sum(t.client_total_s for t in totals.values())
    steps = sum(t.counted_decode_steps for t in totals.values())
    decode = sum(t.counted_decode_s for t in totals.values())
    fronts = [t.front_end_s for t in totals.values()]
    out_tokens = sum(t.output_tokens for t in totals.values())
    prompt_hashes: dict[str, str | None] = {}
    output_hashes: dict[str, str | None] = {}
    for draw, tally in tallies.items():
        for rec in sorted(tally.latest.values(), key=lambda r: r.index):
            prompt_hashes[f"{draw}/{rec.id}"] = rec.prompt_ids_sha256
            output_hashes[f"{draw}/{rec.id}"] = rec.output_sha256
    return StartMeasures(
        time_per_verify_step=measures.time_per_verify_step(decode, steps),
        time_per_verify_step_median=median_step_s(tallies.values()),
        front_end_per_draw=_mean_or_none(fronts),
        total_replay_time=client,
        client_time_per_draw=client / len(totals) if totals else None,
        tokens_per_s=out_tokens / client if client else None,
        cpu_expert_wait_per_step=measures.cpu_expert_wait_per_step(
            sum(t.waited_s for t in totals.values()), sum(t.wait_steps for t in totals.values())
        )
        if any(t.cpu_expert_wait_s is not None for t in totals.values())
        else None,
        decode_steps=steps,
        decode_s=decode,
        front_end_by_draw={draw: t.front_end_s for draw, t in totals.items()},
        measured_requests=sum(t.measured for t in totals.values()),
        failed=sum(t.failed for t in totals.values()),
        unattributed=sum(t.unattributed for t in totals.values()),
        prompt_hashes=prompt_hashes,
        output_hashes=output_hashes,
    )


def median_step_s(tallies: Iterable[DrawTally]) -> float | None:
    """The median of every step time of the measured, attributed requests with decode steps; None as soon as
    one of them has no step times (frank.engine.measures.median_step_s)."""
    steps: list[float] = []
    for tally in tallies:
        for rec in tally.measured():
            if not rec.attributed or rec.server is None or not rec.server.values.decode_steps:
                continue
            times = rec.step_times()
            if times is None:
                return None
            steps.extend(times)
    return measures.median_step_s(steps)


def _sum_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(values)


def _mean_or_none(values: list[float | None]) -> float | None:
    total = _sum_or_none(values)
    return None if total is None or not values else total / len(values)
