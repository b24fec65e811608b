"""Reservoir sampling, Algorithm R (seed: "Reservoir Sampling"): a uniform sample of ``size``
records of a stream of unknown length, in ``size`` slots.

The first ``size`` records fill the slots in order. After that the n-th record (counting
from 1) replaces the record in a slot picked uniformly at random with probability size/n,
and is dropped otherwise; after any number of records, each one seen so far is in the sample
with the same probability size/n. With ``size`` 3: records 1, 2, 3 fill slots 0, 1, 2;
record 4 draws j in [0, 4) and replaces slot j if j < 3.

No I/O and no global randomness: the caller passes the random source, so a replayed
micro-batch given the same state and the same source makes the same sample.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Reservoir(Generic[T]):
    """The sample after ``seen`` records, and which slots the last :func:`offer` wrote."""

    size: int
    seen: int = 0
    slots: tuple[T, ...] = ()
    changed: frozenset[int] = frozenset()


def offer(reservoir: Reservoir[T], records: Iterable[T], rng: random.Random) -> Reservoir[T]:
    """The reservoir after ``records`` have been offered to it, in order."""
    seen = reservoir.seen
    slots = list(reservoir.slots)
    changed = set()
    for record in records:
        seen += 1
        if len(slots) < reservoir.size:
            slot = len(slots)
            slots.append(record)
        else:
            slot = rng.randrange(seen)
            if slot >= reservoir.size:
                continue
            slots[slot] = record
        changed.add(slot)
    return Reservoir(reservoir.size, seen, tuple(slots), frozenset(changed))
