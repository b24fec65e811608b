"""Writing a response that holds ``FileRegion``s: the encoded bytes around them with
``os.writev``, the regions with ``os.sendfile``, straight to the socket.

The transport knows nothing of file regions, so a connection whose transport has nothing
queued writes such a response to the socket itself, in order, until the socket is full.
Writing past the transport is safe only while its buffer is empty: then every byte it was
given is already in the socket, ahead of these. What the socket did not take waits, a region
still a region, until the transport is empty again; the connection gets there by queueing a
piece of it (``take``, the one part read into memory) on the transport, which tells it when
that piece is written. So a response of any size costs the broker's memory one piece at a
time, and most of a large region still goes from the page cache to the socket.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from odradek.log.file_region import FileRegion

Chunk = bytes | bytearray | memoryview | FileRegion
# The most buffers one writev takes (Linux: 1024); a longer run is written in several.
IOV_MAX = os.sysconf("SC_IOV_MAX")


def in_memory(chunks: Sequence[Chunk]) -> list[bytes | bytearray | memoryview]:
    """``chunks`` with each region read: for a transport, which takes bytes only."""
    return [chunk.read() if isinstance(chunk, FileRegion) else chunk for chunk in chunks]


def write_to_socket(socket_fd: int, chunks: Sequence[Chunk]) -> list[Chunk]:
    """Writes ``chunks`` in order to the non-blocking socket ``socket_fd`` until it is full,
    and returns the unwritten rest: a region partly sent comes back as its unsent part."""
    index, count = 0, len(chunks)
    while index < count:
        chunk = chunks[index]
        if isinstance(chunk, FileRegion):
            start = 0
            while start < chunk.size:
                sent = chunk.send_to(socket_fd, start)
                if sent == 0:
                    chunk.skip(start)
                    return [chunk, *chunks[index + 1:]]
                start += sent
            index += 1
            continue
        # The run of encoded buffers up to the next region, in one system call.
        end = index
        while end < count and end - index < IOV_MAX and not isinstance(chunks[end], FileRegion):
            end += 1
        run = chunks[index:end]
        try:
            sent = os.writev(socket_fd, run)
        except BlockingIOError:
            sent = 0
        for position, buffer in enumerate(run):
            if sent < len(buffer):
                return [memoryview(buffer)[sent:], *run[position + 1:], *chunks[end:]]
            sent -= len(buffer)
        index = end
    return []


def take(chunks: Sequence[Chunk], size: int) -> tuple[list[bytes | bytearray | memoryview],
                                                     list[Chunk]]:
    """The first ``size`` bytes of ``chunks`` in memory (or a little more: a buffer is taken
    whole, a region read only as far as needed), and the rest."""
    piece: list[bytes | bytearray | memoryview] = []
    for index, chunk in enumerate(chunks):
        if size <= 0:
            return piece, list(chunks[index:])
        if isinstance(chunk, FileRegion):
            if chunk.size > size:
                piece.append(chunk.read(0, size))
                chunk.skip(size)
                return piece, [chunk, *chunks[index + 1:]]
            piece.append(chunk.read())
        else:
            piece.append(chunk)
        size -= len(chunk)
    return piece, []
