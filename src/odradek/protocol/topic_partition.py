"""``TopicPartition``: the name of one partition, the key every layer uses for it.

A named tuple rather than a dataclass: it is a dict key on every produce and fetch, and a
tuple's hash and equality are computed in C.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
