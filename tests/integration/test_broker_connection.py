"""The broker-to-broker client (``odradek.client.connection``) against a real broker, and
against a fake peer for what a healthy broker never does (a wrong correlation id, an
oversized frame, hanging up on requests in flight).

The broker runs on its own thread and loop; each test drives the client on a loop of its
own, uvloop as in the broker process, every wait bounded by ``TEST_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest
import uvloop
from kafka_requests import record_batch
from kio.schema.errors import ErrorCode

from odradek.client.connection import BrokerConnection, BrokerConnectionError, BrokerConnections
from odradek.protocol.api import SUPPORTED_APIS, ApiKey, request_class, response_class
from odradek.protocol.framing import encode_response, peek_header
from odradek.protocol.messages import build
from odradek.protocol.records import iter_batches

# On loopback an answer takes milliseconds; these only bound a broken client or broker.
TEST_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 2.0
CLIENT_ID = "broker-0"
_SIZE = struct.Struct(">i")


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(TEST_TIMEOUT_S):
            return await coroutine

    return uvloop.run(bounded())


async def connect(port: int, **options: Any) -> BrokerConnection:
    return await BrokerConnection.open("127.0.0.1", port, client_id=CLIENT_ID,
                                       connect_timeout_s=CONNECT_TIMEOUT_S, **options)


def api_versions() -> Any:
    return build(request_class(ApiKey.API_VERSIONS, 3), client_software_name="odradek",
                 client_software_version="0.1.0")


def metadata(version: int, topics: list[str]) -> Any:
    return build(request_class(ApiKey.METADATA, version), allow_auto_topic_creation=False,
                 include_topic_authorized_operations=False,
                 topics=[{"name": name, "topic_id": None} for name in topics])


def produce(topic: str, records: bytes) -> Any:
    return build(request_class(ApiKey.PRODUCE, 9), transactional_id=None, acks=-1,
                 timeout=datetime.timedelta(seconds=REQUEST_TIMEOUT_S), topic_data=[
                     {"name": topic, "partition_data": [{"index": 0, "records": records}]}])


def fetch(version: int, topic: str, *, max_wait_ms: int = 0, min_bytes: int = 1) -> Any:
    return build(request_class(ApiKey.FETCH, version), replica_id=-1, max_wait=max_wait_ms,
                 min_bytes=min_bytes, max_bytes=2**20, isolation_level=0, session_id=0,
                 session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[{
                     "topic": topic, "partitions": [{
                         "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                         "last_fetched_epoch": -1, "log_start_offset": -1,
                         "partition_max_bytes": 2**20}]}])


# -- against a real broker ---------------------------------------------------------------


def test_api_versions_v3_lists_what_the_broker_serves(odradek_broker):
    async def scenario() -> Any:
        connection = await connect(odradek_broker.port)
        try:
            return await connection.send(api_versions(), timeout_s=REQUEST_TIMEOUT_S)
        finally:
            connection.close()

    response = run(scenario())

    assert type(response) is response_class(ApiKey.API_VERSIONS, 3)
    assert response.error_code == ErrorCode.none
    fetch_versions = next(k for k in response.api_keys if k.api_key == ApiKey.FETCH)
    assert fetch_versions.max_version == SUPPORTED_APIS[ApiKey.FETCH].max_version


@pytest.mark.parametrize("version", [1, 12], ids=["non-flexible", "flexible"])
def test_metadata_describes_the_cluster_in_either_header_version(odradek_broker, create_topic,
                                                                 version):
    topic = create_topic("described", partitions=3)

    async def scenario() -> Any:
        connection = await connect(odradek_broker.port)
        try:
            return await connection.send(metadata(version, [topic]), timeout_s=REQUEST_TIMEOUT_S)
        finally:
            connection.close()

    response = run(scenario())

    assert type(response) is response_class(ApiKey.METADATA, version)
    [broker] = response.brokers
    assert (broker.host, broker.port) == ("127.0.0.1", odradek_broker.port)
    [described] = response.topics
    assert (described.name, described.error_code) == (topic, ErrorCode.none)
    assert sorted(p.partition_index for p in described.partitions) == [0, 1, 2]


@pytest.mark.parametrize("fetch_version", [4, 12])
def test_produced_records_are_fetched_back(odradek_broker, create_topic, fetch_version):
    topic = create_topic("replicated")
    sent = record_batch(b"to the follower")

    async def scenario() -> tuple[Any, Any]:
        connection = await connect(odradek_broker.port)
        try:
            produced = await connection.send(produce(topic, sent), timeout_s=REQUEST_TIMEOUT_S)
            fetched = await connection.send(fetch(fetch_version, topic),
                                            timeout_s=REQUEST_TIMEOUT_S)
            return produced, fetched
        finally:
            connection.close()

    produced, fetched = run(scenario())

    [partition] = produced.responses[0].partition_responses
    assert (partition.error_code, partition.base_offset) == (ErrorCode.none, 0)
    [fetched_partition] = fetched.responses[0].partitions
    assert fetched_partition.error_code == ErrorCode.none
    assert fetched_partition.high_watermark == 2
    [batch] = iter_batches(fetched_partition.records)
    assert [record.value for record in batch.records()] == [b"to the follower", b""]


def test_pipelined_requests_are_each_answered_with_their_own_response(odradek_broker):
    """Fifty requests written before any answer is read, of two APIs in turn: each caller
    gets the response of its own request."""
    names = [f"topic-{n}" for n in range(25)]

    async def scenario() -> list[Any]:
        connection = await connect(odradek_broker.port)
        requests = [request for name in names for request in (metadata(12, [name]),
                                                               api_versions())]
        try:
            return await asyncio.gather(*(connection.send(request, timeout_s=REQUEST_TIMEOUT_S)
                                          for request in requests))
        finally:
            connection.close()

    responses = run(scenario())

    assert [response.topics[0].name for response in responses[0::2]] == names
    assert all(type(response) is response_class(ApiKey.API_VERSIONS, 3)
               for response in responses[1::2])


def test_a_request_past_its_timeout_raises_and_closes_the_connection(odradek_broker,
                                                                     create_topic):
    """A long poll the broker holds for two seconds, with 0.3 s to answer: the caller gets
    TimeoutError at 0.3 s, the request pipelined behind it a connection error, and the
    connection takes no more requests (Kafka's NetworkClient disconnects likewise)."""
    topic = create_topic("quiet")
    long_poll = fetch(12, topic, max_wait_ms=2_000, min_bytes=2**20)

    async def scenario() -> tuple[float, list[Any], BrokerConnection]:
        connection = await connect(odradek_broker.port)
        started = time.monotonic()
        outcomes = await asyncio.gather(connection.send(long_poll, timeout_s=0.3),
                                        connection.send(api_versions(), timeout_s=10.0),
                                        return_exceptions=True)
        return time.monotonic() - started, outcomes, connection

    waited, (timed_out, behind), connection = run(scenario())

    assert isinstance(timed_out, TimeoutError)
    assert isinstance(behind, BrokerConnectionError)
    assert waited < 1.5
    assert connection.closed
    with pytest.raises(BrokerConnectionError, match="is closed"):
        run(connection.send(api_versions(), timeout_s=REQUEST_TIMEOUT_S))


def test_the_answer_to_a_cancelled_request_is_dropped_and_the_next_one_still_matches(
        odradek_broker, create_topic):
    """A caller cancelled while its request is in flight (a fetcher stopping) leaves the
    connection usable: the broker still answers that request first, and that answer goes
    nowhere."""
    topic = create_topic("idle")

    async def scenario() -> Any:
        connection = await connect(odradek_broker.port)
        long_poll = asyncio.create_task(connection.send(
            fetch(12, topic, max_wait_ms=300, min_bytes=2**20), timeout_s=REQUEST_TIMEOUT_S))
        await asyncio.sleep(0.05)
        long_poll.cancel()
        try:
            return await connection.send(api_versions(), timeout_s=REQUEST_TIMEOUT_S)
        finally:
            connection.close()

    response = run(scenario())

    assert type(response) is response_class(ApiKey.API_VERSIONS, 3)
    assert response.error_code == ErrorCode.none


def test_a_stopping_broker_closes_the_connection_and_the_pool_reconnects(odradek_broker):
    """EmbeddedBroker.restart stops the broker cleanly (its connections close) and starts it
    on a new port, as a broker that came back elsewhere."""

    async def scenario() -> tuple[BrokerConnection, BrokerConnection, Any]:
        pool = BrokerConnections(client_id=CLIENT_ID, connect_timeout_s=CONNECT_TIMEOUT_S)
        try:
            before = await pool.get(0, "127.0.0.1", odradek_broker.port)
            await asyncio.to_thread(odradek_broker.restart)
            await wait_until(lambda: before.closed)
            after = await pool.get(0, "127.0.0.1", odradek_broker.port)
            return before, after, await after.send(api_versions(), timeout_s=REQUEST_TIMEOUT_S)
        finally:
            pool.close_all()

    before, after, response = run(scenario())

    assert after is not before
    assert response.error_code == ErrorCode.none
    with pytest.raises(BrokerConnectionError):
        run(before.send(api_versions(), timeout_s=REQUEST_TIMEOUT_S))


def test_the_pool_reuses_a_live_connection_and_replaces_a_closed_one(odradek_broker):
    async def scenario() -> list[BrokerConnection]:
        pool = BrokerConnections(client_id=CLIENT_ID, connect_timeout_s=CONNECT_TIMEOUT_S)
        try:
            first = await pool.get(0, "127.0.0.1", odradek_broker.port)
            again = await pool.get(0, "127.0.0.1", odradek_broker.port)
            first.close()
            replaced = await pool.get(0, "127.0.0.1", odradek_broker.port)
            await replaced.send(api_versions(), timeout_s=REQUEST_TIMEOUT_S)
            return [first, again, replaced]
        finally:
            pool.close_all()

    first, again, replaced = run(scenario())

    assert again is first
    assert replaced is not first
    assert replaced.closed, "close_all closes every connection"


# -- connection failures -------------------------------------------------------------------


def test_connecting_to_a_closed_port_raises_a_connection_error_naming_it():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]

    with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}"):
        run(connect(port))


