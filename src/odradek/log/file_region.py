"""``FileRegion``: a byte range of a segment file that the kernel sends to a socket.

The documents' case for zero copy: data read for a consumer goes from the page cache to the
socket with ``sendfile``, never through the broker's memory. A fetch response's records are
a ``FileRegion`` (Kafka's ``FileRecords`` slice) when they are large enough for that to pay;
the connection then hands the range to ``os.sendfile`` (:mod:`odradek.server.zero_copy`),
and it is read into memory only for a listener that must encrypt, and, a piece at a time,
when the socket is full.

A region holds its own duplicate of the segment's descriptor, so that whatever happens to the
segment between the read and the write, however long a slow client makes that (retention
deletes it, the open-files limit closes its descriptor, the cleaner swaps it out) the region
still names the same file: a deleted file stays readable through an open descriptor. The
duplicate is closed when the region is garbage collected, which CPython does as soon as the
response that held it is written or dropped. The one thing a region cannot survive is the
file being truncated under it (an unclean leader election cutting below what a consumer was
sent): then ``read`` and ``send_to`` raise ``TruncatedRegionError`` rather than send a short
response, and the connection is closed, as Kafka's ``FileRecords.writeTo`` does.
"""

from __future__ import annotations

import os
import weakref


class TruncatedRegionError(OSError):
    """The file ends before the region does: it was truncated after the region was taken."""


class FileRegion:
    """``size`` bytes of a segment file from ``position``: whole batches, the last of which
    ends before ``next_offset``; read or sent only when written."""

    __slots__ = ("_fd", "position", "size", "next_offset", "__weakref__")

    def __init__(self, fd: int, position: int, size: int, next_offset: int) -> None:
        self._fd = os.dup(fd)
        weakref.finalize(self, os.close, self._fd)
        self.position = position
        self.size = size
        # What a read_committed fetch bounds its aborted transactions with, unread.
        self.next_offset = next_offset

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRegion(position={self.position}, size={self.size})"

    def read(self, start: int = 0, size: int | None = None) -> bytes:
        """``size`` bytes of the region (by default all up to its end) from ``start``,
        relative to the region."""
        wanted = self.size - start if size is None else size
        data = os.pread(self._fd, wanted, self.position + start)
        if len(data) != wanted:
            raise TruncatedRegionError(f"{self!r}: the file ends {wanted - len(data)} bytes "
                                       "early")
        return data

    def skip(self, count: int) -> None:
        """Drops the region's first ``count`` bytes: they were sent."""
        self.position += count
        self.size -= count

    def send_to(self, socket_fd: int, start: int) -> int:
        """Sends the region from ``start`` (relative to the region) to the non-blocking
        socket ``socket_fd`` with ``os.sendfile``: the bytes the socket took, 0 when it is
        full."""
        try:
            sent = os.sendfile(socket_fd, self._fd, self.position + start, self.size - start)
        except BlockingIOError:
            return 0
        if sent == 0:  # sendfile sends nothing at the end of the file, only there
            raise TruncatedRegionError(f"{self!r}: the file ends at {self.position + start}")
        return sent
