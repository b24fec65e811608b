"""``PartitionLog``: the log of one partition, a directory of segments (Kafka's ``UnifiedLog``).

The directory ``<topic>-<partition>/`` holds the segments, each named by its base offset
(see :mod:`odradek.log.segment`); the last one, the *active* segment, takes the appends.
The log owns what spans segments: assigning offsets, rolling, reading across segment
boundaries, truncation, DeleteRecords and recovery at open.

Offsets, in Kafka's words::

    log_start_offset <= high_watermark <= log_end_offset
    |  first readable  |  first not yet   |  next offset to assign
       offset             replicated

``high_watermark`` is a plain attribute the replication layer drives (on a single node the
broker sets it to ``log_end_offset`` after each append); the log only lowers it when
truncating. Reads stop before it when the caller passes it as ``max_offset``.

Durability (Kafka's ``flush.messages`` / ``flush.ms``): appends only write to the page
cache; :meth:`PartitionLog.flush_to` fsyncs, on an executor thread (the one method safe off
the event loop), and moves the *recovery point*, below which all is on disk, so a restart
after a crash recovers only what lies above it (:mod:`odradek.log.loader`). An append
reports ``needs_flush`` at ``flush.messages`` unflushed messages, for the produce path to
await ``flush_to`` before answering.

An ``OSError`` touching the log's files (Kafka: an ``IOException``) takes it offline, and
its owner takes the rest of its log dir offline: every later operation raises
``KafkaStorageError``. Deleted segments leave the log at once; their files, renamed
``*.deleted``, go after ``file.delete.delay.ms``.

This class is not thread-safe: the broker's event loop owns it, except ``flush_to``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import uuid
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from odradek.protocol.records import (
    NO_TIMESTAMP,
    CorruptRecordError,
    iter_batches,
)

from odradek.log.checkpoint import fsync_path
from odradek.log.config import LogConfig
from odradek.log.context import LogContext, StandaloneLogContext, on_disk
from odradek.log.errors import KafkaStorageError, OffsetOutOfRangeError, RecordBatchTooLargeError
from odradek.log.loader import load_segments
from odradek.log.open_files import OpenFiles
from odradek.log.segment import LogSegment, OffsetAndTimestamp

logger = logging.getLogger(__name__)

# A partition directory being deleted is first renamed to "<topic>-<partition>.<uuid>-delete"
# (Kafka's naming), so a crash mid-delete leaves a name no loader mistakes for a partition.
DELETE_DIR_SUFFIX = "-delete"

# The offsets of a log that could not be loaded (its log dir offline at startup).
UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """What an append did; the Produce response is made from it."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int  # last offset of the first batch reaching max_timestamp
    log_append_time: int  # -1 (NO_TIMESTAMP) unless the topic uses LogAppendTime
    log_start_offset: int
    records_count: int
    valid_bytes: int
    # flush.messages unflushed messages have accumulated: before answering, run
    # log.flush_to(last_offset + 1) in an executor.
    needs_flush: bool = False


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """The answer to a read: whole batches, the first of which may start before
    ``fetch_offset`` (clients skip the records before it, as with Kafka)."""

    records: bytes
    fetch_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


