"""The sparse indexes of a segment: ``OffsetIndex`` (offset -> file position) and
``TimeIndex`` (timestamp -> offset), Kafka's ``.index`` and ``.timeindex`` files.

Indexes never parse records: the segment tells them what to add. Both hold their entries in
memory (two parallel ``array`` columns, searched with ``bisect``), so a lookup never touches
the disk, and keep no file open: :meth:`persist` writes the entries the file lacks, which the
segment does when it stops being the active one (roll), after recovery and at close.
Opening an index reads only its file's size and last entry (what loading a segment checks);
the entries are read on first use, as Kafka's ``LazyIndex`` maps the file on first use, so a
restart does not read the indexes of the thousands of segments no one reads. The
active segment's index files may therefore lag behind its log; that is safe because the
active segment is always at or above the recovery point, so a restart without a clean
shutdown rebuilds them (Kafka's mmapped indexes are no more durable than that). Unlike
Kafka we do not preallocate: the file holds exactly the entries.

Offsets are stored relative to the segment's base offset to fit in 4 bytes: if the base
offset was 50, offset 55 is stored as 5.

These classes are not thread-safe: the broker's event loop owns them; only ``fsync`` may
run on the flush thread.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path

from odradek.protocol.records import NO_TIMESTAMP

from odradek.log.checkpoint import fsync_path

# .index entry, 8 bytes, big-endian:
#   relative_offset int32  the last offset of an indexed batch minus the segment base offset
#   position        int32  byte position of that batch in the .log file
# Example (base offset 50): a batch holding offsets 53..55 written at byte 4200 is stored as
# (5, 4200) = 00 00 00 05 00 00 10 68.
OFFSET_ENTRY = struct.Struct(">ii")

# .timeindex entry, 12 bytes, big-endian:
#   timestamp       int64  the largest batch max timestamp seen in the segment so far
#   relative_offset int32  the last offset of the batch that first reached that timestamp,
#                          minus the segment base offset
# Example (base offset 50): max timestamp 1700000000000 first reached by the batch ending at
# offset 55 is stored as (1700000000000, 5).
TIME_ENTRY = struct.Struct(">qi")


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    """An offset and the file position of the batch that holds it (or of an earlier batch)."""

    offset: int
    position: int


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """A timestamp and the offset at or after which it is first reached."""

    timestamp: int
    offset: int


class CorruptIndexError(Exception):
    """An index file that cannot belong to its log file; the segment rebuilds it."""


class _IndexFile:
    """What both indexes share: the entry limit, the file, read on first use and written by
    :meth:`persist`."""

    entry: struct.Struct
    _relative_offsets: array
    _columns: tuple[array, ...]

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_index_size // self.entry.size
        try:
            file_size = os.stat(path).st_size
        except FileNotFoundError:
            file_size = -1
        if file_size > 0 and file_size % self.entry.size:
            raise CorruptIndexError(
                f"{path}: {file_size} bytes is not a multiple of {self.entry.size}"
            )
        # The file holds _file_entries entries (-1: there is no file; it is written, empty,
        # at the next persist), the first _persisted of which are in memory too once loaded.
        self._file_entries = self._persisted = (
            file_size // self.entry.size if file_size >= 0 else -1
        )
        self._loaded = False
        self._last_entry_in_file = self._read_last_entry()

    @property
    def exists(self) -> bool:
        """Whether the file existed when the index was opened, or was written since."""
        return self._file_entries >= 0

    def _read_last_entry(self) -> tuple[int, ...] | None:
        """The fields of the file's last entry, read alone; None if it has none."""
        if self._file_entries <= 0:
            return None
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return self.entry.unpack(
                os.pread(fd, self.entry.size, (self._file_entries - 1) * self.entry.size)
            )
        finally:
            os.close(fd)

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        size = max(self._file_entries, 0) * self.entry.size
        data = b""
        if size:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                data = os.read(fd, size)
            finally:
                os.close(fd)
        if len(data) != size:
            raise CorruptIndexError(f"{self.path}: shorter than its {self._file_entries} entries")
        self._load(data)
        self._loaded = True

    def _load(self, data: bytes) -> None:
        raise NotImplementedError

    def _encode(self, start: int, end: int) -> bytes:
        raise NotImplementedError

    def __len__(self) -> int:
        if not self._loaded:
            return max(self._file_entries, 0)
        return len(self._relative_offsets)

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def _last_row(self) -> tuple[int, ...] | None:
        """The last entry's fields, in the file's order; None if there is none."""
        if not self._loaded:
            return self._last_entry_in_file
        if not self._relative_offsets:
            return None
        return tuple(column[-1] for column in self._columns)

    def _truncate_entries(self, keep: int) -> None:
        for column in self._columns:
            del column[keep:]
        self._persisted = min(self._persisted, keep)

    def truncate_to(self, offset: int) -> None:
        """Removes every entry whose offset is at or beyond ``offset``."""
        self._ensure_loaded()
        self._truncate_entries(bisect_left(self._relative_offsets, offset - self.base_offset))

    def clear(self) -> None:
        if not self._loaded:  # nothing to read: every entry goes
            self._load(b"")
            self._loaded = True
        self._truncate_entries(0)

    def persist(self) -> bool:
        """Writes what the file lacks (no fsync); returns whether the file changed."""
        if not self._loaded and self.exists:
            return False  # untouched since it was read
        self._ensure_loaded()
        count = len(self)
        if self._persisted == self._file_entries == count:
            return False
        start = max(self._persisted, 0)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if self._file_entries != start:
                os.ftruncate(fd, start * self.entry.size)
            os.pwrite(fd, self._encode(start, count), start * self.entry.size)
        finally:
            os.close(fd)
        self._file_entries = self._persisted = count
        return True

    def fsync(self) -> None:
        """Safe on the flush thread: opens its own descriptor."""
        fsync_path(self.path)

    def rename(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)


