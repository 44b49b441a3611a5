"""What a prompt's ID list was joined from: the cached region lists (the same list objects every time a
region hits the cache) and the cut tokens between them, recorded by the encoder for the lists it returns.

A later reader (held-prompt, comparing a new prompt with the previous turn's) can then skip every region
the two prompts share as the same list object instead of comparing its token IDs one by one. That is exact
only while the record is faithful, so:
- the regions are the cache's own lists and the cache never changes a list it holds (it stores fresh
  lists and only reads them after; the empty region is one shared list nothing appends to);
- a record is found only for the very list object the encoder returned (kept here, so its id cannot be
  reused) and only while its length is the recorded one; vLLM's API server does not change a text
  prompt's ID list in place between the renderer and the engine core (it only extends the list of a
  resumable session's prompt, which held-prompt never holds), so a list it copies or cuts has no record
  and the reader compares it in full;
- a record is made only where the returned list is exactly the join (not after verify replaced it with a
  fresh encode, not with add_special_tokens' affixes).

Bounded to the last `MAX_RECORDS` lists returned (the renderer's threads encode a few requests at once at
most); a list whose record is gone is simply compared in full. A reader that keeps a prompt takes its
record (`take`) and keeps a `JoinedView` of it instead of the list: the same IDs, read from the regions.
Why: a 170K-entry list that outlives its request is traversed by Python's cyclic GC in each young
collection it is part of (an API server's gen0 collection with eight held prompts in it took 5-8 ms);
the view is a handful of small objects over region lists that are already old."""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass

MAX_RECORDS = 16


@dataclass(frozen=True, slots=True)
class Composition:
    """The list is regions[0] + [seps[0]] + regions[1] + ... + [seps[-1]] + regions[-1], `length` IDs."""

    regions: tuple[list[int], ...]
    seps: tuple[int, ...]
    length: int


_records: OrderedDict[int, tuple[list[int], Composition]] = OrderedDict()
_lock = threading.Lock()


def record(ids: list[int], composition: Composition) -> None:
    """Remember that `ids` (a list just returned by the encoder) is that join."""
    with _lock:
        _records[id(ids)] = (ids, composition)
        _records.move_to_end(id(ids))
        while len(_records) > MAX_RECORDS:
            _records.popitem(last=False)


def composition_of(ids: object) -> Composition | None:
    """The record of this very list object, if it has one and still has the recorded length."""
    with _lock:
        entry = _records.get(id(ids))
    return _faithful(entry, ids)


def take(ids: object) -> Composition | None:
    """`composition_of`, and the record is dropped (the list is no longer kept here)."""
    with _lock:
        entry = _records.pop(id(ids), None)
    return _faithful(entry, ids)


def _faithful(entry: tuple[list[int], Composition] | None, ids: object) -> Composition | None:
    """The entry's record, if it is of this very list and the list still has the recorded length."""
    if entry is None or entry[0] is not ids or len(entry[0]) != entry[1].length:
        return None
    return entry[1]


class JoinedView:
    """The IDs of a recorded join, read from its regions and cut tokens: equal, index by index, to the list
    the record was made for (at the time it was checked: same object, recorded length). Read-only; supports
    len(), an int index (negative too) and a slice with step 1, which returns a new list."""

    __slots__ = ("joined", "_starts")

    def __init__(self, joined: Composition) -> None:
        starts, pos = [], 0
        for region in joined.regions:
            starts.append(pos)
            pos += len(region) + 1
        if len(joined.seps) != len(joined.regions) - 1 or pos - 1 != joined.length:
            raise ValueError(f"a record of {joined.length} IDs whose regions and cut tokens make {pos - 1}")
        self.joined = joined
        self._starts = starts

    def __len__(self) -> int:
        return self.joined.length

    def __getitem__(self, key: int | slice) -> int | list[int]:
        n = self.joined.length
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                raise ValueError("a JoinedView slices with step 1 only")
            return self._slice(start, stop)
        i = key + n if key < 0 else key
        if not 0 <= i < n:
            raise IndexError("JoinedView index out of range")
        k = bisect_right(self._starts, i) - 1
        region, offset = self.joined.regions[k], i - self._starts[k]
        return region[offset] if offset < len(region) else self.joined.seps[k]

    def _slice(self, start: int, stop: int) -> list[int]:
        out: list[int] = []
        if start >= stop:
            return out
        regions, seps, starts = self.joined.regions, self.joined.seps, self._starts
        k = bisect_right(starts, start) - 1
        while start < stop:
            base = starts[k]
            end = base + len(regions[k])
            if start < end:
                out += regions[k][start - base : min(stop, end) - base]
                start = min(stop, end)
            if start < stop:  # start == end: the cut token after region k
                out.append(seps[k])
                start += 1
            k += 1
        return out


def clear() -> None:
    with _lock:
        _records.clear()
