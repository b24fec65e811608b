"""``Partition``: one topic-partition as this broker sees it (seeds: leaders, followers, ISR).

A partition owns its :class:`~odradek.log.PartitionLog` and the replication state around
it: the leader epoch, the in-sync replica set and the high watermark. The high watermark is
the offset below which every in-sync replica holds the log; consumers never read past it.
On a single node the ISR is this broker alone, so the high watermark follows the log end
offset after every append. Followers' fetch positions will move it in a cluster, through
:meth:`Partition.update_follower_fetch_state`'s future counterpart, without changing callers.

The leader also checks idempotent producers' batches against the partition's producer
state (KIP-98, :mod:`odradek.log.producer_state`) before appending them, and records them
after: a retried batch is answered with its original offsets and not written twice.

This class is not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.log import FetchDataInfo, LogAppendInfo, PartitionLog
from odradek.log.producer_state import BatchMetadata, ProducerStateManager
from odradek.protocol.records import NO_TIMESTAMP, RecordBatch

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class PartitionError(Exception):
    """A request cannot be served by this partition here; ``error_code`` says why."""

    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


class Partition:
    def __init__(
        self,
        topic_partition: TopicPartition,
        log: PartitionLog,
        *,
        leader_id: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        topic_config: dict[str, Any],
        producer_state: ProducerStateManager,
    ) -> None:
        self.topic_partition = topic_partition
        self.log = log
        self.producer_state = producer_state
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.isr = isr
        # The effective topic-level configs (max.message.bytes, cleanup.policy, ...), parsed.
        self.topic_config = topic_config
        self._advance_high_watermark()

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320: a client that knows an older epoch is fenced; a newer one, unknown to us."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.none
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    def append_records_to_leader(self, records: bytearray, now_ms: int) -> LogAppendInfo:
        """Appends one batch (a Produce request carries exactly one per partition).

        A batch with a producer id is checked first (raising a ``ProducerStateError``); a
        retry of a batch already written is not appended and gets the original's offsets.
        """
        batch = RecordBatch(records)
        if batch.has_producer_id:
            duplicate = self.producer_state.validate_append(batch)
            if duplicate is not None:
                return self._duplicate_append_info(batch, duplicate)
        info = self.log.append(records, leader_epoch=self.leader_epoch, now_ms=now_ms)
        if info.first_offset and info.first_offset == self.log.segments[-1].base_offset:
            # The batch opened a new segment: snapshot the state as of its base offset (as
            # Kafka does at every roll), before the batch is recorded in it. At offset 0 the
            # state is empty, and so would the snapshot be.
            self._take_producer_snapshot(info.first_offset)
        if batch.has_producer_id:
            self.producer_state.update(RecordBatch(records))  # a fresh view: now stamped
        self._advance_high_watermark()
        return info

    def _duplicate_append_info(self, batch: RecordBatch, duplicate: BatchMetadata) -> LogAppendInfo:
        # A retry gets the answer its first attempt got: the original offsets, and the
        # original log-append time on LogAppendTime topics (the stored max timestamp), -1
        # otherwise. Kafka sends the stored max timestamp as log-append time on CreateTime
        # topics too, which makes clients report the record as stamped by the broker.
        log_append_time = duplicate.timestamp if self.log.config.log_append_time else NO_TIMESTAMP
        return LogAppendInfo(
            first_offset=duplicate.first_offset,
            last_offset=duplicate.last_offset,
            max_timestamp=duplicate.timestamp,
            offset_of_max_timestamp=duplicate.last_offset,
            log_append_time=log_append_time,
            log_start_offset=self.log.log_start_offset,
            records_count=batch.records_count,
            valid_bytes=batch.size_in_bytes,
        )

    def snapshot_producer_state(self) -> None:
        """At a clean stop: snapshots the producer state at the log end offset, so that the
        next start need not replay the log to rebuild it."""
        self._take_producer_snapshot(self.log.log_end_offset)

    def _take_producer_snapshot(self, offset: int) -> None:
        try:
            self.producer_state.take_snapshot(offset)
        except OSError as e:
            # The append it follows has succeeded; a missing snapshot only means replaying
            # more of the log at the next start.
            logger.warning("%s: producer state snapshot at %d failed: %s",
                           self.topic_partition, offset, e)

    def read_records(self, fetch_offset: int, max_bytes: int, *, min_one_batch: bool) -> FetchDataInfo:
        """Reads committed data only: nothing at or past the high watermark."""
        return self.log.read(
            fetch_offset, max_bytes, max_offset=self.high_watermark, min_one_batch=min_one_batch
        )

    def _advance_high_watermark(self) -> None:
        # With this broker as the whole ISR, everything in the log is replicated to the ISR.
        if self.isr == (self.leader_id,):
            self.log.high_watermark = self.log.log_end_offset
