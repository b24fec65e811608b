"""Responses holding file regions, written to a real socket: in order, with the regions sent
by the kernel, and the rest handed back when the socket is full."""

from __future__ import annotations

import os
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from odradek.log.file_region import FileRegion, TruncatedRegionError
from odradek.server.zero_copy import in_memory, write_to_socket


@pytest.fixture
def sockets():
    """A connected pair, the writing end non-blocking as a transport's socket is."""
    writer, reader = socket.socketpair()
    writer.setblocking(False)
    yield writer, reader
    writer.close()
    reader.close()


@pytest.fixture
def segment(tmp_path: Path):
    """A file of 1 MiB of known bytes, open for reading."""
    path = tmp_path / "00000000000000000000.log"
    data = os.urandom(1024 * 1024)
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    yield path, fd, data
    os.close(fd)


def receive(reader: socket.socket, size: int) -> bytes:
    received = bytearray()
    while len(received) < size:
        received += reader.recv(size - len(received))
    return bytes(received)


def test_a_response_with_regions_arrives_whole_and_in_order(sockets, segment):
    writer, reader = sockets
    _, fd, data = segment
    chunks = [b"header", FileRegion(fd, 100, 1000, 0), bytearray(b"middle"),
              FileRegion(fd, 5000, 20, 0), b"tail"]
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)

    assert write_to_socket(writer.fileno(), chunks) == []

    expected = b"header" + data[100:1100] + b"middle" + data[5000:5020] + b"tail"
    assert receive(reader, len(expected)) == expected


def test_what_a_full_socket_did_not_take_comes_back_in_memory(sockets, segment):
    writer, reader = sockets
    _, fd, data = segment
    writer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    chunks = [b"header", FileRegion(fd, 0, len(data), 0), b"tail"]
    expected = b"header" + data + b"tail"

    rest = write_to_socket(writer.fileno(), chunks)

    assert rest and not any(isinstance(chunk, FileRegion) for chunk in rest)
    assert 0 < len(expected) - sum(map(len, rest)) < len(data)
    # What was written, then the rest, is the response exactly.
    with ThreadPoolExecutor(1) as reading:
        received = reading.submit(receive, reader, len(expected))
        writer.setblocking(True)
        writer.sendall(b"".join(bytes(chunk) for chunk in rest))
        assert received.result(timeout=10) == expected


def test_a_region_outlives_the_descriptor_and_the_file_it_came_from(sockets, segment):
    path, fd, data = segment
    region = FileRegion(fd, 10, 100, 0)
    os.close(os.dup(fd))  # descriptors come and go around it
    path.unlink()  # retention deleted the segment

    assert region.read() == data[10:110]
    assert in_memory([b"a", region]) == [b"a", data[10:110]]


def test_a_region_of_a_file_truncated_under_it_is_refused_not_sent_short(sockets, segment):
    writer, _ = sockets
    path, fd, _ = segment
    region = FileRegion(fd, 1000, 5000, 0)
    os.truncate(path, 3000)

    with pytest.raises(TruncatedRegionError):
        region.read()
    with pytest.raises(TruncatedRegionError):
        write_to_socket(writer.fileno(), [b"header", FileRegion(fd, 3000, 10, 0)])


def test_a_region_closes_its_descriptor_when_dropped(segment):
    _, fd, _ = segment
    before = len(os.listdir("/proc/self/fd"))
    region = FileRegion(fd, 0, 10, 0)
    assert len(os.listdir("/proc/self/fd")) == before + 1

    del region

    assert len(os.listdir("/proc/self/fd")) == before
