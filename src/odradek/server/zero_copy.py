"""Writing a response that holds ``FileRegion``s: the encoded bytes around them with
``os.writev``, the regions with ``os.sendfile``, straight to the socket.

The transport knows nothing of file regions, so a connection whose transport has nothing
queued writes such a response to the socket itself, in order, until the socket is full; what
is left (the rest of a region read into memory, and everything after it) goes to the
transport, behind which later responses queue as usual. Writing past the transport is safe
only while its buffer is empty: then every byte it was given is already in the socket, ahead
of these.
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


def write_to_socket(socket_fd: int, chunks: Sequence[Chunk]) -> list[bytes | bytearray |
                                                                        memoryview]:
    """Writes ``chunks`` in order to the non-blocking socket ``socket_fd`` until it is full,
    and returns the unwritten rest, in memory, for the transport to queue."""
    index, count = 0, len(chunks)
    while index < count:
        chunk = chunks[index]
        if isinstance(chunk, FileRegion):
            start = 0
            while start < chunk.size:
                sent = chunk.send_to(socket_fd, start)
                if sent == 0:
                    return [chunk.read(start), *in_memory(chunks[index + 1:])]
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
                return [memoryview(buffer)[sent:], *run[position + 1:],
                        *in_memory(chunks[end:])]
            sent -= len(buffer)
        index = end
    return []
