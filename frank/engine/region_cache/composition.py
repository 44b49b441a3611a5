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
most); a list whose record is gone is simply compared in full."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

MAX_RECORDS = 32


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
    if entry is None or entry[0] is not ids or len(entry[0]) != entry[1].length:
        return None
    return entry[1]


def clear() -> None:
    with _lock:
        _records.clear()
