"""``PartitionLog``: the log of one partition (Kafka's ``UnifiedLog``).

Its segments and their files are the :class:`~odradek.log.local_log.LocalLog` it extends.
Next to them, the partition directory holds the producer state snapshots (``*.snapshot``,
see :mod:`odradek.log.producer_state`) and ``leader-epoch-checkpoint`` (see
:mod:`odradek.log.leader_epoch`). The log owns what must change together with the records:
assigning offsets, the log start offset and high watermark, the producer state, the leader
epochs, truncation, DeleteRecords, retention and recovery at open.

Offsets, in Kafka's words::

    log_start_offset <= high_watermark <= log_end_offset
    |  first readable  |  first not yet   |  next offset to assign
       offset             replicated

The replication layer moves ``high_watermark`` with :meth:`PartitionLog.update_high_watermark`
(on a single node the broker raises it to ``log_end_offset`` after each append); it opens
at its checkpointed value (``replication-offset-checkpoint``, kept by the ``LogManager``),
and truncation lowers it. Reads stop before it when the caller passes it as ``max_offset``.

Two appends (see :mod:`odradek.log.append`): :meth:`PartitionLog.append_as_leader` checks
idempotent producers' batches (a retry is answered with its original offsets, not written
again) and stamps offsets and the leader epoch; :meth:`PartitionLog.append_as_follower`
writes batches with the offsets and epochs the leader gave them. Both record each batch's
epoch in the leader epoch cache and each producer's batch in the producer state; each roll
snapshots the producer state. For example, truncating a log holding offsets 0..120 to 100
cuts the segments, their indexes and transaction indexes, drops the epochs starting at or
after 100, deletes the producer state snapshots above 100 and rebuilds the state from the
newest one left and the records after it. An append reports ``needs_flush`` at
``flush.messages`` unflushed messages, for the produce path to await ``flush_to``.

This class is not thread-safe: the broker's event loop owns it, except ``flush_to``.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from pathlib import Path

from odradek.protocol.control_records import read_end_txn_marker
from odradek.protocol.records import NO_TIMESTAMP, RecordBatch

from odradek.log.append import (
    LogAppendInfo,
    append_info,
    assign_offsets,
    check_replicated_offsets,
    duplicate_append_info,
    whole_batches,
)
from odradek.log.config import LogConfig
from odradek.log.context import LogContext, StandaloneLogContext, on_disk
from odradek.log.errors import OffsetOutOfRangeError
from odradek.log.file_region import FileRegion
from odradek.log.leader_epoch import LeaderEpochFileCache
from odradek.log.loader import load_segments
from odradek.log.offset_metadata import LogOffsetMetadata
from odradek.log.local_log import UNKNOWN_OFFSET, LocalLog
from odradek.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerStateManager,
    TxnMetadata,
    VerificationGuard,
    batches_from,
)
from odradek.log.transaction_index import AbortedTxn
from odradek.log.segment import LogSegment, OffsetAndTimestamp

logger = logging.getLogger(__name__)


# Not frozen, like the other values built for every request: a frozen dataclass's
# __init__ costs four times as much (one object.__setattr__ per field). Nothing
# changes one once built.
@dataclass(slots=True)
class FetchDataInfo:
    """The answer to a read: whole batches, the first of which may start before
    ``fetch_offset`` (clients skip the records before it, as with Kafka)."""

    records: bytes | FileRegion  # a FileRegion only when read with zero_copy
    fetch_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


@dataclass(slots=True)
class _DeferredLoad:
    """What a log opened with :meth:`PartitionLog.deferred` needs to load itself later."""

    log_end_offset: int  # from the checkpoints, until the segments say
    clock: Callable[[], int]
    producer_id_expiration_ms: Callable[[], int]
    # (epoch, start offset) given to assign_epoch_start_offset meanwhile, oldest first.
    epoch_starts: list[tuple[int, int]] = field(default_factory=list)


# The attributes a deferred log lacks until it loads: reading one loads it.
_LOADED_ON_FIRST_USE = frozenset({"_segments", "_base_offsets", "_unsynced_indexes",
                                  "producer_state", "leader_epoch_cache"})


class PartitionLog(LocalLog):
    """One partition's log. Open it with :meth:`PartitionLog.open`, or after a clean
    shutdown with :meth:`PartitionLog.deferred`."""

    # Set while a log opened with deferred() waits to be loaded.
    _deferred: _DeferredLoad | None = None

    def __init__(
        self, directory: Path, config: LogConfig, segments: list[LogSegment] | None, *,
        log_start_offset: int, recovery_point: int, high_watermark: int, context: LogContext,
        leader_epoch_cache: LeaderEpochFileCache | None = None,
        deferred: _DeferredLoad | None = None,
    ) -> None:
        """``segments`` None with ``deferred``: see :meth:`deferred`."""
        self._deferred = deferred
        super().__init__(directory, config, segments, recovery_point=recovery_point,
                         context=context)
        first_offset = segments[0].base_offset if segments else UNKNOWN_OFFSET
        self._log_start_offset = min(max(log_start_offset, first_offset), self.log_end_offset)
        if deferred is None:
            # open() rebuilds it once the segments can be read; an offline log keeps it empty.
            self.producer_state = ProducerStateManager(directory)
            self.leader_epoch_cache = leader_epoch_cache or LeaderEpochFileCache(directory)
        self._high_watermark = UNKNOWN_OFFSET
        self.update_high_watermark(high_watermark)

    @classmethod
    def open(
        cls, directory: Path, config: LogConfig, *, now_ms: int, log_start_offset: int = 0,
        recovery_point: int = 0, high_watermark: int = 0, had_clean_shutdown: bool = False,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        context: LogContext | None = None,
    ) -> PartitionLog:
        """Opens (creating if needed) the log in ``directory``, whose parent must exist.

        After a clean shutdown every segment is trusted (its indexes sanity-checked);
        otherwise the segments at or above ``recovery_point`` are recovered (see
        :mod:`odradek.log.loader`). An empty directory gets one empty segment at
        ``log_start_offset``; ``log_start_offset`` (from a checkpoint) is otherwise raised
        to the first segment's base offset at least, and ``high_watermark`` (from a
        checkpoint) is kept within [log_start_offset, log_end_offset]: without one, it is
        the log start offset, as in Kafka. The producer state is rebuilt (snapshot, then the
        log after it), forgetting producers idle for ``producer_id_expiration_ms``; the
        leader epoch cache loses the entries recovery or DeleteRecords left outside the log.
        """
        context = context if context is not None else StandaloneLogContext()
        # One listing serves every loader: 10,000 partitions cost 10,000 listings, not five
        # times that.
        try:
            file_names = set(os.listdir(directory))
        except FileNotFoundError:
            # Never parents=True: a vanished log dir must fail, not be recreated empty.
            directory.mkdir()
            file_names = set()
        segments = cls._load_segments(
            directory, file_names, config, context, now_ms=now_ms,
            recovery_point=recovery_point, had_clean_shutdown=had_clean_shutdown,
            log_start_offset=log_start_offset)
        if had_clean_shutdown:
            recovery_point = segments[-1].next_offset
        log = cls(
            directory, config, segments, log_start_offset=log_start_offset,
            recovery_point=recovery_point, high_watermark=high_watermark, context=context,
            leader_epoch_cache=LeaderEpochFileCache.load(directory, file_names),
        )
        # Kafka's LogLoader: the file may name epochs of records a crash or recovery cut,
        # and predate the last DeleteRecords.
        if not had_clean_shutdown:
            # The checkpoint is fsynced with the records, so a crash can leave it behind
            # the records that survived: a recovered batch of an epoch newer than the
            # latest known starts that epoch (Kafka's LogSegment.recover).
            cache = log.leader_epoch_cache
            for batch in batches_from(log, max(recovery_point, log.log_start_offset)):
                latest = cache.latest_epoch
                if latest is None or batch.partition_leader_epoch > latest:
                    cache.assign(batch.partition_leader_epoch, batch.base_offset)
        log._load_producer_state(now_ms, producer_id_expiration_ms, file_names)
        return log

    @classmethod
    def _load_segments(
        cls, directory: Path, file_names: Set[str], config: LogConfig, context: LogContext, *,
        now_ms: int, recovery_point: int, had_clean_shutdown: bool, log_start_offset: int,
    ) -> list[LogSegment]:
        """The directory's segments (see :mod:`odradek.log.loader`), or one new empty
        segment at ``log_start_offset`` if it holds none."""
        return load_segments(
            directory, file_names, config, files=context.files, now_ms=now_ms,
            recovery_point=recovery_point, had_clean_shutdown=had_clean_shutdown,
        ) or [cls._new_segment(directory, config, log_start_offset, context.files)]

    def _load_producer_state(self, now_ms: int, producer_id_expiration_ms: int,
                             file_names: Set[str]) -> None:
        """The last step of opening, once the segments are loaded: the leader epochs are
        kept within the log and the producer state rebuilt."""
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        self.producer_state = ProducerStateManager.load(
            self, now_ms=now_ms, producer_id_expiration_ms=producer_id_expiration_ms,
            file_names=file_names,
        )

    @classmethod
    def deferred(
        cls, directory: Path, config: LogConfig, *, log_start_offset: int, log_end_offset: int,
        high_watermark: int, clock: Callable[[], int],
        producer_id_expiration_ms: Callable[[], int], context: LogContext,
    ) -> PartitionLog:
        """A log a clean shutdown closed, opened without reading a file of it: the
        checkpoints written at that shutdown give its offsets (its recovery point is its
        log end offset then). Its segments, producer state and leader epochs load on first
        use (reading any attribute that needs them) or by :meth:`load`, as :meth:`open`
        would have loaded them, at the time ``clock`` gives and with the
        ``producer_id_expiration_ms`` of that moment.

        A broker restarting with 10,000 partitions serves in a fraction of the time it
        takes to load them all, and loads the rest in the background
        (``LogManager.load_deferred``). Until then the offsets, the high watermark and
        becoming leader or follower need no load (a new leader epoch is assigned as the
        log loads); an append, a read or anything else about records or epochs does."""
        return cls(
            directory, config, None, log_start_offset=log_start_offset,
            recovery_point=log_end_offset, high_watermark=high_watermark, context=context,
            deferred=_DeferredLoad(log_end_offset, clock, producer_id_expiration_ms),
        )

    @property
    def loaded(self) -> bool:
        """False while a log opened with :meth:`deferred` waits to be loaded."""
        return self._deferred is None

    def __getattr__(self, name: str) -> object:
        # Python calls this only for an attribute that is not set: one of those a deferred
        # log lacks until it loads, or a mistake.
        if name in _LOADED_ON_FIRST_USE and self._deferred is not None:
            self.load()
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @on_disk
    def load(self) -> None:
        """Loads a deferred log's segments and producer state; a no-op once loaded. Raises
        ``KafkaStorageError`` (the log going offline) if its files cannot be read."""
        deferred = self._deferred
        if deferred is None:
            return
        now_ms = deferred.clock()
        file_names = set(os.listdir(self.directory))
        segments = self._load_segments(
            self.directory, file_names, self.config, self.context, now_ms=now_ms,
            recovery_point=deferred.log_end_offset, had_clean_shutdown=True,
            log_start_offset=self._log_start_offset)
        self._deferred = None
        self.recovery_point = segments[-1].next_offset
        self._set_segments(segments)
        if self.log_end_offset != deferred.log_end_offset:
            logger.warning("%s: the segments end at offset %d, the checkpoints said %d",
                           self.name, self.log_end_offset, deferred.log_end_offset)
        self._log_start_offset = min(max(self._log_start_offset, segments[0].base_offset),
                                     self.log_end_offset)
        self.producer_state = ProducerStateManager(self.directory)
        self.leader_epoch_cache = LeaderEpochFileCache.load(self.directory, file_names)
        self.update_high_watermark(self._high_watermark)
        self._load_producer_state(now_ms, deferred.producer_id_expiration_ms(), file_names)
        for epoch, start_offset in deferred.epoch_starts:
            self.leader_epoch_cache.assign(epoch, start_offset)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """Records that ``epoch`` starts at ``start_offset`` (a new leader's epoch starts
        at its log end offset: Kafka's ``maybeAssignEpochStartOffset``). A deferred log
        records it as it loads: nothing is appended to it meanwhile."""
        if self._deferred is not None:
            self._deferred.epoch_starts.append((epoch, start_offset))
        else:
            self.leader_epoch_cache.assign(epoch, start_offset)

    @classmethod
    def offline(
        cls, directory: Path, config: LogConfig, reason: str, context: LogContext
    ) -> PartitionLog:
        """A log that could not be loaded because its log dir is offline: it has no
        segments, its offsets are UNKNOWN_OFFSET and every operation raises
        ``KafkaStorageError``. Nothing is created on disk."""
        log = cls(
            directory, config, [], log_start_offset=UNKNOWN_OFFSET,
            recovery_point=UNKNOWN_OFFSET, high_watermark=UNKNOWN_OFFSET, context=context,
        )
        log.offline_reason = reason
        return log

    # -- offsets -----------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """The replication layer moves the high watermark (Kafka's ``updateHighWatermark``):
        kept within [log_start_offset, log_end_offset]; returns the value set."""
        self._high_watermark = min(max(offset, self._log_start_offset), self.log_end_offset)
        if self._deferred is None:  # else its load decides the transactions below it
            self.producer_state.on_high_watermark_updated(self._high_watermark)
        return self._high_watermark

    @property
    def log_end_offset(self) -> int:
        deferred = self._deferred
        if deferred is not None:
            return deferred.log_end_offset
        return self._segments[-1].next_offset if self._segments else UNKNOWN_OFFSET

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to: the first offset of the oldest
        transaction not yet decided for good, or the high watermark if it is lower."""
        first_unstable = self.producer_state.first_unstable_offset
        if first_unstable is None:
            return self._high_watermark
        return min(first_unstable, self._high_watermark)

    # -- append ------------------------------------------------------------------------

    @on_disk
    def append_as_leader(self, records: bytearray, *, leader_epoch: int, now_ms: int,
                         batches: list[RecordBatch] | None = None,
                         verification_guard: VerificationGuard | None = None) -> LogAppendInfo:
        """Appends one or more v2 batches the caller validated, stamping each in place with
        its base offset, ``leader_epoch`` and, on LogAppendTime topics, ``now_ms``.
        ``batches`` are the validator's views over ``records`` (whole batches within
        ``segment.bytes``), so the headers are not parsed again; without them the log walks
        ``records`` itself.

        A batch with a producer id is checked against the producer state as it was before
        this append (a Produce request carries one batch per partition), raising a
        ``ProducerStateError``; a retry of a batch already written is not appended, and
        the answer is the original's offsets. A transactional batch that does not continue
        its producer's transaction here needs the ``verification_guard`` the producer state
        handed out before the coordinator verified the transaction; a marker (a control
        batch the coordinator writes) is checked against the producer's epochs."""
        if batches is None:
            batches = whole_batches(records, self.config.segment_bytes)
        for batch in batches:
            if batch.is_control_batch:
                marker = read_end_txn_marker(batch)
                if marker is not None:
                    self.producer_state.validate_marker(batch, marker)
            elif batch.has_producer_id:
                duplicate = self.producer_state.validate_append(batch, verification_guard)
                if duplicate is not None:
                    return duplicate_append_info(
                        batch, duplicate, log_append_time_topic=self.config.log_append_time,
                        log_start_offset=self._log_start_offset,
                    )
        log_append_time = now_ms if self.config.log_append_time else NO_TIMESTAMP
        assign_offsets(batches, self.log_end_offset, leader_epoch, log_append_time)
        return self._append(records, batches, log_append_time, now_ms)

    @on_disk
    def append_as_follower(self, records: bytearray, *, now_ms: int) -> LogAppendInfo:
        """Appends batches replicated from the leader, as they are: their offsets (which
        must continue the log, gaps allowed) and partition leader epochs. Producers' batches
        are recorded without sequence checks: the leader made them (Kafka's REPLICATION
        origin)."""
        batches = whole_batches(records, self.config.segment_bytes)
        check_replicated_offsets(batches, self.log_end_offset)
        return self._append(records, batches, NO_TIMESTAMP, now_ms)

    def _append(self, records: bytearray, batches: list[RecordBatch], log_append_time: int,
                now_ms: int) -> LogAppendInfo:
        segment = self._maybe_roll(len(records), batches[0].base_offset,
                                   batches[-1].last_offset, now_ms)
        segment.append(records, batches, now_ms)
        for batch in batches:
            self.leader_epoch_cache.assign(batch.partition_leader_epoch, batch.base_offset)
            if batch.has_producer_id:
                txn = self.producer_state.update(batch)
                if txn is not None and txn.aborted:
                    segment.txn_index.append(AbortedTxn(
                        txn.producer_id, txn.first_offset, txn.last_offset,
                        self.producer_state.last_stable_offset_after(txn)))
        return append_info(
            batches, log_append_time=log_append_time, log_start_offset=self._log_start_offset,
            # flush.messages: fsync once this many messages are unflushed (1 = every append).
            needs_flush=self.log_end_offset - self.recovery_point >= self.config.flush_messages,
        )

    def _roll(self, base_offset: int) -> LogSegment:
        """A roll also snapshots the producer state as of the new segment's base offset, as
        Kafka does, so that a restart replays at most the active segment."""
        active = self._segments[-1]
        segment = super()._roll(base_offset)
        if segment is not active:
            self._take_producer_snapshot(base_offset)
        return segment

    def _take_producer_snapshot(self, offset: int) -> None:
        """Snapshots the producer state as of ``offset``, unless the newest snapshot is
        there already (or, with none, the log starts there: there is nothing to replay)."""
        try:
            snapshots = self.producer_state.snapshot_offsets()
            if offset > (snapshots[-1] if snapshots else self._log_start_offset):
                self.producer_state.take_snapshot(offset)
        except OSError as e:
            # What led here has succeeded; a missing snapshot only means replaying more of
            # the log at the next start.
            logger.warning("%s: producer state snapshot at %d failed: %s", self.name, offset, e)

    # -- read --------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        zero_copy: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``fetch_offset``, at most ``max_bytes`` of
        them unless ``min_one_batch`` and the first is larger, none holding an offset at or
        beyond ``max_offset`` (pass the high watermark to read committed data only). With
        ``zero_copy`` a large read is a ``FileRegion``, for a socket (``Segment.read``).

        Data comes from one segment, the next one if ``fetch_offset``'s segment has nothing
        at or after it (as Kafka does). Raises ``OffsetOutOfRangeError`` outside
        ``[log_start_offset, log_end_offset]``.
        """
        self.check_online()
        log_end_offset = self.log_end_offset
        if not self._log_start_offset <= fetch_offset <= log_end_offset:
            raise OffsetOutOfRangeError(fetch_offset, self._log_start_offset, log_end_offset)
        upper = log_end_offset if max_offset is None else min(max_offset, log_end_offset)
        # A reader that has caught up, the common case of a fetch's partitions, reads no
        # file: only _read_segments touches the disk.
        records = (self._read_segments(fetch_offset, max_bytes, upper, min_one_batch, zero_copy)
                   if fetch_offset < upper else b"")
        return FetchDataInfo(records, fetch_offset, self._high_watermark,
                             self._log_start_offset, log_end_offset)

    @on_disk
    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[AbortedTxn]:
        """The aborted transactions overlapping [``start_offset``, ``upper_bound_offset``)
        (Kafka's ``collectAbortedTransactions``), from the segment holding ``start_offset``
        on, until a segment's index says later ones cannot hold more."""
        found: list[AbortedTxn] = []
        first = max(0, bisect_right(self._base_offsets, start_offset) - 1)
        for segment in self._segments[first:]:
            txns, complete = segment.txn_index.collect_aborted(start_offset, upper_bound_offset)
            found.extend(txns)
            if complete:
                break
        return found

    def restore_aborted_txn(self, txn: TxnMetadata, last_stable_offset: int) -> None:
        """Rebuilding the producer state replayed ``txn``'s abort marker: its segment's
        transaction index gets the entry if a crash lost it (the index is written with
        the records, but fsynced with them only at a flush)."""
        i = bisect_right(self._base_offsets, txn.last_offset) - 1
        if i < 0:
            return
        index = self._segments[i].txn_index
        if not len(index) or index.entries[-1].last_offset < txn.last_offset:
            index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                    last_stable_offset))

    # -- ListOffsets -------------------------------------------------------------------

    @on_disk
    def offset_for_timestamp(self, timestamp_ms: int) -> OffsetAndTimestamp | None:
        """The first record at or after ``log_start_offset`` whose timestamp is at or after
        ``timestamp_ms``, exactly (the one batch holding it is decoded); None if none."""
        for segment in self._segments:
            if segment.max_timestamp >= timestamp_ms:
                found = segment.find_offset_by_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return found
        return None

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        """Where the next batch will be written: the end of the active segment."""
        active = self._segments[-1]
        return LogOffsetMetadata(self.log_end_offset, active.base_offset, active.size)

    @on_disk
    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where ``offset`` sits in the log, for a delayed fetch to count the bytes after
        it without reading them: the batch holding it, or the log end for an offset at or
        past it (Kafka's ``convertToOffsetMetadataOrThrow``). An offset below the log start
        has no position: only its number is returned."""
        if offset >= self.log_end_offset:
            return self.log_end_offset_metadata
        i = bisect_right(self._base_offsets, offset) - 1
        if i < 0 or offset < self._log_start_offset:
            return LogOffsetMetadata(offset)
        for segment in self._segments[i:]:
            position = segment.translate_offset(offset)
            if position is not None:
                return LogOffsetMetadata(offset, segment.base_offset, position)
        return self.log_end_offset_metadata

    @on_disk
    def max_timestamp_and_offset(self) -> OffsetAndTimestamp | None:
        """ListOffsets MAX_TIMESTAMP (KIP-734): the first record with the largest timestamp;
        None for an empty log."""
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.size and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        return best.find_offset_by_timestamp(best.max_timestamp, self._log_start_offset)

    # -- truncation and deletion -------------------------------------------------------

    @on_disk
    def truncate_to(self, offset: int) -> None:
        """Drops every record at ``offset`` and beyond (a follower diverging from its
        leader). A batch straddling ``offset`` goes whole, so ``log_end_offset`` may end up
        below ``offset``; everything cut together with the records is cut at the new log end
        offset (see the module docstring). Waits for a flush in progress, which must not
        raise the recovery point over what is cut."""
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset: {offset}")
        if offset >= self.log_end_offset:
            return
        with self._flush_lock:
            if offset < self._segments[0].base_offset:
                self._truncate_fully_and_start_at(offset)
                return
            self._truncate_segments(offset)
            log_end_offset = self.log_end_offset
            # Kafka's truncateTo lowers the log start offset with the target, so records
            # DeleteRecords hid become readable again if they are still on disk.
            self._log_start_offset = min(self._log_start_offset, offset, log_end_offset)
            self._high_watermark = min(self._high_watermark, log_end_offset)
        self.leader_epoch_cache.truncate_from_end(log_end_offset)
        self.producer_state.rebuild(self)

    @on_disk
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Replaces the whole log by an empty one starting at ``offset`` (Kafka's
        ``truncateFullyAndStartAt``: a follower whose log does not overlap the leader's):
        every segment, producer, snapshot and epoch goes."""
        if offset < 0:
            raise ValueError(f"cannot start a log at a negative offset: {offset}")
        with self._flush_lock:
            self._truncate_fully_and_start_at(offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        self._replace_all_segments(offset)
        self._log_start_offset = self._high_watermark = offset
        self.leader_epoch_cache.clear()
        self.producer_state.truncate_fully()

    @on_disk
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: moves ``log_start_offset`` up to ``offset`` and deletes the
        segments wholly below it; returns the new ``log_start_offset`` (the response's low
        watermark). Offsets beyond the high watermark are out of range (as in Kafka)."""
        if not 0 <= offset <= self._high_watermark:
            raise OffsetOutOfRangeError(offset, 0, self._high_watermark)
        if offset > self._log_start_offset:
            self._log_start_offset = offset
        # A segment is wholly below the log start offset when the next one starts at or
        # before it; the active segment is never deleted this way.
        count = bisect_right(self._base_offsets, self._log_start_offset) - 1
        self._delete_oldest(min(count, len(self._segments) - 1))
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        return self._log_start_offset

    @on_disk
    def delete_old_segments(self, now_ms: int) -> int:
        """Retention (Kafka's ``deleteOldSegments``) on ``delete`` topics: drops the oldest
        segments while each is past ``retention.ms`` (by its largest timestamp) or its
        removal keeps the log at or above ``retention.bytes``. Only fully replicated data
        (below the high watermark) goes; deleting every segment first rolls an empty one.
        Returns how many segments were deleted."""
        if "delete" not in self.config.cleanup_policy:
            return 0
        retention_ms, retention_bytes = self.config.retention_ms, self.config.retention_bytes
        remaining = self.size_in_bytes
        count = 0
        upper_offsets = self._base_offsets[1:] + [self.log_end_offset]
        for segment, upper in zip(self._segments, upper_offsets):
            # An empty segment is the active one, or one the cleaner emptied or a gap in
            # replicated offsets left behind (it goes by its file's age like any other).
            if (not segment.size and segment is self._segments[-1]) \
                    or upper > self._high_watermark:
                break
            expired = retention_ms >= 0 and now_ms - segment.largest_timestamp() > retention_ms
            oversize = retention_bytes >= 0 and remaining - segment.size >= retention_bytes
            if not (expired or oversize):
                break
            remaining -= segment.size
            count += 1
        if count == len(self._segments):
            self.roll()
        self._delete_oldest(count)
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        return count

    # -- lifecycle ---------------------------------------------------------------------

    def _fsync_partition_files(self) -> None:
        self.leader_epoch_cache.flush()

    def take_offline(self, reason: str) -> None:
        if self._deferred is not None:
            # Nothing was opened: it becomes what a log offline at startup is.
            self._deferred = None
            self._log_start_offset = self._high_watermark = UNKNOWN_OFFSET
            self._set_segments([])
            self.producer_state = ProducerStateManager(self.directory)
            self.leader_epoch_cache = LeaderEpochFileCache(self.directory)
        super().take_offline(reason)

    def close(self) -> None:
        """A clean close also snapshots the producer state at the log end offset, so that
        the next start need not replay the log, and fsyncs the leader epoch checkpoint. A
        log still deferred is as the last clean shutdown left it: an epoch assigned since
        starts at its end, and loading drops such an epoch anyway (Kafka's ``LogLoader``
        truncates the epochs at the log end offset)."""
        if self.offline_reason is not None or self._deferred is not None:
            return
        self._take_producer_snapshot(self.log_end_offset)
        try:
            self.leader_epoch_cache.flush()
        except OSError as e:  # the records are closed next: recovery restores the epochs
            logger.warning("%s: leader epoch checkpoint fsync failed: %s", self.name, e)
        super().close()

    def __repr__(self) -> str:
        offline = f", offline={self.offline_reason!r}" if self.offline_reason else ""
        return (
            f"PartitionLog({str(self.directory)!r}, log_start_offset={self._log_start_offset}, "
            f"high_watermark={self._high_watermark}, log_end_offset={self.log_end_offset}, "
            f"segments={len(self._segments) if self.loaded else 'not loaded'}{offline})"
        )
