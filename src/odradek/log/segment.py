"""``LogSegment``: one ``.log`` file of record batches and its two sparse indexes.

Files of a segment, named by its base offset in 20 digits (Kafka's layout)::

    00000000000000000050.log        v2 record batches exactly as stored by the leader
    00000000000000000050.index      offset -> position, see odradek.log.index
    00000000000000000050.timeindex  timestamp -> offset, see odradek.log.index
    00000000000000000050.txnindex   aborted transactions, see odradek.log.transaction_index
                                    (only once the segment holds an abort marker)

The segment owns its files and its batch bookkeeping (next offset, max timestamp, where the
last batch starts) and adds an index entry whenever more than ``index_interval_bytes`` were
appended since the last one. Rolling, ordering and recovery policy are the log's.

Reads use ``os.pread`` on the ``.log`` descriptor, which :class:`OpenFiles` opens on first
use and may close when the segment goes idle; index files are never kept open (see
:mod:`odradek.log.index`). Batch headers are read in blocks of ``HEADER_SCAN_BLOCK`` bytes,
so walking small batches costs one system call per block, not one per batch.

A deleted segment's files are first renamed ``00000000000000000050.log.deleted`` (and so on)
and removed later, after ``file.delete.delay.ms``, by :meth:`LogSegment.remove_files`.

This class is not thread-safe: the broker's event loop owns it, except :meth:`fsync_log` and
:meth:`fsync_indexes`, which the flush thread calls. I/O is plain blocking file I/O into the
page cache; nothing else fsyncs.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence, Set
from pathlib import Path
from typing import NamedTuple, TypeVar

from odradek.protocol.records import (
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    CorruptRecordError,
    RecordBatch,
    TimestampType,
    iter_valid_batches,
)

from odradek.log.checkpoint import fsync_path
from odradek.log.file_region import FileRegion
from odradek.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from odradek.log.open_files import OpenFiles
from odradek.log.transaction_index import TransactionIndex

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
# Every file of a segment, the indexes before the .log: renames go in this order, so a
# .log.swap on disk says its indexes are swap files already.
INDEX_FILE_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
SEGMENT_FILE_SUFFIXES = (*INDEX_FILE_SUFFIXES, LOG_SUFFIX)
DELETED_FILE_SUFFIX = ".deleted"
# The cleaner writes a cleaned segment as "*.cleaned" files, renames them "*.swap" once they
# are complete and fsynced, and takes the suffix off when swapping it into the log.
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"

# Headers are read this many bytes at a time: enough for ~80 small batches in one pread,
# while a scan over large batches wastes at most this much per batch.
HEADER_SCAN_BLOCK = 8192
# Reads this large go to a fetch response as a FileRegion, sent by the kernel: below it,
# duplicating and closing a descriptor costs about what copying the bytes twice does.
ZERO_COPY_MIN_BYTES = 64 * 1024

# Recovery validates the CRC of every batch, so it reads whole batches, this much at a time.
RECOVERY_CHUNK = 4 * 1024 * 1024

# Index entries store offsets relative to the base offset in an int32.
MAX_RELATIVE_OFFSET = 2**31 - 1


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000000050.log`` for base offset 50."""
    return f"{base_offset:020d}{suffix}"


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    """``<directory>/00000000000000000050.log`` for base offset 50."""
    return directory / segment_file_name(base_offset, suffix)


def _deleted_path(path: Path) -> Path:
    """``00000000000000000050.log.deleted`` for ``00000000000000000050.log``."""
    return path.with_name(path.name + DELETED_FILE_SUFFIX)


_Index = TypeVar("_Index", OffsetIndex, TimeIndex)


def _open_index(
    index_type: type[_Index], path: Path, base_offset: int, max_index_size: int
) -> tuple[_Index, bool]:
    """The index at ``path`` and whether its entries were lost (missing or corrupt file)."""
    try:
        index = index_type(path, base_offset, max_index_size)
        return index, not index.exists
    except CorruptIndexError as e:
        logger.warning("%s; starting it afresh", e)
        path.unlink()
        return index_type(path, base_offset, max_index_size), True


class OffsetAndTimestamp(NamedTuple):
    """ListOffsets' answer: a record's offset and timestamp."""

    offset: int
    timestamp: int


class _BatchLocation(NamedTuple):
    position: int
    last_offset: int
    size: int