class PartitionLog:
    """One partition's log. Open it with :meth:`PartitionLog.open`."""

    def __init__(
        self, directory: Path, config: LogConfig, segments: list[LogSegment], *,
        log_start_offset: int, recovery_point: int, context: LogContext,
    ) -> None:
        self.directory = directory
        self.config = config
        self._segments = segments
        self._base_offsets = [segment.base_offset for segment in segments]
        self.context = context
        # Why the log is offline (its log dir failed), or None while it is online.
        self.offline_reason: str | None = None
        first_offset = segments[0].base_offset if segments else UNKNOWN_OFFSET
        self._log_start_offset = min(max(log_start_offset, first_offset), self.log_end_offset)
        # No high watermark checkpoint exists yet: what survived recovery counts as
        # replicated until the replication layer says otherwise.
        self.high_watermark = self.log_end_offset
        # Offsets below this are on disk. Only flush_to raises it (on the flush thread, under
        # _flush_lock); truncation lowers it.
        self.recovery_point = min(max(recovery_point, first_offset), self.log_end_offset)
        self._flush_lock = threading.Lock()
        # Segments whose index files were written (roll, recovery) but not yet fsynced.
        self._unsynced_indexes = deque(s for s in segments[:-1] if not s.indexes_synced)
        # Segment files were created or deleted since the directory was last fsynced when
        # these differ (a counter, so the flush thread never loses a change made meanwhile).
        self._directory_changes = 1
        self._directory_synced = 0

    @classmethod
    def open(
        cls, directory: Path, config: LogConfig, *, now_ms: int, log_start_offset: int = 0,
        recovery_point: int = 0, had_clean_shutdown: bool = False,
        context: LogContext | None = None,
    ) -> PartitionLog:
        """Opens (creating if needed) the log in ``directory``, whose parent must exist.

        After a clean shutdown every segment is trusted (its indexes sanity-checked);
        otherwise the segments at or above ``recovery_point`` are recovered (see
        :mod:`odradek.log.loader`). An empty directory gets one empty segment at
        ``log_start_offset``; ``log_start_offset`` (from a checkpoint) is otherwise raised
        to the first segment's base offset at least.
        """
        context = context if context is not None else StandaloneLogContext()
        # Never parents=True: a vanished log dir must fail, not be recreated empty.
        directory.mkdir(exist_ok=True)
        segments = load_segments(
            directory, config, files=context.files, now_ms=now_ms,
            recovery_point=recovery_point, had_clean_shutdown=had_clean_shutdown,
        )
        if not segments:
            segments.append(cls._new_segment(directory, config, log_start_offset, context.files))
        if had_clean_shutdown:
            recovery_point = segments[-1].next_offset
        return cls(
            directory, config, segments, log_start_offset=log_start_offset,
            recovery_point=recovery_point, context=context,
        )

    @classmethod
    def offline(
        cls, directory: Path, config: LogConfig, reason: str, context: LogContext
    ) -> PartitionLog:
        """A log that could not be loaded because its log dir is offline: it has no
        segments, its offsets are UNKNOWN_OFFSET and every operation raises
        ``KafkaStorageError``. Nothing is created on disk."""
        log = cls(
            directory, config, [], log_start_offset=UNKNOWN_OFFSET,
            recovery_point=UNKNOWN_OFFSET, context=context,
        )
        log.offline_reason = reason
        return log

    @staticmethod
    def _new_segment(
        directory: Path, config: LogConfig, base_offset: int, files: OpenFiles
    ) -> LogSegment:
        return LogSegment.create(
            directory, base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            files=files,
        )

    # -- state -------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def name(self) -> str:
        return self.directory.name

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset if self._segments else UNKNOWN_OFFSET

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The segments, oldest first."""
        return tuple(self._segments)

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    def update_config(self, config: LogConfig) -> None:
        """Takes effect at once for rolling, timestamps and flushing; index sizing applies
        to segments created from now on (as in Kafka)."""
        self.config = config

    def check_online(self) -> None:
        """Raises ``KafkaStorageError`` if the log is offline."""
        if self.offline_reason is not None:
            raise KafkaStorageError(f"{self.name} is offline: {self.offline_reason}")

    def take_offline(self, reason: str) -> None:
        """Its log dir failed: closes the descriptors; every operation fails from now on."""
        if self.offline_reason is None:
            self.offline_reason = reason
            for segment in self._segments:
                with contextlib.suppress(OSError):  # the disk may fail that too
                    segment.close()

    # -- append ------------------------------------------------------------------------

    @on_disk
    def append(self, records: bytearray, *, leader_epoch: int, now_ms: int) -> LogAppendInfo:
        """Appends one or more v2 batches the caller validated, stamping each in place with
        its base offset, ``leader_epoch`` and, on LogAppendTime topics, ``now_ms``."""
        batches = list(iter_batches(records))
        valid_bytes = sum(batch.size_in_bytes for batch in batches)
        if not batches or valid_bytes != len(records):
            raise CorruptRecordError(
                f"{len(records) - valid_bytes} of {len(records)} bytes are not whole batches"
            )
        if valid_bytes > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"{valid_bytes} bytes of records exceed segment.bytes {self.config.segment_bytes}"
            )
        first_offset = self.log_end_offset
        # v2 batches advance by lastOffsetDelta + 1 (the count may be lower after compaction).
        last_offset = first_offset + sum(b.last_offset_delta + 1 for b in batches) - 1
        segment = self._maybe_roll(valid_bytes, last_offset, now_ms)

        log_append_time = now_ms if self.config.log_append_time else NO_TIMESTAMP
        offset = first_offset
        max_timestamp, offset_of_max_timestamp, records_count = NO_TIMESTAMP, first_offset, 0
        for batch in batches:
            batch.set_base_offset(offset)
            batch.set_partition_leader_epoch(leader_epoch)
            if log_append_time != NO_TIMESTAMP:
                batch.set_log_append_time(log_append_time)
            if batch.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
            records_count += batch.records_count
            offset = batch.next_offset
        segment.append(records, batches, now_ms)
        return LogAppendInfo(
            first_offset=first_offset,
            last_offset=last_offset,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max_timestamp,
            log_append_time=log_append_time,
            log_start_offset=self._log_start_offset,
            records_count=records_count,
            valid_bytes=valid_bytes,
            # flush.messages: fsync once this many messages are unflushed (1 = every append).
            needs_flush=self.log_end_offset - self.recovery_point >= self.config.flush_messages,
        )

    def _maybe_roll(self, size: int, last_offset: int, now_ms: int) -> LogSegment:
        """Kafka's ``LogSegment.shouldRoll``: the append would overflow segment.bytes, the
        segment is older than segment.ms, an index is full, or the offsets would not fit
        the index's int32 relative offsets."""
        active = self._segments[-1]
        if active.size and (
            active.size > self.config.segment_bytes - size
            or now_ms - active.rolling_base_ms > self.config.segment_ms  # type: ignore[operator]
        ) or active.is_index_full or not active.can_hold(last_offset):
            return self.roll()
        return active

    @on_disk
    def roll(self) -> LogSegment:
        """Starts a new active segment at ``log_end_offset``; a no-op if the active segment
        is still empty (it would get the same base offset). The old one's index files are
        written now: from here on the segment is trusted at a restart once flushed."""
        active = self._segments[-1]
        if not active.size:
            return active
        active.persist_indexes()
        if not active.indexes_synced:
            self._unsynced_indexes.append(active)
        segment = self._new_segment(
            self.directory, self.config, self.log_end_offset, self.context.files
        )
        self._segments.append(segment)
        self._base_offsets.append(segment.base_offset)
        self._directory_changes += 1
        return segment

    @property
    def rolled_segments_unflushed(self) -> bool:
        """A segment was rolled since the last flush (Kafka fsyncs each rolled segment)."""
        return self.recovery_point < self._segments[-1].base_offset if self._segments else False

    # -- read --------------------------------------------------------------------------

    @on_disk
    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``fetch_offset``, at most ``max_bytes`` of
        them unless ``min_one_batch`` and the first is larger, none holding an offset at or
        beyond ``max_offset`` (pass the high watermark to read committed data only).

        Data comes from one segment, the next one if ``fetch_offset``'s segment has nothing
        at or after it (as Kafka does). Raises ``OffsetOutOfRangeError`` outside
        ``[log_start_offset, log_end_offset]``.
        """
        log_end_offset = self.log_end_offset
        if not self._log_start_offset <= fetch_offset <= log_end_offset:
            raise OffsetOutOfRangeError(fetch_offset, self._log_start_offset, log_end_offset)
        upper = log_end_offset if max_offset is None else min(max_offset, log_end_offset)
        records: bytes | None = None
        i = bisect_right(self._base_offsets, fetch_offset) - 1
        while records is None and fetch_offset < upper and i < len(self._segments):
            records = self._segments[i].read(fetch_offset, max_bytes, upper, min_one_batch)
            i += 1
        return FetchDataInfo(
            records or b"", fetch_offset, self.high_watermark, self._log_start_offset,
            log_end_offset,
        )

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
        below ``offset``. Waits for a flush in progress, which must not raise the recovery
        point over what is cut."""
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset: {offset}")
        if offset >= self.log_end_offset:
            return
        with self._flush_lock:
            if offset < self._segments[0].base_offset:
                self._truncate_fully_and_start_at(offset)
                return
            doomed = []
            while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
                doomed.append(self._segments.pop())
                self._base_offsets.pop()
            self._delete_segments(doomed)
            self._segments[-1].truncate_to(offset)
            log_end_offset = self.log_end_offset
            # Kafka's truncateTo lowers the log start offset with the target, so records
            # DeleteRecords hid become readable again if they are still on disk.
            self._log_start_offset = min(self._log_start_offset, offset, log_end_offset)
            self.high_watermark = min(self.high_watermark, log_end_offset)
            self.recovery_point = min(self.recovery_point, log_end_offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        doomed, self._segments = self._segments, []
        self._delete_segments(doomed)
        self._segments = [self._new_segment(self.directory, self.config, offset,
                                            self.context.files)]
        self._base_offsets = [offset]
        self._log_start_offset = self.high_watermark = self.recovery_point = offset

    @on_disk
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: moves ``log_start_offset`` up to ``offset`` and deletes the
        segments wholly below it; returns the new ``log_start_offset`` (the response's low
        watermark). Offsets beyond the high watermark are out of range (as in Kafka)."""
        if not 0 <= offset <= self.high_watermark:
            raise OffsetOutOfRangeError(offset, 0, self.high_watermark)
        if offset > self._log_start_offset:
            self._log_start_offset = offset
        # A segment is wholly below the log start offset when the next one starts at or
        # before it; the active segment is never deleted this way.
        count = bisect_right(self._base_offsets, self._log_start_offset) - 1
        self._delete_oldest(min(count, len(self._segments) - 1))
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
            # An empty segment is the active one, or one the cleaner emptied (it goes by
            # its file's age like any other).
            if (not segment.size and segment is self._segments[-1]) \
                    or upper > self.high_watermark:
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
        return count

    @on_disk
    def replace_segments(self, old: list[LogSegment], sizes: list[int],
                         new: list[LogSegment]) -> bool:
        """The cleaner's swap (Kafka's ``replaceSegments``), in one step on the owner's
        thread: ``new`` (files named ``*.swap``, fsynced) take the place of ``old``, which
        must still be consecutive segments of the log with the ``sizes`` they had when
        cleaning began; otherwise (truncation, retention or DeleteRecords got there first)
        nothing changes and False is returned. The old files are renamed ``*.deleted``
        before the swap files lose their suffix, so a crash between the two leaves the
        ``.swap`` files the loader completes."""
        if not old or self._segments.count(old[0]) != 1:
            return False
        first = self._segments.index(old[0])
        if (self._segments[first:first + len(old)] != old
                or first + len(old) >= len(self._segments)  # never the active segment
                or [segment.size for segment in old] != sizes):
            return False
        for segment in old:
            segment.rename_to_deleted()
        for segment in new:
            segment.rename_files("", self.context.files)
        self._segments[first:first + len(old)] = new
        self._base_offsets[first:first + len(old)] = [segment.base_offset for segment in new]
        self._directory_changes += 1
        self.context.delete_later(self, old)
        return True

    def _delete_oldest(self, count: int) -> None:
        if count > 0:
            doomed = self._segments[:count]
            del self._segments[:count]
            del self._base_offsets[:count]
            self._delete_segments(doomed)

    def _delete_segments(self, segments: list[LogSegment]) -> None:
        """Kafka's asynchronous delete: the segments are out of the log already; their files
        are renamed ``*.deleted`` now and removed after ``file.delete.delay.ms``."""
        if not segments:
            return
        for segment in segments:
            segment.rename_to_deleted()
        self._directory_changes += 1
        self.context.delete_later(self, segments)

    # -- durability and lifecycle ------------------------------------------------------

    def flush_to(self, offset: int) -> None:
        """Makes every record below ``offset`` durable (fsync) and raises the recovery point
        to at least ``offset``: blocking, and the one method safe to call from another
        thread, so the owner runs it with ``loop.run_in_executor``. Concurrent calls take
        turns; one finding its offset already flushed returns at once, so appends waiting
        together share one fsync. Raises ``KafkaStorageError`` if the log dir failed.

        Everything written before the call is flushed, not only what is below ``offset``:
        the recovery point moves to the log end offset as of the call.
        """
        with self._flush_lock:
            if offset <= self.recovery_point:
                return
            self.check_online()
            target = self.log_end_offset
            segments = list(self._segments)  # the owner may roll or delete meanwhile
            directory_changes = self._directory_changes
            try:
                while self._unsynced_indexes:
                    self._unsynced_indexes.popleft().fsync_indexes()
                bases = [segment.base_offset for segment in segments]
                first = max(bisect_right(bases, self.recovery_point) - 1, 0)
                for segment in segments[first:]:
                    segment.fsync_log()
                if directory_changes != self._directory_synced:
                    fsync_path(self.directory)
                    self._directory_synced = directory_changes
            except OSError as e:
                logger.error("%s: flush failed, the log dir is failing: %s", self.directory, e)
                self.context.storage_failed(self, e)
                raise KafkaStorageError(f"{self.name}: flush failed: {e}") from e
            self.recovery_point = max(self.recovery_point, target)

    def close(self) -> None:
        """Writes (and fsyncs) the index entries not yet on disk and closes the files, so
        that the next start can trust them after a clean shutdown. Closing twice is fine;
        an offline log has nothing left to close."""
        if self.offline_reason is not None:
            return
        for segment in self._segments:
            if segment.persist_indexes():
                segment.fsync_indexes()
            segment.close()

    def delete(self) -> None:
        """Closes the log and removes its directory, renaming it first so that a crash
        midway leaves a ``-delete`` directory the next start removes. An offline log's
        files are out of reach: they stay where they are."""
        if self.offline_reason is not None:
            return
        for segment in self._segments:
            segment.close()  # no index to write: the files are going
        doomed = self.directory.with_name(
            f"{self.directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        )
        os.rename(self.directory, doomed)
        shutil.rmtree(doomed)

    def __repr__(self) -> str:
        offline = f", offline={self.offline_reason!r}" if self.offline_reason else ""
        return (
            f"PartitionLog({str(self.directory)!r}, log_start_offset={self._log_start_offset}, "
            f"high_watermark={self.high_watermark}, log_end_offset={self.log_end_offset}, "
            f"segments={len(self._segments)}{offline})"
        )
