"""``Partition``: one topic-partition as this broker sees it (seeds: leaders, followers, ISR).

A partition owns its :class:`~odradek.log.PartitionLog` and the replication state around
it: the leader epoch, the in-sync replica set and the high watermark. The high watermark is
the offset below which every in-sync replica holds the log; consumers never read past it.
On a single node the ISR is this broker alone, so the high watermark follows the log end
offset after every append. Followers' fetch positions will move it in a cluster, through
:meth:`Partition.update_follower_fetch_state`'s future counterpart, without changing callers.

The leader appends through :meth:`~odradek.log.PartitionLog.append_as_leader`, which checks
idempotent producers' batches against the log's producer state (KIP-98,
:mod:`odradek.log.producer_state`): a retried batch is answered with its original offsets
and not written twice.

This class is not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from odradek.log import FetchDataInfo, LogAppendInfo, PartitionLog
from odradek.log.producer_state import ProducerStateManager
from odradek.protocol.topic_partition import TopicPartition


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
    ) -> None:
        self.topic_partition = topic_partition
        self.log = log
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

    @property
    def producer_state(self) -> ProducerStateManager:
        return self.log.producer_state

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320: a client that knows an older epoch is fenced; a newer one, unknown to us."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.none
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    def append_records_to_leader(self, records: bytearray, now_ms: int) -> LogAppendInfo:
        """Appends one batch (a Produce request carries exactly one per partition) at this
        leader's epoch; raises a ``ProducerStateError`` for a producer's batch refused, and
        answers a retry with the original's offsets."""
        info = self.log.append_as_leader(records, leader_epoch=self.leader_epoch, now_ms=now_ms)
        self._advance_high_watermark()
        return info

    def read_records(self, fetch_offset: int, max_bytes: int, *, min_one_batch: bool) -> FetchDataInfo:
        """Reads committed data only: nothing at or past the high watermark."""
        return self.log.read(
            fetch_offset, max_bytes, max_offset=self.high_watermark, min_one_batch=min_one_batch
        )

    def _advance_high_watermark(self) -> None:
        # With this broker as the whole ISR, everything in the log is replicated to the ISR.
        if self.isr == (self.leader_id,):
            self.log.update_high_watermark(self.log.log_end_offset)