async def wait_until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.01)


Peer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> int:
    """Reads one request frame; returns its correlation id."""
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    return peek_header(await reader.readexactly(size))[2]


def api_versions_response() -> Any:
    return build(response_class(ApiKey.API_VERSIONS, 3), error_code=0, api_keys=[],
                 throttle_time=0)


async def against_fake_peer(peer: Peer, requests: int, **options: Any
                            ) -> tuple[list[Any], BrokerConnection]:
    """Sends ``requests`` ApiVersions requests at once to a server running ``peer``; returns
    what each send raised or returned, and the connection."""
    server = await asyncio.start_server(peer, "127.0.0.1", 0)
    try:
        connection = await connect(server.sockets[0].getsockname()[1], **options)
        outcomes = await asyncio.gather(
            *(connection.send(api_versions(), timeout_s=REQUEST_TIMEOUT_S)
              for _ in range(requests)),
            return_exceptions=True)
        return outcomes, connection
    finally:
        server.close()


def test_a_peer_hanging_up_fails_every_request_in_flight():
    async def hang_up_after_three(reader, writer) -> None:
        for _ in range(3):
            await read_request(reader)
        writer.close()

    outcomes, connection = run(against_fake_peer(hang_up_after_three, 3))

    assert all(isinstance(outcome, BrokerConnectionError) for outcome in outcomes), outcomes
    assert "closed by the broker" in str(outcomes[0])
    assert connection.closed


def test_a_response_with_the_wrong_correlation_id_closes_the_connection():
    async def answer_the_wrong_request(reader, writer) -> None:
        correlation_id = await read_request(reader)
        await read_request(reader)
        writer.write(encode_response(correlation_id + 1, api_versions_response()))
        await reader.read()  # until the client hangs up

    outcomes, connection = run(against_fake_peer(answer_the_wrong_request, 2))

    assert all(isinstance(outcome, BrokerConnectionError) for outcome in outcomes), outcomes
    assert "correlation id" in str(outcomes[0])
    assert connection.closed


def test_a_response_frame_over_the_limit_closes_the_connection():
    async def answer_too_much(reader, writer) -> None:
        await read_request(reader)
        writer.write(_SIZE.pack(1025))
        await reader.read()

    [refused], connection = run(against_fake_peer(answer_too_much, 1, max_response_bytes=1024))

    assert isinstance(refused, BrokerConnectionError)
    assert "larger than 1024 bytes" in str(refused)
    assert connection.closed
