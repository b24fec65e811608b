"""``Partition``: one topic-partition as this broker sees it (seeds: leaders, followers, ISR).

A partition owns its log (:class:`~odradek.log.PartitionLog`, with the producer state and
the leader-epoch cache inside) and the replication state around it, as Kafka's class of the
same name: its role, the leader and leader epoch, the replicas and the in-sync replicas,
the high watermark, and what the leader knows of each follower (its log end offset and log
start offset, from its fetches). Every per-partition operation goes through here: appends
as leader (validated in :mod:`odradek.log.validator`) and as follower, reads with an
isolation level, offsets by timestamp, DeleteRecords.

Offsets, in Kafka's words::

    log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset

The high watermark is the smallest log end offset among the in-sync replicas: every
in-sync replica holds every record below it, so a consumer never reads past it and an
acks=-1 produce is answered once it passes the produce's records. On a single node the
ISR is this broker alone, so it follows the log end offset after every append. The last
stable offset stops before the first transaction that is ongoing, or whose marker is not
yet below the high watermark; read_committed consumers read up to it.

The role comes from the partition state the metadata store publishes
(:meth:`make_leader`, :meth:`make_follower`); changing role keeps the same object and log.

This class is not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.log import FetchDataInfo, LogAppendInfo, PartitionLog
from odradek.log.file_region import FileRegion
from odradek.log.producer_state import VerificationGuard
from odradek.log.validator import AppendOrigin, analyze_and_validate, validate_for_leader
from odradek.metadata.model import PartitionState
from odradek.protocol.records import iter_batches
from odradek.protocol.topic_partition import TopicPartition
from odradek.log.offset_metadata import LogOffsetMetadata
from odradek.replication.delayed_fetch import IsolationLevel

# ListOffsets' special timestamps (KIP-79, KIP-734).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
# DeleteRecords' offset for "up to the high watermark" (DeleteRecordsRequest.HIGH_WATERMARK).
HIGH_WATERMARK = -1
# What the leader knows of a follower that has not fetched yet.
UNKNOWN_OFFSET = -1
NO_LEADER = -1


class PartitionError(Exception):
    """A request cannot be served by this partition here; ``error_code`` says why."""

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


@dataclass(slots=True)
class RemoteReplica:
    """What the leader knows of one follower, from its fetches."""

    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    # When the follower last held everything the leader had (Kafka's lastCaughtUpTimeMs):
    # a fetch from at least the leader's log end offset of the fetch before it.
    last_caught_up_ms: int = 0
    # The leader's log end offset and the time at the follower's previous fetch.
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    """ListOffsets' answer: an offset, its record's timestamp (or -1), its leader epoch."""

    offset: int
    timestamp: int = -1
    leader_epoch: int = -1


class Partition:
    def __init__(self, topic_partition: TopicPartition, log: PartitionLog, *,
                 local_broker_id: int, topic_config: dict[str, Any]) -> None:
        self.topic_partition = topic_partition
        self.log = log
        self.local_broker_id = local_broker_id
        # The effective topic-level configs (max.message.bytes, cleanup.policy, ...), parsed.
        self.topic_config = topic_config
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        # An ISR change proposed and not yet written (Kafka's pendingIsr): while it is out,
        # the high watermark counts the replicas of both, and no other change is proposed.
        self.pending_isr: tuple[int, ...] | None = None
        self._leader_epoch_start_offset = 0
        self._remote_replicas: dict[int, RemoteReplica] = {}

    # -- role --------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    def make_leader(self, state: PartitionState, now_ms: int = 0) -> bool:
        """Applies a state naming this broker leader; True if it was not leader at that
        epoch before (Kafka's ``makeLeader``). A new epoch starts in the leader-epoch cache
        at the log end offset, and the followers' positions are forgotten until they fetch
        again; the high watermark may move at once (with the ISR this broker alone, to
        the log end offset)."""
        became = not self.is_leader or state.leader_epoch != self.leader_epoch
        self._apply(state)
        if became:
            self.log.assign_epoch_start_offset(state.leader_epoch, self.log.log_end_offset)
            self._leader_epoch_start_offset = self.log.log_end_offset
            # Followers count as caught up now: each has replica.lag.time.max.ms to fetch
            # before it leaves the ISR.
            self._remote_replicas = {
                replica: RemoteReplica(last_caught_up_ms=now_ms, last_fetch_ms=now_ms)
                for replica in state.replicas if replica != self.local_broker_id
            }
        else:
            # The replica set may have changed (a reassignment): new followers are counted
            # from now, removed ones forgotten.
            self._remote_replicas = {
                replica: self._remote_replicas.get(replica) or RemoteReplica(
                    last_caught_up_ms=now_ms, last_fetch_ms=now_ms)
                for replica in state.replicas if replica != self.local_broker_id}
        self.maybe_increment_leader_high_watermark()
        return became

    def make_follower(self, state: PartitionState) -> bool:
        """Applies a state naming another broker leader (or none); True if this broker led
        the partition or followed another leader epoch before (Kafka's ``makeFollower``)."""
        became = self.is_leader or state.leader_epoch != self.leader_epoch
        self._apply(state)
        self._remote_replicas = {}
        return became

    def _apply(self, state: PartitionState) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.replicas = state.replicas
        self.isr = state.isr
        self.pending_isr = None

    @property
    def state(self) -> PartitionState:
        return PartitionState(self.topic_partition.partition, self.leader_id, self.leader_epoch,
                              self.replicas, self.isr, self.partition_epoch)

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320: a client that knows an older epoch is fenced; a newer one, unknown to us."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.none
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    def _check_leader(self, current_leader_epoch: int = -1, *, leader_only: bool = True) -> None:
        error = self.check_leader_epoch(current_leader_epoch)
        if error is not ErrorCode.none:
            raise PartitionError(error)
        if leader_only and not self.is_leader:
            raise PartitionError(ErrorCode.not_leader_or_follower)

    # -- offsets -----------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The first offset of a transaction not decided for good, or the high watermark
        (see :attr:`PartitionLog.last_stable_offset`)."""
        return self.log.last_stable_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def low_watermark(self) -> int:
        """The smallest log start offset among the replicas (DeleteRecords' answer)."""
        starts = [self.log.log_start_offset] + [
            r.log_start_offset for r in self._remote_replicas.values()
        ]
        return min(starts)

    def maybe_increment_leader_high_watermark(self) -> bool:
        """Moves the high watermark up to the smallest log end offset in the ISR (Kafka's
        ``maybeIncrementLeaderHW``); True if it moved. A follower not yet heard from holds
        it back."""
        if not self.is_leader:
            return False
        new_high_watermark = self.log.log_end_offset
        for replica in self.maximal_isr:
            follower = self._remote_replicas.get(replica)
            if follower is not None and follower.log_end_offset < new_high_watermark:
                new_high_watermark = follower.log_end_offset
        if new_high_watermark <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(new_high_watermark)
        return True

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR, with the replicas a pending change adds (Kafka's maximal ISR): the high
        watermark waits for a replica as soon as it is proposed, before the change is
        written, and for a removed one until it is."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    # -- the ISR -----------------------------------------------------------------------

    def can_join_isr(self, replica_id: int) -> bool:
        """A follower outside the ISR that has caught up to the high watermark, and to the
        start of this leader's epoch, may join it (Kafka's ``isFollowerInSync``)."""
        follower = self._remote_replicas.get(replica_id)
        if (not self.is_leader or follower is None or self.pending_isr is not None
                or replica_id in self.isr):
            return False
        return follower.log_end_offset >= max(self.log.high_watermark,
                                              self._leader_epoch_start_offset)

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> tuple[int, ...]:
        """Followers in the ISR that have not caught up within ``max_lag_ms``
        (``replica.lag.time.max.ms``): they leave it (Kafka's ``getOutOfSyncReplicas``)."""
        if not self.is_leader or self.pending_isr is not None:
            return ()
        # A member that is no replica any more (a reassignment removed it) is out too.
        return tuple(replica for replica in self.isr if replica != self.local_broker_id
                     and ((follower := self._remote_replicas.get(replica)) is None
                          or now_ms - follower.last_caught_up_ms > max_lag_ms))

    def apply_isr(self, state: PartitionState) -> bool:
        """The ISR change this leader proposed was written as ``state``; False if the
        partition moved on meanwhile (another epoch), and the change does not apply."""
        self.pending_isr = None
        if state.leader_epoch != self.leader_epoch or not self.is_leader:
            return False
        self.isr = state.isr
        self.partition_epoch = state.partition_epoch
        return True

    def check_enough_replicas_reached(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """Whether an acks=-1 produce whose records end before ``required_offset`` can be
        answered, and with what (Kafka's ``checkEnoughReplicasReachOffset``)."""
        if not self.is_leader:
            return True, ErrorCode.not_leader_or_follower
        if self.log.high_watermark < required_offset:
            return False, ErrorCode.none
        if len(self.isr) < self.topic_config["min.insync.replicas"]:
            return True, ErrorCode.not_enough_replicas_after_append
        return True, ErrorCode.none

    # -- append ------------------------------------------------------------------------

    def append_records_to_leader(self, records: bytearray, *, origin: AppendOrigin,
                                 required_acks: int, now_ms: int,
                                 produce_version: int | None = None,
                                 verification_guard: VerificationGuard | None = None
                                 ) -> tuple[LogAppendInfo, bool]:
        """Validates and appends one batch as leader; returns what the append did and
        whether the high watermark moved.

        Raises ``PartitionError`` when not the leader or, for acks=-1, when the ISR is
        smaller than ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS: nothing is written);
        the validator's and the log's typed errors otherwise.
        """
        self._check_leader()
        if required_acks == -1 and len(self.isr) < self.topic_config["min.insync.replicas"]:
            raise PartitionError(
                ErrorCode.not_enough_replicas,
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {self.topic_config['min.insync.replicas']} for "
                f"partition {self.topic_partition}")
        batch = analyze_and_validate(records, origin=origin,
                                     max_message_bytes=self.topic_config["max.message.bytes"])
        validate_for_leader(batch, self.topic_config, topic_partition=self.topic_partition,
                            origin=origin, now_ms=now_ms, produce_version=produce_version)
        info = self.log.append_as_leader(records, leader_epoch=self.leader_epoch, now_ms=now_ms,
                                         batches=[batch], verification_guard=verification_guard)
        return info, self.maybe_increment_leader_high_watermark()

    def append_records_to_follower(self, records: bytearray, *, now_ms: int) -> LogAppendInfo:
        """Appends what the leader sent, at the offsets it carries (a follower's fetch);
        the log checks each batch's CRC and that the offsets continue its own."""
        if self.is_leader:
            raise PartitionError(ErrorCode.not_leader_or_follower)
        return self.log.append_as_follower(records, now_ms=now_ms)

    def update_follower_high_watermark(self, leader_high_watermark: int,
                                       leader_log_start_offset: int) -> None:
        """A follower takes the leader's high watermark, bounded by its own log end, and
        moves its log start offset up with the leader's (DeleteRecords, retention)."""
        if self.is_leader:
            raise PartitionError(ErrorCode.not_leader_or_follower)
        log = self.log
        high_watermark = min(leader_high_watermark, log.log_end_offset)
        if high_watermark > log.high_watermark:
            log.update_high_watermark(high_watermark)
        start = min(leader_log_start_offset, log.high_watermark)
        if start > log.log_start_offset:
            log.delete_records_before(start)

    # -- read --------------------------------------------------------------------------

    def read_records(self, fetch_offset: int, max_bytes: int, *,
                     isolation_level: IsolationLevel, from_follower: bool,
                     current_leader_epoch: int = -1, min_one_batch: bool,
                     zero_copy: bool = False) -> FetchDataInfo:
        """Whole batches from ``fetch_offset``, up to the bound the reader may see: the log
        end offset for a follower, the last stable offset for read_committed, the high
        watermark otherwise; a large read as a ``FileRegion`` with ``zero_copy``. Raises
        ``PartitionError`` when not the leader or fenced, and ``OffsetOutOfRangeError``
        outside [log_start_offset, log_end_offset]."""
        self._check_leader(current_leader_epoch)
        return self.log.read(fetch_offset, max_bytes,
                             max_offset=self._upper_bound(isolation_level, from_follower),
                             min_one_batch=min_one_batch, zero_copy=zero_copy)

    def aborted_transactions(self, fetch_offset: int, records: bytes | FileRegion
                             ) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping ``records``,
        read from ``fetch_offset``: what a read_committed consumer needs to drop them."""
        if not records:  # a reader that has caught up: nothing to drop
            return []
        if isinstance(records, FileRegion):
            next_offset = records.next_offset
        else:
            last = None
            for batch in iter_batches(records):
                last = batch
            if last is None:
                return []
            next_offset = last.next_offset
        return [(txn.producer_id, txn.first_offset) for txn in
                self.log.collect_aborted_transactions(fetch_offset, next_offset)]

    def _upper_bound(self, isolation_level: IsolationLevel, from_follower: bool) -> int:
        if from_follower:
            return self.log.log_end_offset
        if isolation_level is IsolationLevel.READ_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark

    def fetch_end_offset(self, current_leader_epoch: int, *, isolation_level: IsolationLevel,
                         from_follower: bool) -> LogOffsetMetadata:
        """Where the end a fetcher may read up to sits on disk (see ``read_records``), for
        a delayed fetch to count the bytes it could read. Raises ``PartitionError`` when
        the fetch must answer now (not the leader any more, or fenced)."""
        self._check_leader(current_leader_epoch)
        end = self.log.log_end_offset_metadata
        bound = self._upper_bound(isolation_level, from_follower)
        return end if bound == end.message_offset else self.log.offset_metadata(bound)

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int,
                                    log_start_offset: int, now_ms: int = 0) -> bool:
        """A follower fetched from ``fetch_offset``: it holds everything below it. It is
        caught up when that reaches the log end offset now, or the one of its previous
        fetch. Returns whether the high watermark moved (Kafka's
        ``updateFollowerFetchState``)."""
        replica = self._remote_replicas.get(replica_id)
        if replica is None:
            raise PartitionError(ErrorCode.not_leader_or_follower,
                                 f"{replica_id} is not a replica of {self.topic_partition}")
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            replica.last_caught_up_ms = max(replica.last_caught_up_ms, now_ms)
        elif fetch_offset >= replica.last_fetch_leader_log_end_offset:
            replica.last_caught_up_ms = max(replica.last_caught_up_ms, replica.last_fetch_ms)
        replica.last_fetch_leader_log_end_offset = leader_end
        replica.last_fetch_ms = now_ms
        replica.log_end_offset = fetch_offset
        replica.log_start_offset = log_start_offset
        return self.maybe_increment_leader_high_watermark()

    # -- ListOffsets and DeleteRecords -------------------------------------------------

    def fetch_offset_for_timestamp(self, timestamp: int, *, isolation_level: IsolationLevel,
                                   from_follower: bool, current_leader_epoch: int = -1
                                   ) -> OffsetAndEpoch | None:
        """ListOffsets (KIP-79, KIP-734), against the bound the caller may see: None when
        no record at or after ``timestamp`` lies below it."""
        self._check_leader(current_leader_epoch)
        self.log.check_online()  # the offsets in memory of an offline log are no answer
        bound = self._upper_bound(isolation_level, from_follower)
        if timestamp == LATEST_TIMESTAMP:
            return OffsetAndEpoch(bound, -1, self.leader_epoch)
        if timestamp == EARLIEST_TIMESTAMP:
            return OffsetAndEpoch(self.log.log_start_offset, -1, self._epoch_of(
                self.log.log_start_offset))
        found = (self.log.max_timestamp_and_offset() if timestamp == MAX_TIMESTAMP
                 else self.log.offset_for_timestamp(timestamp))
        if found is None or found.offset >= bound:
            return None
        return OffsetAndEpoch(found.offset, found.timestamp, self._epoch_of(found.offset))

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int
                                     ) -> tuple[int, int]:
        """OffsetsForLeaderEpoch (KIP-101, KIP-279): the largest epoch at or below
        ``leader_epoch`` this leader knows, and the offset where it ends in this log (the
        log end offset for the current epoch). A follower truncates its log there."""
        self._check_leader(current_leader_epoch)
        self.log.check_online()
        return self.log.leader_epoch_cache.end_offset_for(leader_epoch,
                                                          self.log.log_end_offset)

    def _epoch_of(self, offset: int) -> int:
        return self.log.leader_epoch_cache.epoch_for_offset(offset)

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: moves the log start offset up to ``offset`` (-1: the high
        watermark); returns the new log start offset."""
        self._check_leader()
        if "delete" not in self.topic_config["cleanup.policy"]:
            raise PartitionError(ErrorCode.policy_violation)
        return self.log.delete_records_before(
            self.high_watermark if offset == HIGH_WATERMARK else offset)

    def __repr__(self) -> str:
        return (f"Partition({self.topic_partition}, leader={self.leader_id}, "
                f"leader_epoch={self.leader_epoch}, isr={self.isr}, "
                f"high_watermark={self.high_watermark})")
