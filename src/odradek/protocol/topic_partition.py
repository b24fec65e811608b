"""``TopicPartition``: the name of one partition, the key every layer uses for it.

A named tuple rather than a dataclass: it is a dict key on every produce and fetch, and a
tuple's hash and equality are computed in C.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def partitions_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Topic -> its partitions' indexes, both in order: the shape of most requests'
    topic lists (``{"t": [0, 2]}`` for t-2 and t-0)."""
    grouped: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped
