"""Responses holding file regions, written to a real socket: in order, with the regions sent
by the kernel, the rest handed back when the socket is full, and sent a piece in memory at a
time as the transport empties."""

from __future__ import annotations

import asyncio
import os
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import uvloop

from odradek.log.file_region import FileRegion, TruncatedRegionError
from odradek.server.config import BrokerConfig
from odradek.server.connection import UNSENT_PIECE_BYTES
from odradek.server.socket_server import SocketServer
from odradek.server.zero_copy import in_memory, take, write_to_socket


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


def test_what_a_full_socket_did_not_take_comes_back_a_region_still(sockets, segment):
    writer, reader = sockets
    _, fd, data = segment
    writer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    chunks = [b"header", FileRegion(fd, 0, len(data), 0), b"tail"]
    expected = b"header" + data + b"tail"

    rest = write_to_socket(writer.fileno(), chunks)

    region, tail = rest
    assert isinstance(region, FileRegion) and tail == b"tail"
    assert 0 < region.position and region.position + region.size == len(data)
    # What was written, then the rest, is the response exactly.
    with ThreadPoolExecutor(1) as reading:
        received = reading.submit(receive, reader, len(expected))
        writer.setblocking(True)
        writer.sendall(b"".join(in_memory(rest)))
        assert received.result(timeout=10) == expected


def test_a_piece_reads_a_region_only_as_far_as_it_needs(segment):
    _, fd, data = segment
    chunks = [b"header", FileRegion(fd, 100, 1000, 0), b"tail"]

    piece, rest = take(chunks, 506)

    assert piece == [b"header", data[100:600]]
    assert len(rest) == 2 and in_memory(rest) == [data[600:1100], b"tail"]
    assert take(rest, 2000) == ([data[600:1100], b"tail"], [])


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


@pytest.mark.parametrize("loop_factory", [asyncio.new_event_loop, uvloop.new_event_loop],
                         ids=["asyncio", "uvloop"])
def test_a_response_larger_than_the_socket_goes_out_whole_a_piece_in_memory_at_a_time(
        loop_factory, tmp_path: Path, monkeypatch):
    data = os.urandom(8 * 1024 * 1024)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    reads: list[int] = []
    read = FileRegion.read

    def counted(region: FileRegion, start: int = 0, size: int | None = None) -> bytes:
        reads.append(region.size - start if size is None else size)
        return read(region, start, size)

    monkeypatch.setattr(FileRegion, "read", counted)
    answers = {b"big": lambda: [b"header", FileRegion(fd, 0, len(data), 0), b"tail"],
               b"next": lambda: [b"next answer"]}
    expected = b"header" + data + b"tail" + b"next answer"
    # Small socket buffers: the region meets a full socket again and again.
    server = SocketServer(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0",
                                        "socket.send.buffer.bytes": "65536"}),
                          lambda user, mechanism: None)

    async def exchange() -> bytes:
        await server.bind()
        await server.start_serving(lambda frame, context: answers[bytes(frame)]())
        try:
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            client.setblocking(False)
            loop = asyncio.get_running_loop()
            await loop.sock_connect(client, server.bound_addresses["PLAINTEXT"])
            await loop.sock_sendall(client, b"".join(len(f).to_bytes(4, "big") + f
                                                     for f in (b"big", b"next")))
            received = bytearray()
            while len(received) < len(expected):
                await asyncio.sleep(0.001)  # a client slower than the broker
                block = await asyncio.wait_for(loop.sock_recv(client, 256 * 1024), 10)
                assert block, "the broker closed the connection"
                received += block
            client.close()
            return bytes(received)
        finally:
            server.stop_accepting()
            await server.close_connections(0)

    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            assert runner.run(exchange()) == expected
    finally:
        os.close(fd)
    # The socket was full many times over; each time one piece was read, never the rest of
    # the region, and the rest of what was sent went by sendfile.
    assert len(reads) > 1
    assert max(reads) <= UNSENT_PIECE_BYTES
    assert sum(reads) < len(data)