class LogSegment:
    """One segment. Build it with :meth:`create` (new, empty) or :meth:`open` (existing)."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        files: OpenFiles,
        file_suffix: str = "",
        txn_index_exists: bool = True,
    ) -> None:
        """``txn_index_exists``: False when the caller knows there is no ``.txnindex`` file
        (only a segment holding an abort marker has one), so none is looked for."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = segment_path(directory, base_offset, LOG_SUFFIX + file_suffix)
        self._files = files
        self.size = os.stat(self.log_path).st_size
        # Set before the files are renamed away, so that an fsync on the flush thread that
        # finds them gone knows the segment was deleted and not that the disk failed.
        self.deleted = False
        index_path = segment_path(directory, base_offset, INDEX_SUFFIX + file_suffix)
        time_index_path = segment_path(directory, base_offset, TIME_INDEX_SUFFIX + file_suffix)
        # Missing or unreadable index files start afresh; open() then rebuilds them.
        self.offset_index, offset_index_lost = _open_index(
            OffsetIndex, index_path, base_offset, max_index_size
        )
        self.time_index, time_index_lost = _open_index(
            TimeIndex, time_index_path, base_offset, max_index_size
        )
        self.txn_index = TransactionIndex(
            segment_path(directory, base_offset, TXN_INDEX_SUFFIX + file_suffix), base_offset,
            exists=txn_index_exists,
        )
        self.indexes_lost = offset_index_lost or time_index_lost
        # Whether the index files on disk were fsynced since they were last written.
        self.indexes_synced = not self.indexes_lost
        # What recovery cut from the end of the file at open.
        self.bytes_cut = 0
        # When the first batch was appended, for segment.ms (None while empty).
        self.rolling_base_ms: int | None = None
        self._reset_batch_state()

    def _reset_batch_state(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self._last_batch: _BatchLocation | None = None
        self._last_batch_base_offset = self.base_offset
        self._bytes_since_last_index_entry = 0

    @property
    def _fd(self) -> int:
        return self._files.fd(self.log_path)

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, *, index_interval_bytes: int, max_index_size: int,
        files: OpenFiles, file_suffix: str = "",
    ) -> LogSegment:
        """A new empty segment; leftover files at this base offset are discarded. With a
        ``file_suffix`` (the cleaner's ``.cleaned``) its files are named ``<base>.log.cleaned``
        and so on, out of the log's sight until :meth:`rename_files` takes the suffix off."""
        log_path = segment_path(directory, base_offset, LOG_SUFFIX + file_suffix)
        files.close(log_path)  # still open if a file of that name was just deleted
        for suffix in SEGMENT_FILE_SUFFIXES:
            segment_path(directory, base_offset, suffix + file_suffix).unlink(missing_ok=True)
        files.fd(log_path, create=True)
        segment = cls(
            directory, base_offset, index_interval_bytes=index_interval_bytes,
            max_index_size=max_index_size, files=files, file_suffix=file_suffix,
        )
        segment.persist_indexes()  # empty files, as Kafka's: a segment always has all three
        return segment

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, *, index_interval_bytes: int,
        max_index_size: int, now_ms: int, next_segment_base: int | None, recover: bool,
        files: OpenFiles, file_names: Set[str],
    ) -> LogSegment:
        """Loads a segment from disk. With ``recover`` (a segment at or above the recovery
        point after a stop without a clean shutdown) every batch is validated, a torn or
        invalid tail cut (``bytes_cut``) and the indexes rebuilt; otherwise the indexes are
        trusted unless missing or failing Kafka's sanity check (of their last entries: the
        rest is read on first use), in which case the segment is recovered too.
        ``file_names`` are the names in ``directory``.

        A segment with data starts its segment.ms clock at ``now_ms``: the time of its first
        append is not recorded anywhere.
        """
        segment = cls(
            directory, base_offset, index_interval_bytes=index_interval_bytes,
            max_index_size=max_index_size, files=files,
            txn_index_exists=segment_file_name(base_offset, TXN_INDEX_SUFFIX) in file_names,
        )
        if not recover and segment.indexes_lost and segment.size:
            logger.warning("%s: rebuilding lost index files", segment.log_path)
            recover = True
        if not recover:
            try:
                segment.offset_index.sanity_check(segment.size, next_segment_base)
                segment.time_index.sanity_check(next_segment_base)
            except CorruptIndexError as e:
                logger.warning("%s; rebuilding the indexes", e)
                recover = True
        if not recover and segment.size:
            # Through a descriptor of its own: at startup, thousands of segments going
            # through the broker's bounded set would only evict one another.
            fd = os.open(segment.log_path, os.O_RDONLY)
            try:
                segment._load_tail(fd)
            except CorruptRecordError as e:
                logger.warning("%s; recovering the segment", e)
                recover = True
            finally:
                os.close(fd)
        if recover:
            segment.recover()
        if segment.size:
            segment.rolling_base_ms = now_ms
        return segment

    # -- appending ---------------------------------------------------------------------

    def append(
        self, records: bytes | bytearray, batches: Sequence[RecordBatch], now_ms: int
    ) -> None:
        """Appends ``records`` (whole batches, already stamped); ``batches`` are their
        header views, so nothing is parsed twice."""
        position = self.size
        view = memoryview(records)
        fd = self._fd
        try:
            written = 0
            while written < len(view):
                written += os.write(fd, view[written:])
        except OSError:
            # Leave no partial batch behind (disk full): the log stays as it was, if the
            # disk still lets us truncate; recovery cuts the rest at the next start.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, position)
            raise
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms
        for batch in batches:
            self._index_batch(position, batch)
            position += batch.size_in_bytes
        self.size = position

    def _index_batch(self, position: int, batch: RecordBatch) -> None:
        # Kafka's LogSegment.append: the max timestamp includes this batch before the index
        # check, and the entry names this batch's last offset and its start position.
        self._track_batch(position, batch)
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(batch.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += batch.size_in_bytes

    def _track_batch(self, position: int, batch: RecordBatch) -> None:
        if batch.max_timestamp > self.max_timestamp:
            self.max_timestamp = batch.max_timestamp
            self.offset_of_max_timestamp = batch.last_offset
        self.next_offset = batch.next_offset
        self._last_batch = _BatchLocation(position, batch.last_offset, batch.size_in_bytes)
        self._last_batch_base_offset = batch.base_offset

    def can_hold(self, last_offset: int) -> bool:
        """Whether ``last_offset`` fits the index's relative offsets (Kafka rolls if not)."""
        return last_offset - self.base_offset <= MAX_RELATIVE_OFFSET

    @property
    def is_index_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    # -- reading -----------------------------------------------------------------------

    def _headers(
        self, position: int, fd: int | None = None
    ) -> Iterator[tuple[int, RecordBatch]]:
        """(file position, header view) of each batch from ``position`` to the end, read
        through ``fd`` if given, else the segment's descriptor."""
        while position < self.size:
            block = os.pread(self._fd if fd is None else fd, HEADER_SCAN_BLOCK, position)
            offset = 0
            while offset + RECORD_BATCH_OVERHEAD <= len(block):
                batch = RecordBatch(block, offset)
                if batch.size_in_bytes < RECORD_BATCH_OVERHEAD:
                    raise CorruptRecordError(
                        f"{self.log_path}: bad batch length at {position + offset}"
                    )
                yield position + offset, batch
                offset += batch.size_in_bytes
            if offset == 0:
                raise CorruptRecordError(f"{self.log_path}: truncated batch header at {position}")
            position += offset

    def translate_offset(self, offset: int) -> int | None:
        """The file position of the batch holding ``offset`` (or, in a gap, of the next
        batch); None if the segment ends before it (Kafka's ``translateOffset``)."""
        found = self._find_batch(offset)
        return None if found is None else found.position

    def _find_batch(self, offset: int) -> _BatchLocation | None:
        """The batch holding ``offset`` or, in a gap, the first batch after it (Kafka's
        ``translateOffset``); None if the segment ends before ``offset``."""
        if offset >= self.next_offset:
            return None
        if offset >= self._last_batch_base_offset and self._last_batch is not None:
            return self._last_batch  # the tail: consumers that keep up read only this
        start = self.offset_index.lookup(offset).position
        for position, batch in self._headers(start):
            if batch.last_offset >= offset:
                return _BatchLocation(position, batch.last_offset, batch.size_in_bytes)
        return None

    def read(
        self, start_offset: int, max_size: int, max_offset: int, min_one_batch: bool,
        zero_copy: bool = False,
    ) -> bytes | FileRegion | None:
        """Whole batches from the one holding ``start_offset``: at most ``max_size`` bytes
        (or one batch of any size with ``min_one_batch``), none reaching ``max_offset``.
        None when the segment ends before ``start_offset``: the next segment may have it.
        With ``zero_copy``, batches of ``ZERO_COPY_MIN_BYTES`` or more come back as a
        :class:`FileRegion` of this file, to be sent to a socket without being read."""
        first = self._find_batch(start_offset)
        if first is None:
            return None
        if first.last_offset >= max_offset:
            return b""
        start = first.position
        if self.next_offset <= max_offset and self.size - start <= max_size:
            # All the rest fits.
            return self._slice(start, self.size, self.next_offset, zero_copy)
        limit = min(start + max_size, self.size)
        # Batches up to the last indexed one below both limits need no header walk.
        end = self.offset_index.last_batch_start_within(start, limit, max_offset)
        next_offset = self.next_offset  # past the last batch read: the first one left out
        for position, batch in self._headers(end):
            if batch.last_offset >= max_offset or position + batch.size_in_bytes > limit:
                next_offset = batch.base_offset
                break
            end = position + batch.size_in_bytes
        if end == start:
            if not min_one_batch:
                return b""
            end, next_offset = start + first.size, first.last_offset + 1
        return self._slice(start, end, next_offset, zero_copy)

    def _slice(self, start: int, end: int, next_offset: int,
               zero_copy: bool) -> bytes | FileRegion:
        if zero_copy and end - start >= ZERO_COPY_MIN_BYTES:
            return FileRegion(self._fd, start, end - start, next_offset)
        return os.pread(self._fd, end - start, start)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> OffsetAndTimestamp | None:
        """The first record at or after ``starting_offset`` with a timestamp at or after
        ``timestamp``: the time index narrows the scan to a few batches, their headers find
        the batch, and only that batch is decoded (Kafka's ``LogSegment.findOffsetByTimestamp``).
        """
        if self.max_timestamp < timestamp:
            return None
        from_offset = max(self.time_index.lookup(timestamp).offset, starting_offset)
        for position, header in self._headers(self.offset_index.lookup(from_offset).position):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            batch = RecordBatch(os.pread(self._fd, header.size_in_bytes, position))
            if batch.timestamp_type is TimestampType.LOG_APPEND_TIME:
                # Every record carries the batch's time; don't decode what we know.
                offset = max(batch.base_offset, starting_offset)
                return OffsetAndTimestamp(offset, batch.max_timestamp)
            for record in batch.records():
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return OffsetAndTimestamp(record.offset, record.timestamp)
        return None

    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp, for max.compaction.lag.ms (Kafka's
        ``getFirstBatchTimestamp``); NO_TIMESTAMP if empty."""
        for _, batch in self._headers(0):
            return batch.max_timestamp
        return NO_TIMESTAMP

    def largest_timestamp(self) -> int:
        """For retention.ms: the max record timestamp, or the file's modification time if
        the batches carry none (Kafka's ``LogSegment.largestTimestamp``)."""
        if self.max_timestamp != NO_TIMESTAMP:
            return self.max_timestamp
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    # -- recovery and truncation -------------------------------------------------------

    def recover(self) -> int:
        """Validates every batch (length, magic, CRC, offsets increasing), truncates the
        file at the first invalid byte, rebuilds and writes the offset and time indexes and
        drops the aborted transactions whose markers were cut. Returns the bytes cut."""
        self.offset_index.clear()
        self.time_index.clear()
        self._reset_batch_state()
        file_size = os.fstat(self._fd).st_size
        position = 0
        while position < file_size:
            chunk = os.pread(self._fd, RECOVERY_CHUNK, position)
            valid = self._recover_chunk(chunk, position)
            if valid == 0 and len(chunk) >= RECORD_BATCH_OVERHEAD:
                # Maybe a batch larger than the chunk: read exactly it.
                size = RecordBatch(chunk).size_in_bytes
                if len(chunk) < size <= file_size - position:
                    valid = self._recover_chunk(os.pread(self._fd, size, position), position)
            if valid == 0:
                break
            position += valid
        if position < file_size:
            logger.warning(
                "%s: cut %d bytes of torn or invalid data at position %d (log end offset %d)",
                self.log_path, file_size - position, position, self.next_offset,
            )
            os.ftruncate(self._fd, position)
        self.size = position
        self.persist_indexes()
        self.txn_index.truncate_to(self.next_offset)
        self.bytes_cut = file_size - position
        return self.bytes_cut

    def _recover_chunk(self, chunk: bytes, chunk_position: int) -> int:
        """Indexes the valid batches at the start of ``chunk``; returns their length."""
        end = 0
        for batch in iter_valid_batches(chunk):
            if (
                batch.base_offset < self.next_offset
                or batch.last_offset_delta < 0
                or not self.can_hold(batch.last_offset)
            ):
                # Offsets may jump forward (compaction leaves gaps) but never go back.
                break
            self._index_batch(chunk_position + batch.position, batch)
            end = batch.position + batch.size_in_bytes
        return end

    def _load_tail(self, fd: int | None = None) -> None:
        """Restores the batch bookkeeping from the indexes plus a scan of the batches after
        the last offset index entry (at most ``index_interval_bytes`` and one batch), read
        through ``fd`` if given.

        Exact: at that entry's batch the time index got the max timestamp up to it."""
        self._reset_batch_state()
        last_entry = self.time_index.last_entry
        if last_entry is not None:
            self.max_timestamp = last_entry.timestamp
            self.offset_of_max_timestamp = last_entry.offset
        last_indexed = self.offset_index.last_entry
        start = last_indexed.position if last_indexed is not None else 0
        for position, batch in self._headers(start, fd):
            self._track_batch(position, batch)
        self._bytes_since_last_index_entry = self.size - start

    def truncate_to(self, offset: int) -> int:
        """Drops every batch holding ``offset`` or later (a batch straddling ``offset`` goes
        whole). Returns the bytes removed."""
        location = self._find_batch(offset)
        if location is None:
            return 0
        removed = self.size - location.position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        os.ftruncate(self._fd, location.position)
        self.size = location.position
        self._load_tail()
        if not self.size:
            self.rolling_base_ms = None
        return removed

    # -- durability and lifecycle -----------------------------------------------------

    def persist_indexes(self) -> bool:
        """Writes the index entries their files lack; returns whether a file changed."""
        changed = self.offset_index.persist()
        changed = self.time_index.persist() or changed
        if changed:
            self.indexes_synced = False
        return changed

    def fsync_log(self) -> None:
        """Flush thread: fsyncs the ``.log`` file and the transaction index, written with it,
        unless the segment was deleted meanwhile."""
        self._fsync_unless_deleted(self.log_path)
        if self.txn_index:
            self._fsync_unless_deleted(self.txn_index.path)

    def fsync_indexes(self) -> None:
        """Flush thread: fsyncs both index files, unless the segment was deleted meanwhile."""
        for index in (self.offset_index, self.time_index):
            self._fsync_unless_deleted(index.path)
        self.indexes_synced = True

    def _fsync_unless_deleted(self, path: Path) -> None:
        try:
            fsync_path(path)
        except FileNotFoundError:
            if not self.deleted:
                raise  # gone without our doing: the log dir failed

    def close(self) -> None:
        """Closes the ``.log`` descriptor if open; it is reopened on the next use."""
        self._files.close(self.log_path)

    def rename_to_deleted(self) -> None:
        """The first step of deleting: ``.log`` -> ``.log.deleted`` and so on, so that the
        files are out of the log at once and removed by :meth:`remove_files` later."""
        self.deleted = True
        self._files.close(self.log_path)
        deleted_log_path = _deleted_path(self.log_path)
        os.rename(self.log_path, deleted_log_path)
        self.log_path = deleted_log_path
        for index in (self.offset_index, self.time_index, self.txn_index):
            index.rename(_deleted_path(index.path))

    def rename_files(self, file_suffix: str, files: OpenFiles | None = None) -> None:
        """Renames the files to ``<base>.log<file_suffix>`` and so on (the cleaner's
        ``.cleaned`` -> ``.swap`` -> no suffix); the indexes first and the ``.log`` last,
        so a ``.log.swap`` on disk says its indexes are swap files too. ``files``: the
        descriptors to use from now on (a segment built on the cleaner's thread joins the
        broker's)."""
        self._files.close(self.log_path)
        for index, suffix in zip((self.offset_index, self.time_index, self.txn_index),
                                 INDEX_FILE_SUFFIXES):
            index.rename(segment_path(self.directory, self.base_offset, suffix + file_suffix))
        log_path = segment_path(self.directory, self.base_offset, LOG_SUFFIX + file_suffix)
        os.rename(self.log_path, log_path)
        self.log_path = log_path
        if files is not None:
            self._files = files

    def remove_files(self) -> None:
        """Removes the segment's files under their current names (``*.deleted`` once
        deleted; the cleaner's ``*.cleaned`` or ``*.swap`` of a round abandoned)."""
        self.log_path.unlink(missing_ok=True)
        for index in (self.offset_index, self.time_index, self.txn_index):
            index.delete()

    def __repr__(self) -> str:
        return (
            f"LogSegment(base_offset={self.base_offset}, next_offset={self.next_offset}, "
            f"size={self.size})"
        )
