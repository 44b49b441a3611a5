"""Drawing the order of engine starts uniformly from all possible orders, from a recorded seed.

A p-value is a randomization p-value only if the order was drawn uniformly from every order the design
allows, before any engine starts. We number those orders 0..N-1, draw one index with
`random.Random(seed).randrange(N)` (exactly uniform) and decode it:

- `blocks`: k blocks of one start per arm; each block's order is one of the m! permutations, so N = (m!)^k
  and the index is read as k mixed-radix digits, block 1 first.
- `balanced`: n starts per arm in 2n slots; the order is the set of slots of the first arm, one of
  C(2n, n) sets in lexicographic order.

The seed comes from `secrets` and is recorded with the method name, so anyone can re-derive the order.
"""

from __future__ import annotations

import itertools
import math
import random
import secrets
from dataclasses import dataclass
from typing import Any

from frank.experiments.design import Design

METHOD = "python-random-randrange-unrank-v1"


@dataclass(frozen=True)
class Slot:
    slot: int  # 0-based position in the run order
    arm: str
    block: int | None  # 1-based block, for `blocks` designs

    def to_json(self) -> dict[str, Any]:
        return {"slot": self.slot, "start": self.slot + 1, "block": self.block, "arm": self.arm}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Slot:
        return cls(slot=int(data["slot"]), arm=str(data["arm"]), block=data.get("block"))


@dataclass(frozen=True)
class DrawnOrder:
    seed: int
    method: str
    index: int  # which of the `count` orders was drawn
    count: int  # how many orders the design allows
    slots: tuple[Slot, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": str(self.seed),
            "method": self.method,
            "index": self.index,
            "count": self.count,
            "slots": [s.to_json() for s in self.slots],
        }


def new_seed() -> int:
    return secrets.randbits(128)


def order_count(design: Design) -> int:
    arms = len(design.arms)
    if design.kind == "blocks":
        return int(math.factorial(arms) ** int(design.blocks or 0))
    if design.kind == "balanced":
        n = int(design.starts_per_arm or 0)
        return math.comb(2 * n, n)
    return 1


def draw_order(design: Design, seed: int) -> DrawnOrder:
    if not design.runnable:
        raise ValueError("an external design has no order to draw")
    count = order_count(design)
    index = random.Random(seed).randrange(count)
    return DrawnOrder(seed=seed, method=METHOD, index=index, count=count, slots=unrank(design, index))


def draw_balanced(arms: tuple[str, str], n: int, seed: int) -> DrawnOrder:
    """A balanced order of n starts per arm without a design file (`frank bench`): the same draw and
    decoding as a registered `balanced` design's."""
    count = math.comb(2 * n, n)
    index = random.Random(seed).randrange(count)
    return DrawnOrder(seed, METHOD, index, count, _unrank_balanced(index, list(arms), n))


def unrank(design: Design, index: int) -> tuple[Slot, ...]:
    names = [arm.name for arm in design.arms]
    if design.kind == "blocks":
        return _unrank_blocks(index, names, int(design.blocks or 0))
    return _unrank_balanced(index, names, int(design.starts_per_arm or 0))


def _unrank_blocks(index: int, names: list[str], blocks: int) -> tuple[Slot, ...]:
    perms = list(itertools.permutations(names))
    slots: list[Slot] = []
    for block in range(1, blocks + 1):
        index, digit = divmod(index, len(perms))
        for arm in perms[digit]:
            slots.append(Slot(slot=len(slots), arm=arm, block=block))
    return tuple(slots)


def _unrank_balanced(index: int, names: list[str], n: int) -> tuple[Slot, ...]:
    """The index-th n-subset of range(2n) in lexicographic order holds the first arm's starts."""
    total, chosen, start = 2 * n, [], 0
    for remaining in range(n, 0, -1):
        for pos in range(start, total):
            below = math.comb(total - pos - 1, remaining - 1)  # subsets that take `pos` next
            if index < below:
                chosen.append(pos)
                start = pos + 1
                break
            index -= below
    first = set(chosen)
    return tuple(Slot(slot=i, arm=names[0] if i in first else names[1], block=None) for i in range(total))


def hosts_by_slot(hosts: tuple[str, ...], slots: tuple[Slot, ...]) -> dict[int, str]:
    """Each slot's host when a design's blocks are dealt to hosts (`[design].hosts`): in drawn order, the
    first block to hosts[0], the next to hosts[1], and round again."""
    blocks: list[int | None] = []
    for slot in slots:
        if slot.block not in blocks:
            blocks.append(slot.block)
    dealt = {block: hosts[i % len(hosts)] for i, block in enumerate(blocks)}
    return {slot.slot: dealt[slot.block] for slot in slots}
