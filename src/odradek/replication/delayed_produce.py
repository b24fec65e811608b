"""``DelayedProduce`` and ``DelayedDeleteRecords``: writes waiting for the replicas.

A produce with ``acks=-1`` is answered once every in-sync replica has its records, which
the leader knows when its high watermark passes them (Kafka's ``DelayedProduce``): the
operation waits in the produce purgatory, watched under its partitions, and the replica
manager checks it whenever a high watermark moves. When ``flush.messages`` asks for an
fsync before the answer, the partition also waits for that flush. At ``timeout_ms`` the
partitions still waiting answer REQUEST_TIMED_OUT: their records are in the leader's log,
but the client cannot count them as replicated (Kafka says the same).

A DeleteRecords waits likewise until every replica's log start offset reached the requested
offset (Kafka's ``DelayedDeleteRecords``): the partition's low watermark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.purgatory import DelayedOperation


@dataclass(slots=True)
class ProducePartitionResult:
    """One partition's answer to a produce (a Produce response's partition entry)."""

    error: ErrorCode = ErrorCode.none
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    record_errors: tuple[tuple[int, str | None], ...] = ()  # (batch index, message), KIP-467
    error_message: str | None = None

    def fail(self, error: ErrorCode, message: str | None = None) -> None:
        self.error = error
        self.error_message = message
        self.base_offset = self.log_append_time = self.log_start_offset = -1


@dataclass(slots=True)
class ProducePartitionStatus:
    """What one partition of a delayed produce still waits for."""

    required_offset: int  # the high watermark that covers its records: last offset + 1
    result: ProducePartitionResult
    acks_pending: bool = True
    flush_pending: bool = False

    @property
    def pending(self) -> bool:
        return self.acks_pending or self.flush_pending


class ReplicatedPartition(Protocol):
    def check_enough_replicas_reached(self, required_offset: int) -> tuple[bool, ErrorCode]: ...

    @property
    def low_watermark(self) -> int: ...


PartitionLookup = Callable[[TopicPartition], ReplicatedPartition | None]


class DelayedProduce(DelayedOperation):
    def __init__(
        self,
        deadline_ms: int,
        statuses: Mapping[TopicPartition, ProducePartitionStatus],
        partition: PartitionLookup,
        respond: Callable[[dict[TopicPartition, ProducePartitionResult]], None],
    ) -> None:
        super().__init__(deadline_ms)
        self.statuses = statuses
        self._partition = partition
        self._respond = respond

    def try_complete(self) -> bool:
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self._partition(tp)
            if partition is None:
                done, error = True, ErrorCode.not_leader_or_follower
            else:
                done, error = partition.check_enough_replicas_reached(status.required_offset)
            if done:
                status.acks_pending = False
                if error is not ErrorCode.none:
                    status.result.fail(error)
        if any(status.pending for status in self.statuses.values()):
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        for status in self.statuses.values():
            if status.pending:
                status.result.fail(ErrorCode.request_timed_out)
                status.acks_pending = status.flush_pending = False

    def on_complete(self) -> None:
        for status in self.statuses.values():
            if status.pending:  # forced: the partition left this broker
                status.result.fail(ErrorCode.not_leader_or_follower)
        self._respond({tp: status.result for tp, status in self.statuses.items()})


@dataclass(slots=True)
class DeleteRecordsPartitionStatus:
    """One partition of a DeleteRecords: the low watermark every replica must reach, and
    the answer."""

    topic_partition: TopicPartition
    required_offset: int
    low_watermark: int = -1
    error: ErrorCode = ErrorCode.none
    pending: bool = True


class DelayedDeleteRecords(DelayedOperation):
    def __init__(
        self,
        deadline_ms: int,
        statuses: list[DeleteRecordsPartitionStatus],
        partition: PartitionLookup,
        respond: Callable[[list[DeleteRecordsPartitionStatus]], None],
    ) -> None:
        """``statuses`` in request order; a partition may appear more than once."""
        super().__init__(deadline_ms)
        self.statuses = statuses
        self._partition = partition
        self._respond = respond

    def try_complete(self) -> bool:
        for status in self.statuses:
            if not status.pending:
                continue
            partition = self._partition(status.topic_partition)
            if partition is None:
                status.pending, status.error = False, ErrorCode.not_leader_or_follower
            elif partition.low_watermark >= status.required_offset:
                status.pending, status.low_watermark = False, partition.low_watermark
        if any(status.pending for status in self.statuses):
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        for status in self.statuses:
            if status.pending:
                status.pending, status.error = False, ErrorCode.request_timed_out

    def on_complete(self) -> None:
        for status in self.statuses:
            if status.pending:  # forced: the partition left this broker
                status.pending, status.error = False, ErrorCode.not_leader_or_follower
        self._respond(self.statuses)
