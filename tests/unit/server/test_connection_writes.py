"""How a connection writes its answers: those ready after one read go out in one write, in
the order of the requests, and an answer that waits holds back the ones behind it."""

from __future__ import annotations

import asyncio

from odradek.server.config import BrokerConfig, SecurityProtocol
from odradek.server.connection import Connection
from odradek.server.listener_security import ListenerSecurity


class RecordingTransport:
    """A transport that keeps each write as the list of buffers it was given."""

    def __init__(self) -> None:
        self.writes: list[list[bytes]] = []

    def get_extra_info(self, name):
        return ("10.0.0.7", 51234) if name == "peername" else None

    def is_closing(self) -> bool:
        return False

    def writelines(self, buffers) -> None:
        self.writes.append([bytes(buffer) for buffer in buffers])

    def pause_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def resume_reading(self) -> None:
        pass


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def connect(dispatch) -> tuple[Connection, RecordingTransport]:
    """A PLAINTEXT connection whose dispatcher answers each frame with ``dispatch(frame)``."""
    connection = Connection(lambda payload, client: dispatch(payload), 1024,
                            ListenerSecurity(BrokerConfig(), "PLAINTEXT",
                                             SecurityProtocol.PLAINTEXT,
                                             lambda user, mechanism: None),
                            on_open=lambda c: None, on_close=lambda c: None)
    transport = RecordingTransport()
    connection.connection_made(transport)
    return connection, transport


def test_the_answers_to_the_requests_of_one_read_go_out_in_one_write():
    async def exchange() -> list[list[bytes]]:
        connection, transport = connect(lambda payload: [b"answer-" + payload])
        connection.data_received(frame(b"1") + frame(b"2") + frame(b"3"))
        connection.data_received(frame(b"4"))
        return transport.writes

    assert asyncio.run(exchange()) == [[b"answer-1", b"answer-2", b"answer-3"], [b"answer-4"]]


def test_an_answer_that_waits_holds_back_the_answers_behind_it():
    async def exchange() -> tuple[list[list[bytes]], list[list[bytes]]]:
        later = asyncio.get_running_loop().create_future()

        def dispatch(payload: bytes):
            return later if payload == b"2" else [b"answer-" + payload]

        connection, transport = connect(dispatch)
        connection.data_received(frame(b"1") + frame(b"2") + frame(b"3"))
        before = list(transport.writes)
        later.set_result([b"answer-2"])
        await connection.drain()
        return before, transport.writes

    before, after = asyncio.run(exchange())
    assert before == [[b"answer-1"]]
    assert after == [[b"answer-1"], [b"answer-2", b"answer-3"]]


def test_a_request_answered_with_nothing_writes_nothing():
    async def exchange() -> list[list[bytes]]:
        connection, transport = connect(lambda payload: None)  # acks=0 produces
        connection.data_received(frame(b"1") + frame(b"2"))
        return transport.writes

    assert asyncio.run(exchange()) == []
