"""``DelayedFetch``: a fetch waiting for ``min_bytes`` (Kafka's class of that name).

A fetch that found fewer than ``min_bytes`` waits in the fetch purgatory, watched under its
partitions, until one of these holds (Kafka's cases A-F):

* a partition is gone here, is no longer led here (a consumer) or its leader epoch moved
  past the one the fetcher knows: the fetch answers now, with that partition's error;
* the fetch offset lies on an older segment than the partition's end, or the end moved
  below the fetch offset (truncation): answer now;
* the bytes between each fetch offset and its partition's end add up to ``min_bytes``;
* ``max_wait_ms`` passes (the purgatory expires it).

"End" depends on who fetches: the high watermark for a consumer reading uncommitted data,
the last stable offset for ``read_committed``, the log end offset for a follower. So a
consumer's long poll completes when the high watermark moves, not at every append, and a
follower's as soon as the leader has new data. The bytes are counted from positions
(:class:`~odradek.log.offset_metadata.LogOffsetMetadata`), never by reading; the data is
read once, when the fetch completes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from odradek.log.file_region import FileRegion
from odradek.log.offset_metadata import LogOffsetMetadata
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.purgatory import DelayedOperation

# The replica id consumers send (Kafka's CONSUMER_REPLICA_ID); brokers send their node id.
CONSUMER_REPLICA_ID = -1


class IsolationLevel(enum.IntEnum):
    """Fetch and ListOffsets' ``isolation_level`` (KIP-98)."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


# Not frozen, like the other values built for every request: a frozen dataclass's
# __init__ costs four times as much (one object.__setattr__ per field). Nothing
# changes one once built.
@dataclass(slots=True)
class PartitionFetchInfo:
    """What a fetch asks of one partition."""

    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1  # KIP-320; -1: the fetcher does not know it
    log_start_offset: int = -1  # a follower's, to move the leader's low watermark


@dataclass(slots=True)
class FetchParams:
    """A Fetch request as the replica manager serves it."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: IsolationLevel
    partitions: Mapping[TopicPartition, PartitionFetchInfo]  # in request order
    # Large reads may come back as FileRegions, which only a connection that writes plain
    # bytes can send (no TLS).
    zero_copy: bool = False

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def fetch_only_from_leader(self) -> bool:
        """Consumers and followers read from the leader only (no KIP-392 read replicas)."""
        return True


@dataclass(slots=True)
class LogReadResult:
    """One partition's answer to a fetch: data as stored, the offsets around it, or the
    error that replaced them (Kafka's ``LogReadResult``)."""

    error: ErrorCode = ErrorCode.none
    records: bytes | FileRegion = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    # read_committed: (producer id, first offset) of each aborted transaction overlapping
    # the records, for the consumer to drop; None for other fetchers.
    aborted_transactions: list[tuple[int, int]] | None = None

    @property
    def size(self) -> int:
        return len(self.records)


class FetchPartitionError(Exception):
    """The fetch cannot wait for this partition any more: answer now."""


ReadPartitions = Callable[[FetchParams], dict[TopicPartition, LogReadResult]]
EndOffset = Callable[[TopicPartition, PartitionFetchInfo, FetchParams], LogOffsetMetadata]


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        deadline_ms: int,
        params: FetchParams,
        fetch_offsets: Mapping[TopicPartition, LogOffsetMetadata],
        end_offset: EndOffset,
        read: ReadPartitions,
        respond: Callable[[dict[TopicPartition, LogReadResult]], None],
    ) -> None:
        """``fetch_offsets``: where each partition's fetch offset sat at the first read.
        ``end_offset`` gives where a partition's end for this fetcher sits now (raising
        ``FetchPartitionError`` when the fetch should answer now), ``read`` reads every
        partition of the fetch, ``respond`` takes the answer."""
        super().__init__(deadline_ms)
        self.params = params
        self._fetch_offsets = fetch_offsets
        self._end_offset = end_offset
        self._read = read
        self._respond = respond

    def try_complete(self) -> bool:
        accumulated = 0
        for tp, fetch_offset in self._fetch_offsets.items():
            info = self.params.partitions[tp]
            try:
                end = self._end_offset(tp, info, self.params)
            except FetchPartitionError:
                return self.force_complete()  # cases A, B, D: answer with the error
            if end.message_offset == fetch_offset.message_offset:
                continue
            if end.message_offset_only or fetch_offset.message_offset_only:
                # No positions to count bytes with: new data is enough, an end below the
                # fetch offset (a new leader's lagging high watermark) is not.
                if end.message_offset > fetch_offset.message_offset:
                    return self.force_complete()
                continue
            if end.on_older_segment(fetch_offset):
                return self.force_complete()  # case F: the log was truncated under us
            if fetch_offset.on_older_segment(end):
                return self.force_complete()  # case F: the rest of a segment is there
            if fetch_offset.message_offset < end.message_offset:
                accumulated += min(end.position_diff(fetch_offset), info.partition_max_bytes)
        if accumulated >= self.params.min_bytes:
            return self.force_complete()  # case C
        return False

    def on_complete(self) -> None:
        self._respond(self._read(self.params))
