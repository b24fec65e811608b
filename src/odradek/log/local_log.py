"""``LocalLog``: the segments of one partition directory (Kafka's ``LocalLog``), the base of
:class:`~odradek.log.partition_log.PartitionLog`.

The directory ``<topic>-<partition>/`` holds the segments, each named by its base offset
(see :mod:`odradek.log.segment`); the last one, the *active* segment, takes the appends.
This layer owns what is about segments and their files: the ordered segment list (a bisect
over base offsets finds the one holding an offset: with segments 0, 1000 and 2000, offset
1500 is in segment 1000), rolling, reading across segment boundaries, cutting and deleting
segments, the cleaner's swap, flushing and closing. What the offsets mean (log start offset,
high watermark), the producer state and the leader epochs are the ``PartitionLog``'s.

Durability (Kafka's ``flush.messages`` / ``flush.ms``): appends only write to the page
cache; :meth:`LocalLog.flush_to` fsyncs, on an executor thread (the one method safe off
the event loop), and moves the *recovery point*, below which all is on disk, so a restart
after a crash recovers only what lies above it (:mod:`odradek.log.loader`).

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
from pathlib import Path

from odradek.log.checkpoint import fsync_path
from odradek.log.config import LogConfig
from odradek.log.context import LogContext, on_disk
from odradek.log.errors import KafkaStorageError
from odradek.log.file_region import FileRegion
from odradek.log.open_files import OpenFiles
from odradek.log.segment import LogSegment

logger = logging.getLogger(__name__)

# A partition directory being deleted is first renamed to "<topic>-<partition>.<uuid>-delete"
# (Kafka's naming), so a crash mid-delete leaves a name no loader mistakes for a partition.
DELETE_DIR_SUFFIX = "-delete"

# The offsets of a log that could not be loaded (its log dir offline at startup).
UNKNOWN_OFFSET = -1


class LocalLog:
    """The segments of one partition directory (see the module docstring). Not thread-safe:
    the event loop owns it, except ``flush_to``."""

    def __init__(
        self, directory: Path, config: LogConfig, segments: list[LogSegment] | None, *,
        recovery_point: int, context: LogContext,
    ) -> None:
        """``segments`` None: they are loaded later, by the subclass (see
        ``PartitionLog.deferred``), which then calls :meth:`_set_segments`."""
        self.directory = directory
        self.config = config
        self.context = context
        # Why the log is offline (its log dir failed, or it was deleted), or None while it is
        # online.
        self.offline_reason: str | None = None
        # Offsets below this are on disk. Only flush_to raises it (on the flush thread, under
        # _flush_lock); truncation lowers it.
        self.recovery_point = recovery_point
        self._flush_lock = threading.Lock()
        # Segment files were created or deleted since the directory was last fsynced when
        # these differ (a counter, so the flush thread never loses a change made meanwhile).
        self._directory_changes = 1
        self._directory_synced = 0
        if segments is not None:
            self._set_segments(segments)

    def _set_segments(self, segments: list[LogSegment]) -> None:
        """The segments as loaded; the recovery point is kept within them."""
        self._segments = segments
        self._base_offsets = [segment.base_offset for segment in segments]
        first_offset = segments[0].base_offset if segments else UNKNOWN_OFFSET
        self.recovery_point = min(max(self.recovery_point, first_offset), self.log_end_offset)
        # Segments whose index files were written (roll, recovery) but not yet fsynced.
        self._unsynced_indexes = deque(s for s in segments[:-1] if not s.indexes_synced)

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

    # -- rolling -----------------------------------------------------------------------

    def _maybe_roll(self, size: int, first_offset: int, last_offset: int,
                    now_ms: int) -> LogSegment:
        """Kafka's ``LogSegment.shouldRoll``: the append would overflow segment.bytes, the
        segment is older than segment.ms, an index is full, or the offsets would not fit
        the index's int32 relative offsets. The new segment starts at the append's first
        offset (the log end offset, or beyond it after a gap in replicated offsets)."""
        active = self._segments[-1]
        if active.size and (
            active.size > self.config.segment_bytes - size
            or now_ms - active.rolling_base_ms > self.config.segment_ms  # type: ignore[operator]
        ) or active.is_index_full or not active.can_hold(last_offset):
            return self._roll(first_offset)
        return active

    @on_disk
    def roll(self) -> LogSegment:
        """Starts a new active segment at ``log_end_offset``; a no-op if the active segment
        is still empty (it would get the same base offset)."""
        return self._roll(self.log_end_offset)

    def _roll(self, base_offset: int) -> LogSegment:
        """The old segment's index files are written now: from here on it is trusted at a
        restart once flushed."""
        active = self._segments[-1]
        if base_offset == active.base_offset:
            return active
        active.persist_indexes()
        if not active.indexes_synced:
            self._unsynced_indexes.append(active)
        segment = self._new_segment(self.directory, self.config, base_offset, self.context.files)
        self._segments.append(segment)
        self._base_offsets.append(base_offset)
        self._directory_changes += 1
        return segment

    @property
    def rolled_segments_unflushed(self) -> bool:
        """A segment was rolled since the last flush (Kafka fsyncs each rolled segment)."""
        return self.recovery_point < self._segments[-1].base_offset if self._segments else False

    # -- read --------------------------------------------------------------------------

    @on_disk
    def _read_segments(self, fetch_offset: int, max_bytes: int, upper: int,
                       min_one_batch: bool, zero_copy: bool) -> bytes | FileRegion:
        """Whole batches from one segment (see ``PartitionLog.read``): the next one if
        ``fetch_offset``'s segment has nothing at or after it, as Kafka does."""
        records: bytes | FileRegion | None = None
        i = bisect_right(self._base_offsets, fetch_offset) - 1
        while records is None and fetch_offset < upper and i < len(self._segments):
            records = self._segments[i].read(fetch_offset, max_bytes, upper, min_one_batch,
                                             zero_copy)
            i += 1
        return records or b""

    # -- truncation and deletion -------------------------------------------------------

    def _truncate_segments(self, offset: int) -> None:
        """Cuts the segments at ``offset`` (at or above the first one's base offset): those
        starting beyond it go whole, the one holding it is cut. The caller holds
        ``_flush_lock``."""
        doomed = []
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            doomed.append(self._segments.pop())
            self._base_offsets.pop()
        self._delete_segments(doomed)
        self._segments[-1].truncate_to(offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)

    def _replace_all_segments(self, offset: int) -> None:
        """Every segment goes; one empty segment starts at ``offset``. The caller holds
        ``_flush_lock``."""
        doomed, self._segments = self._segments, []
        self._delete_segments(doomed)
        self._segments = [self._new_segment(self.directory, self.config, offset,
                                            self.context.files)]
        self._base_offsets = [offset]
        self.recovery_point = offset

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
                self._fsync_partition_files()
                if directory_changes != self._directory_synced:
                    fsync_path(self.directory)
                    self._directory_synced = directory_changes
            except OSError as e:
                logger.error("%s: flush failed, the log dir is failing: %s", self.directory, e)
                self.context.storage_failed(self, e)
                raise KafkaStorageError(f"{self.name}: flush failed: {e}") from e
            self.recovery_point = max(self.recovery_point, target)

    def _fsync_partition_files(self) -> None:
        """fsyncs the partition's files besides the segments, with each flush (on the flush
        thread); the log that owns such files says which."""

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
        midway leaves a ``-delete`` directory the next start removes; the log is offline
        from then on. An offline log's files are out of reach: they stay where they are."""
        if self.offline_reason is not None:
            return
        for segment in self._segments:
            segment.close()  # no index to write: the files are going
        doomed = self.directory.with_name(
            f"{self.directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        )
        os.rename(self.directory, doomed)
        self.offline_reason = "deleted"
        shutil.rmtree(doomed)
