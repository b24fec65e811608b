"""``ReplicaManager``: the partitions this broker hosts, and the only way to write or read them.

Handlers reach the logs only through here, as in Kafka:

* :meth:`append_records` appends a produce's (or a coordinator's) batches as leader and
  answers through a callback: at once for acks=0 and acks=1, or, for acks=-1, once every
  in-sync replica has the records (the high watermark passed them) — a ``DelayedProduce``
  in the produce purgatory, answered REQUEST_TIMED_OUT at ``timeout_ms``;
* :meth:`fetch_messages` reads for a consumer or a follower and answers at once when there
  are ``min_bytes``, an error or no wait, otherwise from the fetch purgatory
  (``DelayedFetch``) when enough arrives or at ``max_wait_ms``;
* :meth:`delete_records` moves log start offsets, waiting (``DelayedDeleteRecords``) until
  every replica has moved too;
* :meth:`become_leader_or_follower` applies the partition states the metadata store
  publishes: a partition changes role without being rebuilt.

Every time a high watermark moves, the delayed operations watching that partition are
checked. The purgatories are sans-I/O with the clock given here; one timer on the event
loop (``call_later``) expires them at the earliest deadline.

Producers idle for ``producer.id.expiration.ms`` are forgotten every
``producer.id.expiration.check.interval.ms`` (Kafka's scheduled task), checked at the first
append after each interval rather than on a timer: with no appends, nothing is added to
forget.

This class is not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.log import LogConfig, LogError, LogManager, OffsetOutOfRangeError, PartitionLog
from odradek.log.offset_metadata import LogOffsetMetadata
from odradek.log.partition_metadata import read_topic_id, write_topic_id
from odradek.log.validator import AppendOrigin, RecordValidationError
from odradek.metadata.model import INTERNAL_TOPICS, PartitionState
from odradek.log.producer_state import ProducerStateEntry, VerificationGuard
from odradek.protocol.records import RECORD_BATCH_OVERHEAD, RecordBatch, RecordsError
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.delayed_fetch import (
    DelayedFetch,
    FetchParams,
    FetchPartitionError,
    IsolationLevel,
    LogReadResult,
    PartitionFetchInfo,
)
from odradek.replication.delayed_produce import (
    DelayedDeleteRecords,
    DelayedProduce,
    DeleteRecordsPartitionStatus,
    ProducePartitionResult,
    ProducePartitionStatus,
)
from odradek.replication.log_dirs import LogDirDescription, describe_log_dirs
from odradek.replication.partition import OffsetAndEpoch, Partition, PartitionError
from odradek.replication.purgatory import DelayedOperationPurgatory

logger = logging.getLogger(__name__)

# Produce's acks: none, the leader, every in-sync replica.
VALID_ACKS = (0, 1, -1)
CallLater = Callable[[float, Callable[[], None]], asyncio.TimerHandle]
# Writes a proposed ISR for a partition led here, conditionally on the state it knows;
# returns the state written, or None when the state moved on (the change is dropped).
AlterIsr = Callable[[TopicPartition, PartitionState, tuple[int, ...]],
                    Awaitable[PartitionState | None]]
# Asks the transaction coordinator of a transactional id whether each partition is in the
# ongoing transaction of (producer id, epoch) — or, with add=True (transactions v2), adds
# it — and calls back with each partition's error (KIP-890).
VerifyTransaction = Callable[[str, int, int, list[TopicPartition], bool,
                              Callable[[dict[TopicPartition, ErrorCode]], None]], None]

# What a failed verification tells the producer: a coordinator that is moving or busy is
# retriable (Kafka answers NOT_ENOUGH_REPLICAS for these); a fenced producer is told so as
# Produce tells it (KIP-588).
_VERIFICATION_ERRORS = {
    ErrorCode.not_coordinator: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_not_available: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_load_in_progress: ErrorCode.not_enough_replicas,
    ErrorCode.concurrent_transactions: ErrorCode.not_enough_replicas,
    ErrorCode.request_timed_out: ErrorCode.not_enough_replicas,
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
}


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _call_later_on_running_loop(delay_s: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
    return asyncio.get_running_loop().call_later(delay_s, callback)


@dataclass(frozen=True, slots=True)
class RoleChanges:
    """What :meth:`ReplicaManager.become_leader_or_follower` changed here."""

    became_leader: list[TopicPartition] = field(default_factory=list)
    became_follower: list[TopicPartition] = field(default_factory=list)
    removed: list[TopicPartition] = field(default_factory=list)


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        log_manager: LogManager,
        clock: Callable[[], int],
        broker_config: Callable[[str], Any],
        *,
        monotonic_clock: Callable[[], int] = monotonic_ms,
        call_later: CallLater = _call_later_on_running_loop,
        alter_isr: AlterIsr | None = None,
        verify_transaction: VerifyTransaction | None = None,
    ) -> None:
        """``clock`` gives wall-clock milliseconds (timestamps, producer expiration);
        ``monotonic_clock`` the milliseconds delayed operations' deadlines are measured in,
        and ``call_later`` schedules their expiration. ``broker_config`` gives a broker
        config's current value by name (they may change at runtime). ``alter_isr`` writes
        an ISR change this broker proposes as leader (a conditional write on the partition
        state's version); on a single node there is none to make. ``verify_transaction``
        asks a transaction coordinator about a producer's transaction before its first
        write to a partition (KIP-890); without it, such writes are refused."""
        self.node_id = node_id
        self.log_manager = log_manager
        self.clock = clock
        self._monotonic_clock = monotonic_clock
        self._call_later = call_later
        self._broker_config = broker_config
        self._partitions: dict[TopicPartition, Partition] = {}
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = \
            DelayedOperationPurgatory("Produce", monotonic_clock)
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = \
            DelayedOperationPurgatory("Fetch", monotonic_clock)
        self.delete_records_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = \
            DelayedOperationPurgatory("DeleteRecords", monotonic_clock)
        self._purgatories = (self.produce_purgatory, self.fetch_purgatory,
                             self.delete_records_purgatory)
        self._expiration: asyncio.TimerHandle | None = None
        self._expiration_deadline_ms: int | None = None
        self._next_producer_expiration_check_ms = 0
        self._alter_isr = alter_isr
        self.verify_transaction = verify_transaction
        self._isr_writes: set[asyncio.Task] = set()
        # While this broker cannot prove it still leads (its ZooKeeper session is
        # suspended or lost, so another leader may have been elected), acks=-1 is refused.
        self._leaderships_fenced = False

    # -- partitions --------------------------------------------------------------------

    def get_partition(self, topic_partition: TopicPartition) -> Partition | None:
        return self._partitions.get(topic_partition)

    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    def _leader_or_none(self, topic_partition: TopicPartition) -> Partition | None:
        partition = self._partitions.get(topic_partition)
        if partition is None or not partition.is_leader or self._leaderships_fenced:
            return None
        return partition

    def fence_leaderships(self, fenced: bool) -> None:
        """While ``fenced``, no acks=-1 produce is acknowledged: new ones are refused
        (NOT_LEADER_OR_FOLLOWER, nothing written) and waiting ones answered so, because a
        leader that lost its ZooKeeper session may have been replaced without knowing it."""
        self._leaderships_fenced = fenced
        if fenced:
            for tp in list(self._partitions):
                self.produce_purgatory.check_and_complete(tp)

    def become_leader_or_follower(self, topic: str, states: Iterable[PartitionState], *,
                                  log_config: LogConfig, topic_config: dict[str, Any],
                                  topic_id: uuid.UUID | None = None) -> RoleChanges:
        """Applies partition states from the metadata store: this broker leads, follows, or
        no longer hosts each partition. A hosted partition keeps its object and its log
        through a role change; waiting produces and fetches on a partition that stops being
        led here are answered now (NOT_LEADER_OR_FOLLOWER). A log first hosted here that
        belongs to another topic of the same name (``partition.metadata`` names another
        ``topic_id``: the topic was deleted and created again while this broker was away)
        is deleted and started afresh."""
        changes = RoleChanges()
        for state in states:
            tp = TopicPartition(topic, state.partition)
            if self.node_id not in state.replicas:
                if tp in self._partitions:
                    self.stop_replica(tp, delete=True)
                    changes.removed.append(tp)
                continue
            partition = self._partitions.get(tp)
            if partition is None:
                log = self._log_of(tp, log_config, topic_id)
                partition = Partition(tp, log, local_broker_id=self.node_id,
                                      topic_config=topic_config)
                self._partitions[tp] = partition
            if state.leader == self.node_id:
                if partition.make_leader(state, now_ms=self.clock()):
                    changes.became_leader.append(tp)
            elif partition.make_follower(state):
                changes.became_follower.append(tp)
            # Waiting operations see the new role: the ISR may have moved the high
            # watermark, and a partition no longer led here answers NOT_LEADER_OR_FOLLOWER.
            self._complete_delayed_requests(tp)
        return changes

    def _log_of(self, tp: TopicPartition, log_config: LogConfig,
                topic_id: uuid.UUID | None) -> PartitionLog:
        log = self.log_manager.get_or_create(tp.topic, tp.partition, log_config)
        if topic_id is None or log.offline_reason is not None:
            return log
        stored = read_topic_id(log.directory)
        if stored is not None and stored != topic_id:
            logger.warning("%s: the log belongs to an earlier topic of that name (topic id "
                           "%s, not %s): deleting it", tp, stored, topic_id)
            self.log_manager.delete_partition(tp.topic, tp.partition)
            log = self.log_manager.get_or_create(tp.topic, tp.partition, log_config)
        if stored != topic_id:
            try:
                write_topic_id(log.directory, topic_id)
            except OSError as exc:
                logger.error("%s: cannot write its partition.metadata: %s", tp, exc)
        return log

    def update_config(self, topic_partition: TopicPartition, log_config: LogConfig,
                      topic_config: dict[str, Any]) -> None:
        partition = self._partitions.get(topic_partition)
        if partition is not None:
            partition.log.update_config(log_config)
            partition.topic_config = topic_config

    def stop_replica(self, topic_partition: TopicPartition, *, delete: bool) -> None:
        """This broker no longer hosts the partition; its log goes with ``delete``."""
        partition = self._partitions.pop(topic_partition, None)
        if partition is None:
            return
        if delete:
            self.log_manager.delete_partition(topic_partition.topic, topic_partition.partition)
        else:
            partition.log.close()
        self._complete_all_delayed(topic_partition)

    def shutdown(self) -> None:
        """A clean stop: answers every waiting operation with what it has, before the
        LogManager closes the logs."""
        if self._expiration is not None:
            self._expiration.cancel()
            self._expiration = None
        for tp in list(self._partitions):
            self._complete_all_delayed(tp)

    # -- append ------------------------------------------------------------------------

    def append_records(
        self,
        entries: Mapping[TopicPartition, bytes | bytearray],
        *,
        acks: int,
        timeout_ms: int,
        respond: Callable[[dict[TopicPartition, ProducePartitionResult]], None],
        origin: AppendOrigin = AppendOrigin.CLIENT,
        internal_topics_allowed: bool = False,
        produce_version: int | None = None,
        transactional_id: str | None = None,
        add_to_transaction: bool = False,
    ) -> None:
        """Appends each partition's batch as leader and calls ``respond`` with every
        partition's result: at once for acks 0 and 1, once the ISR has the records for
        acks=-1 (or at ``timeout_ms``). A partition that must be fsynced first
        (``flush.messages``) is answered after its flush, whatever the acks.

        A transactional batch that does not continue its producer's transaction in its
        partition is verified first with the transaction coordinator of
        ``transactional_id`` (KIP-890): the append waits for the answer, and a partition
        that is not in the producer's ongoing transaction is answered INVALID_TXN_STATE,
        nothing written. With ``add_to_transaction`` (transactions v2: Produce v12,
        TxnOffsetCommit v5) the coordinator adds the partition instead of checking it."""
        verifiable = (origin is not AppendOrigin.REPLICATION and transactional_id is not None
                      and self.verify_transaction is not None)
        guards = self._guards_to_verify(entries) if verifiable else {}
        if not guards:
            # Without a transactional id nothing can be verified: the log refuses a
            # transactional batch that does not continue a transaction.
            self._append_records(entries, acks=acks, timeout_ms=timeout_ms, respond=respond,
                                 origin=origin, internal_topics_allowed=internal_topics_allowed,
                                 produce_version=produce_version)
            return
        first = RecordBatch(next(iter(guards.values()))[0])
        self.verify_transaction(
            transactional_id, first.producer_id, first.producer_epoch, list(guards),
            add_to_transaction,
            lambda errors: self._append_verified(
                entries, guards, errors, acks=acks, timeout_ms=timeout_ms, respond=respond,
                origin=origin, internal_topics_allowed=internal_topics_allowed,
                produce_version=produce_version))

    def _guards_to_verify(self, entries: Mapping[TopicPartition, bytes | bytearray]
                          ) -> dict[TopicPartition, tuple[bytes | bytearray, VerificationGuard]]:
        """The partitions led here whose (transactional) batch starts a transaction there,
        each with the verification guard its producer state hands out now."""
        guards = {}
        for tp, records in entries.items():
            partition = self._leader_or_none(tp)
            if partition is None or len(records) < RECORD_BATCH_OVERHEAD:
                continue  # the append answers why
            try:
                batch = RecordBatch(records)
            except RecordsError:
                continue
            if not batch.is_transactional or batch.is_control_batch:
                continue
            state = partition.log.producer_state
            if state.ongoing_transaction(batch.producer_id, batch.producer_epoch):
                continue
            if state.duplicate_of(batch) is not None:
                # A retry of a batch the log has, whose transaction may have ended since:
                # the append answers it with the batch's offsets. Any error would tell the
                # producer that nothing was written, and it would send other records under
                # these sequence numbers, which the log would take for this retry again.
                continue
            guards[tp] = (records, state.verification_guard(batch.producer_id))
        return guards

    def _append_verified(self, entries: Mapping[TopicPartition, bytes | bytearray],
                         guards: dict[TopicPartition, tuple[bytes | bytearray,
                                                           VerificationGuard]],
                         errors: dict[TopicPartition, ErrorCode], *,
                         respond: Callable[[dict[TopicPartition, ProducePartitionResult]], None],
                         **kwargs: Any) -> None:
        """Appends what the coordinator verified, with its guards; answers the rest with
        the verification's error, all in one response."""
        refused = {tp: _VERIFICATION_ERRORS.get(error, error) for tp, error in errors.items()
                   if error is not ErrorCode.none and tp in guards}
        for tp in guards.keys() - errors.keys():
            refused[tp] = ErrorCode.invalid_txn_state  # the coordinator did not answer for it
        accepted = {tp: records for tp, records in entries.items() if tp not in refused}

        def merged(results: dict[TopicPartition, ProducePartitionResult]) -> None:
            for tp, error in refused.items():
                result = results[tp] = ProducePartitionResult()
                result.fail(error)
            respond({tp: results[tp] for tp in entries})

        if not accepted:
            merged({})
            return
        self._append_records(accepted, respond=merged,
                             verification_guards={tp: guard for tp, (_, guard) in guards.items()},
                             **kwargs)

    def _append_records(
        self,
        entries: Mapping[TopicPartition, bytes | bytearray],
        *,
        acks: int,
        timeout_ms: int,
        respond: Callable[[dict[TopicPartition, ProducePartitionResult]], None],
        origin: AppendOrigin,
        internal_topics_allowed: bool,
        produce_version: int | None,
        verification_guards: Mapping[TopicPartition, VerificationGuard] | None = None,
    ) -> None:
        now_ms = self.clock()
        if now_ms >= self._next_producer_expiration_check_ms:
            self._remove_expired_producers(now_ms)
        statuses: dict[TopicPartition, ProducePartitionStatus] = {}
        moved: list[TopicPartition] = []
        for tp, records in entries.items():
            status = self._append_to_local_log(
                tp, records, acks=acks, origin=origin, now_ms=now_ms, moved=moved,
                internal_topics_allowed=internal_topics_allowed or origin is not AppendOrigin.CLIENT,
                produce_version=produce_version,
                verification_guard=verification_guards.get(tp) if verification_guards else None)
            statuses[tp] = status
        for tp in moved:
            self._complete_delayed_requests(tp)
        for tp in statuses:
            # Followers' fetches wait for the log end offset to move, not the high
            # watermark: wake them (a consumer's stays asleep, it counts to the HW).
            partition = self._partitions.get(tp)
            if tp not in moved and partition is not None and len(partition.replicas) > 1:
                self.fetch_purgatory.check_and_complete(tp)
        if not any(status.pending for status in statuses.values()):
            # acks 0 and 1, and acks=-1 refused or (on one node) already replicated: the
            # common path answers without a delayed operation.
            respond({tp: status.result for tp, status in statuses.items()})
            return
        for tp, status in statuses.items():
            if status.flush_pending:
                self._flush(tp, status)
        operation = DelayedProduce(self._monotonic_clock() + timeout_ms, statuses,
                                   self._leader_or_none, respond)
        if not self.produce_purgatory.try_complete_else_watch(operation, list(statuses)):
            self._schedule_expiration()

    def _append_to_local_log(self, tp: TopicPartition, records: bytes | bytearray, *,
                             acks: int, origin: AppendOrigin, now_ms: int,
                             moved: list[TopicPartition], internal_topics_allowed: bool,
                             produce_version: int | None,
                             verification_guard: VerificationGuard | None
                             ) -> ProducePartitionStatus:
        result = ProducePartitionResult()
        status = ProducePartitionStatus(-1, result, acks_pending=False)
        if acks not in VALID_ACKS:
            result.fail(ErrorCode.invalid_required_acks)
            return status
        if tp.topic in INTERNAL_TOPICS and not internal_topics_allowed:
            result.fail(ErrorCode.invalid_topic_exception,
                        f"Cannot append to internal topic {tp.topic}")
            return status
        partition = self._partitions.get(tp)
        if partition is None:
            result.fail(ErrorCode.unknown_topic_or_partition)
            return status
        if acks == -1 and self._leaderships_fenced:
            result.fail(ErrorCode.not_leader_or_follower,
                        "this broker's ZooKeeper session is not valid: leadership unproven")
            return status
        try:
            info, high_watermark_moved = partition.append_records_to_leader(
                records if isinstance(records, bytearray) else bytearray(records),
                origin=origin, required_acks=acks, now_ms=now_ms,
                produce_version=produce_version, verification_guard=verification_guard)
        except RecordValidationError as exc:
            result.fail(exc.error_code, exc.error_message)
            result.record_errors = tuple((e.batch_index, e.batch_index_error_message)
                                         for e in exc.record_errors)
            return status
        except (PartitionError, RecordsError, LogError) as exc:
            result.fail(exc.error_code, str(exc))
            return status
        except OSError as exc:
            logger.error("append to %s failed: %s", tp, exc)
            result.fail(ErrorCode.kafka_storage_error, str(exc))
            return status
        if high_watermark_moved:
            moved.append(tp)
        result.base_offset = info.first_offset
        result.log_append_time = info.log_append_time
        result.log_start_offset = info.log_start_offset
        status.required_offset = info.last_offset + 1
        status.flush_pending = info.needs_flush and acks != 0
        if acks == -1:
            # Already replicated when the high watermark passed the records (one node).
            status.acks_pending = partition.high_watermark < status.required_offset
        return status

    def _flush(self, tp: TopicPartition, status: ProducePartitionStatus) -> None:
        """flush.messages was reached: the answer waits for the fsync, which runs on a
        thread so that the event loop keeps serving everyone else."""
        partition = self._partitions[tp]

        def flushed(future: asyncio.Future[None]) -> None:
            status.flush_pending = False
            error = future.exception()
            if error is not None:  # KafkaStorageError: the log dir is now offline
                logger.error("flush of %s failed: %s", tp, error)
                status.result.fail(ErrorCode.kafka_storage_error, str(error))
            self.produce_purgatory.check_and_complete(tp)

        asyncio.get_running_loop().run_in_executor(
            None, partition.log.flush_to, status.required_offset).add_done_callback(flushed)

    def _remove_expired_producers(self, now_ms: int) -> None:
        expiration_ms = self._broker_config("producer.id.expiration.ms")
        for partition in self._partitions.values():
            if partition.log.loaded:  # a deferred log forgets them as it loads
                partition.log.producer_state.remove_expired_producers(now_ms, expiration_ms)
        self._next_producer_expiration_check_ms = (
            now_ms + self._broker_config("producer.id.expiration.check.interval.ms")
        )

    # -- fetch -------------------------------------------------------------------------

    def fetch_messages(self, params: FetchParams,
                       respond: Callable[[dict[TopicPartition, LogReadResult]], None]) -> None:
        """Reads every partition of a fetch and calls ``respond`` with the results: at once
        when there is an error, no wait, or ``min_bytes`` of data, otherwise when enough
        arrives (for a consumer, below the high watermark) or at ``max_wait_ms``. A
        follower's fetch also tells the leader how far the follower got."""
        results = self.read_from_local_log(params)
        if params.is_from_follower:
            self._update_follower_fetch_state(params, results)
        total_bytes = sum(result.size for result in results.values())
        if (params.max_wait_ms <= 0 or not params.partitions or total_bytes >= params.min_bytes
                or any(result.error is not ErrorCode.none for result in results.values())):
            respond(results)
            return
        try:
            fetch_offsets = {tp: self._partitions[tp].log.offset_metadata(info.fetch_offset)
                             for tp, info in params.partitions.items()}
        except LogError:  # a log dir failed since the read: answer with what was read
            respond(results)
            return
        operation = DelayedFetch(
            self._monotonic_clock() + params.max_wait_ms, params, fetch_offsets,
            self._fetch_end_offset, self.read_from_local_log, respond)
        # The read above found less than min_bytes: there is nothing to try before waiting.
        self.fetch_purgatory.watch(operation, list(params.partitions))
        self._schedule_expiration()

    def read_from_local_log(self, params: FetchParams) -> dict[TopicPartition, LogReadResult]:
        """Reads each partition within ``max_bytes`` for the whole fetch; the first
        partition with data returns at least one whole batch, however large, so a consumer
        never stalls behind a batch bigger than its limits (KIP-74)."""
        remaining = params.max_bytes
        first = True
        results = {}
        for tp, info in params.partitions.items():
            result = self._read_partition(tp, info, params, max(0, min(info.partition_max_bytes,
                                                                        remaining)), first)
            if result.size:
                first = False
                remaining -= result.size
            results[tp] = result
        return results

    def _read_partition(self, tp: TopicPartition, info: PartitionFetchInfo, params: FetchParams,
                        max_bytes: int, min_one_batch: bool) -> LogReadResult:
        partition = self._partitions.get(tp)
        if partition is None:
            return LogReadResult(ErrorCode.unknown_topic_or_partition)
        try:
            data = partition.read_records(
                info.fetch_offset, max_bytes, isolation_level=params.isolation_level,
                from_follower=params.is_from_follower,
                current_leader_epoch=info.current_leader_epoch, min_one_batch=min_one_batch,
                zero_copy=params.zero_copy)
        except PartitionError as exc:
            return LogReadResult(exc.error_code)
        except OffsetOutOfRangeError:
            return self._offsets_result(partition, ErrorCode.offset_out_of_range)
        except LogError as exc:  # KAFKA_STORAGE_ERROR: the partition's log dir failed
            return LogReadResult(exc.error_code)
        aborted = None
        if params.isolation_level is IsolationLevel.READ_COMMITTED and not params.is_from_follower:
            aborted = partition.aborted_transactions(info.fetch_offset, data.records)
        return LogReadResult(ErrorCode.none, data.records, data.high_watermark,
                             partition.last_stable_offset, data.log_start_offset,
                             data.log_end_offset, aborted)

    @staticmethod
    def _offsets_result(partition: Partition, error: ErrorCode) -> LogReadResult:
        return LogReadResult(error, b"", partition.high_watermark, partition.last_stable_offset,
                             partition.log_start_offset, partition.log_end_offset)

    def _fetch_end_offset(self, tp: TopicPartition, info: PartitionFetchInfo,
                          params: FetchParams) -> LogOffsetMetadata:
        partition = self._partitions.get(tp)
        if partition is None:
            raise FetchPartitionError(f"{tp} is not hosted here any more")
        try:
            return partition.fetch_end_offset(
                info.current_leader_epoch, isolation_level=params.isolation_level,
                from_follower=params.is_from_follower)
        except (PartitionError, LogError) as exc:
            raise FetchPartitionError(str(exc)) from exc

    def _update_follower_fetch_state(self, params: FetchParams,
                                     results: dict[TopicPartition, LogReadResult]) -> None:
        for tp, info in params.partitions.items():
            partition = self._partitions.get(tp)
            if partition is None or results[tp].error is not ErrorCode.none:
                continue
            try:
                moved = partition.update_follower_fetch_state(
                    params.replica_id, info.fetch_offset, info.log_start_offset,
                    now_ms=self.clock())
            except PartitionError as exc:
                results[tp] = LogReadResult(exc.error_code)
                continue
            if partition.can_join_isr(params.replica_id):
                self._propose_isr(partition, partition.isr + (params.replica_id,))
            if moved:
                self._complete_delayed_requests(tp)
            else:
                self.delete_records_purgatory.check_and_complete(tp)

    def last_offset_for_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int,
                                     leader_epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch for one partition led here: (epoch, end offset). Raises
        ``PartitionError`` with the code to answer."""
        partition = self._partitions.get(tp)
        if partition is None:
            raise PartitionError(ErrorCode.unknown_topic_or_partition)
        try:
            return partition.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch)
        except LogError as exc:  # KAFKA_STORAGE_ERROR: the partition's log dir failed
            raise PartitionError(exc.error_code, str(exc)) from exc

    # -- the ISR -----------------------------------------------------------------------

    def maybe_shrink_isr(self) -> None:
        """Followers that have not caught up within ``replica.lag.time.max.ms`` leave the
        ISR of each partition led here (Kafka's ``isr-expiration`` task)."""
        now_ms = self.clock()
        max_lag_ms = self._broker_config("replica.lag.time.max.ms")
        for partition in self._partitions.values():
            out_of_sync = partition.out_of_sync_replicas(now_ms, max_lag_ms)
            if out_of_sync:
                logger.info("%s: shrinking ISR from %s: %s not caught up in %d ms",
                            partition.topic_partition, list(partition.isr), list(out_of_sync),
                            max_lag_ms)
                self._propose_isr(partition, tuple(r for r in partition.isr
                                                   if r not in out_of_sync))

    def _propose_isr(self, partition: Partition, isr: tuple[int, ...]) -> None:
        """Writes an ISR change through ``alter_isr``; until it is written the partition
        counts the replicas of both ISRs (``Partition.maximal_isr``)."""
        if self._alter_isr is None or partition.pending_isr is not None:
            return
        partition.pending_isr = isr
        task = asyncio.get_running_loop().create_task(self._write_isr(partition, isr))
        self._isr_writes.add(task)
        task.add_done_callback(self._isr_writes.discard)

    async def _write_isr(self, partition: Partition, isr: tuple[int, ...]) -> None:
        tp = partition.topic_partition
        try:
            written = await self._alter_isr(tp, partition.state, isr)
        except Exception:
            logger.exception("%s: writing ISR %s failed", tp, list(isr))
            written = None
        if self._partitions.get(tp) is not partition:
            return
        if written is None or not partition.apply_isr(written):
            partition.pending_isr = None
        else:
            logger.info("%s: ISR is now %s", tp, list(written.isr))
        if partition.maybe_increment_leader_high_watermark():
            self._complete_delayed_requests(tp)
        else:
            # A smaller ISR may answer waiting acks=-1 produces (NOT_ENOUGH_REPLICAS...).
            self.produce_purgatory.check_and_complete(tp)

    # -- ListOffsets and DeleteRecords -------------------------------------------------

    def fetch_offset_for_timestamp(self, tp: TopicPartition, timestamp: int, *,
                                   isolation_level: IsolationLevel, from_follower: bool,
                                   current_leader_epoch: int = -1) -> OffsetAndEpoch | None:
        """ListOffsets for one partition led here; raises ``PartitionError`` (and the
        log's typed errors) with the code to answer."""
        partition = self._partitions.get(tp)
        if partition is None:
            raise PartitionError(ErrorCode.unknown_topic_or_partition)
        try:
            return partition.fetch_offset_for_timestamp(
                timestamp, isolation_level=isolation_level, from_follower=from_follower,
                current_leader_epoch=current_leader_epoch)
        except LogError as exc:  # KAFKA_STORAGE_ERROR: the partition's log dir failed
            raise PartitionError(exc.error_code, str(exc)) from exc

    def delete_records(self, offsets: Sequence[tuple[TopicPartition, int]], *, timeout_ms: int,
                       respond: Callable[[list[DeleteRecordsPartitionStatus]], None]) -> None:
        """DeleteRecords (KIP-107) on partitions led here, in request order (a partition
        named twice is answered twice): each log start offset moves now, and the answer
        waits until every replica's has (the low watermark)."""
        statuses = []
        for tp, offset in offsets:
            status = DeleteRecordsPartitionStatus(tp, required_offset=-1)
            statuses.append(status)
            partition = self._partitions.get(tp)
            try:
                if partition is None:
                    raise PartitionError(ErrorCode.not_leader_or_follower)
                status.required_offset = partition.delete_records_on_leader(offset)
            except OffsetOutOfRangeError:
                status.pending, status.error = False, ErrorCode.offset_out_of_range
            except (PartitionError, LogError) as exc:
                status.pending, status.error = False, exc.error_code
        operation = DelayedDeleteRecords(self._monotonic_clock() + timeout_ms, statuses,
                                         self._leader_or_none, respond)
        keys = list(dict.fromkeys(status.topic_partition for status in statuses))
        if not self.delete_records_purgatory.try_complete_else_watch(operation, keys):
            self._schedule_expiration()

    # -- DescribeProducers ------------------------------------------------------------

    def active_producers(self, tp: TopicPartition) -> list[ProducerStateEntry]:
        """DescribeProducers: the producers a partition led here knows (Kafka's
        ``activeProducers``); raises ``PartitionError`` with the code to answer."""
        partition = self._partitions.get(tp)
        if partition is None:
            raise PartitionError(ErrorCode.unknown_topic_or_partition)
        if not partition.is_leader:
            raise PartitionError(ErrorCode.not_leader_or_follower)
        try:
            partition.log.check_online()
        except LogError as exc:
            raise PartitionError(exc.error_code, str(exc)) from exc
        return partition.log.producer_state.entries()

    # -- DescribeLogDirs ---------------------------------------------------------------

    def describe_log_dirs(self, wanted: set[TopicPartition] | None) -> list[LogDirDescription]:
        """Each log dir with its partitions' sizes (``wanted`` None: all of them)."""
        return describe_log_dirs(self.log_manager, wanted)

    # -- delayed operations ------------------------------------------------------------

    def _complete_delayed_requests(self, tp: TopicPartition) -> None:
        """The high watermark (or a replica's position) of ``tp`` moved: waiting produces,
        fetches and DeleteRecords may complete (Kafka's ``tryCompleteDelayedRequests``)."""
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)

    def _complete_all_delayed(self, tp: TopicPartition) -> None:
        for purgatory in self._purgatories:
            purgatory.complete_all(tp)

    def _schedule_expiration(self) -> None:
        """One timer for the earliest deadline of all purgatories."""
        deadlines = [d for p in self._purgatories if (d := p.next_deadline_ms()) is not None]
        if not deadlines:
            return
        deadline_ms = min(deadlines)
        if self._expiration is not None:
            if self._expiration_deadline_ms <= deadline_ms:
                return
            self._expiration.cancel()
        self._expiration_deadline_ms = deadline_ms
        delay_s = max(0, deadline_ms - self._monotonic_clock()) / 1000
        self._expiration = self._call_later(delay_s, self.expire_delayed_operations)

    def expire_delayed_operations(self) -> None:
        """Completes what is past its deadline, then waits for the next one."""
        self._expiration = self._expiration_deadline_ms = None
        for purgatory in self._purgatories:
            purgatory.expire_due()
        self._schedule_expiration()