class OffsetIndex(_IndexFile):
    """Sparse map from offset to the position of a batch in the ``.log`` file.

    One entry per ``index.interval.bytes`` of log: the entry names a batch's *last* offset
    and its start position, as Kafka's ``LogSegment.append`` does.
    """

    entry = OFFSET_ENTRY

    def _load(self, data: bytes) -> None:
        flat = array("i", data)
        if sys.byteorder == "little":
            flat.byteswap()
        self._relative_offsets = flat[0::2]
        self._positions = flat[1::2]
        self._columns = (self._relative_offsets, self._positions)

    def _encode(self, start: int, end: int) -> bytes:
        flat = array("i", bytes(2 * 4 * (end - start)))
        flat[0::2] = self._relative_offsets[start:end]
        flat[1::2] = self._positions[start:end]
        if sys.byteorder == "little":
            flat.byteswap()
        return flat.tobytes()

    def append(self, offset: int, position: int) -> None:
        self._ensure_loaded()
        self._relative_offsets.append(offset - self.base_offset)
        self._positions.append(position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The last entry at or before ``target_offset``; the segment start if none.

        The batch holding ``target_offset`` starts at the returned position or after it.
        """
        self._ensure_loaded()
        i = bisect_right(self._relative_offsets, target_offset - self.base_offset) - 1
        if i < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._relative_offsets[i], self._positions[i])

    def last_batch_start_within(self, start: int, end: int, max_offset: int) -> int:
        """The largest indexed batch position in ``[start, end]`` whose batch ends before
        ``max_offset``; ``start`` if there is none.

        Every byte from ``start`` up to that position is whole batches below ``max_offset``,
        so a read can skip walking their headers.
        """
        self._ensure_loaded()
        i = min(
            bisect_right(self._positions, end),
            bisect_left(self._relative_offsets, max_offset - self.base_offset),
        )
        if i == 0 or self._positions[i - 1] <= start:
            return start
        return self._positions[i - 1]

    @property
    def last_entry(self) -> OffsetPosition | None:
        last = self._last_row()
        if last is None:
            return None
        relative_offset, position = last
        return OffsetPosition(self.base_offset + relative_offset, position)

    def sanity_check(self, log_size: int, next_segment_base: int | None) -> None:
        """Kafka's cheap check on load: the last entry must point inside the log file and
        name an offset of this segment."""
        last = self.last_entry
        if last is not None and not (
            self.base_offset <= last.offset
            and (next_segment_base is None or last.offset < next_segment_base)
            and 0 <= last.position < log_size
        ):
            raise CorruptIndexError(f"{self.path}: last entry {last} outside the segment")


class TimeIndex(_IndexFile):
    """Sparse map from timestamp to offset: an entry each time the segment's max timestamp
    grows, at the offset index's cadence, so timestamps and offsets both increase.
    """

    entry = TIME_ENTRY

    def _load(self, data: bytes) -> None:
        self._timestamps = array("q")
        self._relative_offsets = array("i")
        for timestamp, relative in TIME_ENTRY.iter_unpack(data):
            self._timestamps.append(timestamp)
            self._relative_offsets.append(relative)
        self._columns = (self._timestamps, self._relative_offsets)

    def _encode(self, start: int, end: int) -> bytes:
        rows = zip(self._timestamps[start:end], self._relative_offsets[start:end])
        return b"".join(TIME_ENTRY.pack(timestamp, relative) for timestamp, relative in rows)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Adds an entry only if ``timestamp`` is beyond the last one, or beyond
        NO_TIMESTAMP for the first (Kafka's rule: batches without timestamps add nothing)."""
        self._ensure_loaded()
        if timestamp <= (self._timestamps[-1] if self._timestamps else NO_TIMESTAMP):
            return
        self._timestamps.append(timestamp)
        self._relative_offsets.append(offset - self.base_offset)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The last entry with a timestamp at or before ``target_timestamp``; the segment
        start if none. No record before the returned offset has a timestamp above it.
        """
        self._ensure_loaded()
        i = bisect_right(self._timestamps, target_timestamp) - 1
        if i < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[i], self.base_offset + self._relative_offsets[i])

    @property
    def last_entry(self) -> TimestampOffset | None:
        last = self._last_row()
        if last is None:
            return None
        timestamp, relative_offset = last
        return TimestampOffset(timestamp, self.base_offset + relative_offset)

    def sanity_check(self, next_segment_base: int | None) -> None:
        """The last entry must name an offset of this segment."""
        last = self.last_entry
        if last is None:
            return
        if last.offset < self.base_offset or (
            next_segment_base is not None and last.offset >= next_segment_base
        ):
            raise CorruptIndexError(f"{self.path}: last entry {last} outside the segment")

