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

This class is not thread-safe: the broker's event loop owns it. Its I/O is plain blocking
file I/O into the page cache; it fsyncs only in :meth:`PartitionLog.flush`, which appends
call when ``flush.messages`` says so.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

from odradek.protocol.records import (
    NO_TIMESTAMP,
    CorruptRecordError,
    iter_batches,
)

from odradek.log.config import LogConfig
from odradek.log.errors import OffsetOutOfRangeError, RecordBatchTooLargeError
from odradek.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    OffsetAndTimestamp,
    segment_path,
)

logger = logging.getLogger(__name__)

# A partition directory being deleted is first renamed to "<topic>-<partition>.<uuid>-delete"
# (Kafka's naming), so a crash mid-delete leaves a name no loader mistakes for a partition.
DELETE_DIR_SUFFIX = "-delete"

_SEGMENT_FILE = re.compile(r"(\d{20})\.(log|index|timeindex)")


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
        self, directory: Path, config: LogConfig, segments: list[LogSegment], log_start_offset: int
    ) -> None:
        self.directory = directory
        self.config = config
        self._segments = segments
        self._base_offsets = [segment.base_offset for segment in segments]
        self._log_start_offset = min(
            max(log_start_offset, segments[0].base_offset), self.log_end_offset
        )
        # No high watermark checkpoint exists yet: what survived recovery counts as
        # replicated until the replication layer says otherwise.
        self.high_watermark = self.log_end_offset
        # Offsets below this are known to be fsynced (or recovered at open, see issue #3).
        self.recovery_point = self.log_end_offset
        # Segment files were created or deleted since the directory was last fsynced.
        self._directory_changed = True

    @classmethod
    def open(
        cls, directory: Path, config: LogConfig, *, now_ms: int, log_start_offset: int = 0
    ) -> PartitionLog:
        """Opens (creating if needed) the log in ``directory``.

        Every segment but the last is trusted if its indexes pass a sanity check (else they
        are rebuilt); the last, active segment is recovered: a torn or invalid tail is cut
        and its indexes rebuilt. An empty directory gets one empty segment at
        ``log_start_offset``; ``log_start_offset`` (from a checkpoint) is otherwise raised
        to the first segment's base offset at least.
        """
        directory.mkdir(parents=True, exist_ok=True)
        matches = (_SEGMENT_FILE.fullmatch(path.name) for path in directory.iterdir())
        base_offsets_with_log = []
        for base_offset in sorted({int(match.group(1)) for match in matches if match}):
            if segment_path(directory, base_offset, LOG_SUFFIX).exists():
                base_offsets_with_log.append(base_offset)
            else:  # an index whose log is gone (a crash while deleting a segment)
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    segment_path(directory, base_offset, suffix).unlink(missing_ok=True)
        segments = []
        for i, base_offset in enumerate(base_offsets_with_log):
            is_last = i == len(base_offsets_with_log) - 1
            segments.append(
                LogSegment.open(
                    directory, base_offset,
                    index_interval_bytes=config.index_interval_bytes,
                    max_index_size=config.segment_index_bytes,
                    now_ms=now_ms,
                    next_segment_base=None if is_last else base_offsets_with_log[i + 1],
                    recover=is_last,
                )
            )
        if not segments:
            segments.append(cls._new_segment(directory, config, log_start_offset))
        return cls(directory, config, segments, log_start_offset)

    @staticmethod
    def _new_segment(directory: Path, config: LogConfig, base_offset: int) -> LogSegment:
        return LogSegment.create(
            directory, base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
        )

    # -- state -------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

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

    # -- append ------------------------------------------------------------------------

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

        # flush.messages: fsync once this many messages are unflushed (1 = every append).
        if self.log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()
        return LogAppendInfo(
            first_offset=first_offset,
            last_offset=last_offset,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max_timestamp,
            log_append_time=log_append_time,
            log_start_offset=self._log_start_offset,
            records_count=records_count,
            valid_bytes=valid_bytes,
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

    def roll(self) -> LogSegment:
        """Starts a new active segment at ``log_end_offset``; a no-op if the active segment
        is still empty (it would get the same base offset)."""
        active = self._segments[-1]
        if not active.size:
            return active
        segment = self._new_segment(self.directory, self.config, self.log_end_offset)
        self._segments.append(segment)
        self._base_offsets.append(segment.base_offset)
        self._directory_changed = True
        return segment

    # -- read --------------------------------------------------------------------------

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

    def offset_for_timestamp(self, timestamp_ms: int) -> OffsetAndTimestamp | None:
        """The first record at or after ``log_start_offset`` whose timestamp is at or after
        ``timestamp_ms``, exactly (the one batch holding it is decoded); None if none."""
        for segment in self._segments:
            if segment.max_timestamp >= timestamp_ms:
                found = segment.find_offset_by_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return found
        return None

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

    def truncate_to(self, offset: int) -> None:
        """Drops every record at ``offset`` and beyond (a follower diverging from its
        leader). A batch straddling ``offset`` goes whole, so ``log_end_offset`` may end up
        below ``offset``."""
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset: {offset}")
        if offset >= self.log_end_offset:
            return
        if offset < self._segments[0].base_offset:
            self._truncate_fully_and_start_at(offset)
            return
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._segments.pop().delete()
            self._base_offsets.pop()
            self._directory_changed = True
        self._segments[-1].truncate_to(offset)
        log_end_offset = self.log_end_offset
        # Kafka's truncateTo lowers the log start offset with the target, so records
        # DeleteRecords hid become readable again if they are still on disk.
        self._log_start_offset = min(self._log_start_offset, offset, log_end_offset)
        self.high_watermark = min(self.high_watermark, log_end_offset)
        self.recovery_point = min(self.recovery_point, log_end_offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        for segment in self._segments:
            segment.delete()
        self._segments = [self._new_segment(self.directory, self.config, offset)]
        self._base_offsets = [offset]
        self._directory_changed = True
        self._log_start_offset = self.high_watermark = self.recovery_point = offset

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
        while len(self._segments) > 1 and self._segments[1].base_offset <= self._log_start_offset:
            self._segments.pop(0).delete()
            self._base_offsets.pop(0)
            self._directory_changed = True
        return self._log_start_offset

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
            if not segment.size or upper > self.high_watermark:
                break
            expired = retention_ms >= 0 and now_ms - segment.largest_timestamp() > retention_ms
            oversize = retention_bytes >= 0 and remaining - segment.size >= retention_bytes
            if not (expired or oversize):
                break
            remaining -= segment.size
            count += 1
        if count == len(self._segments):
            self.roll()
        for _ in range(count):
            self._segments.pop(0).delete()
            self._base_offsets.pop(0)
            self._directory_changed = True
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        return count

    # -- durability and lifecycle ------------------------------------------------------

    def flush(self) -> None:
        """fsyncs every segment that may hold data past ``recovery_point`` (and the
        directory if segment files came or went), then advances ``recovery_point``."""
        first = max(bisect_right(self._base_offsets, self.recovery_point) - 1, 0)
        for segment in self._segments[first:]:
            segment.flush()
        if self._directory_changed:
            fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._directory_changed = False
        self.recovery_point = self.log_end_offset

    def close(self) -> None:
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        """Closes the log and removes its directory, renaming it first so that a crash
        midway leaves a ``-delete`` directory the next start removes."""
        self.close()
        doomed = self.directory.with_name(
            f"{self.directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        )
        os.rename(self.directory, doomed)
        shutil.rmtree(doomed)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({str(self.directory)!r}, log_start_offset={self._log_start_offset}, "
            f"high_watermark={self.high_watermark}, log_end_offset={self.log_end_offset}, "
            f"segments={len(self._segments)})"
        )
