"""Grader: timeline.json is the SEV1 incident's pager events, in order, each {time, event, by} as strings."""

from frank.episodes.judge import Fail, grade, read_json, same

FIELDS = {"time", "event", "by"}


def check(expected):
    got = read_json("timeline.json", limit=256 * 1024)
    if not isinstance(got, list):
        raise Fail(f"timeline.json is a {type(got).__name__}, not an array")
    for k, event in enumerate(got):
        if not isinstance(event, dict) or set(event) != FIELDS or any(type(v) is not str for v in event.values()):
            raise Fail(f"timeline.json[{k}]: expected an object of exactly {sorted(FIELDS)}, all strings")
    want = expected["timeline"]
    if not same(got, want):
        first = next((k for k, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
        raise Fail(
            f"expected {len(want)} events of {expected['incident']}, got {len(got)}; first difference at {first}"
        )
    return "timeline matches"


grade(check)
