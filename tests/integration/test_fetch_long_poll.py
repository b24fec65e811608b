"""Fetch long polls with real consumers (Kafka's DelayedFetch, KIP-74).

A fetch that has less than fetch.min.bytes waits in the broker for up to fetch.max.wait.ms;
an append that brings enough data answers it at once, not at its timeout. Size limits never
hold a consumer back: a batch larger than them is still returned whole.

The waiting tests use the clients whose consumer can be seen to be positioned before the
produce; kcat is librdkafka, as confluent-kafka is.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build
from odradek.protocol.records import Record, build_batch
from odradek.protocol.topic_partition import TopicPartition

MAX_WAIT_MS = 5_000
# Well under MAX_WAIT_MS: an answer this fast came from the append, not from the timeout.
WOKEN_BY_APPEND_SECONDS = 2.0
# Long enough for the consumer's fetch to be waiting in the broker.
FETCH_IN_FLIGHT_SECONDS = 0.5

waiting_clients = pytest.mark.clients("confluent-kafka", "kafka-python", "aiokafka")


@waiting_clients
def test_long_poll_on_an_empty_partition_is_answered_by_the_next_append(
        client, bootstrap, create_topic, consuming):
    topic = create_topic("quiet")
    config = {"fetch.max.wait.ms": MAX_WAIT_MS, "fetch.min.bytes": 1}

    with consuming(client, bootstrap, topic, 1, start=0, config=config) as consumed:
        time.sleep(FETCH_IN_FLIGHT_SECONDS)
        produced_at = time.monotonic()
        client.produce(bootstrap, topic, [{"key": b"k", "value": b"wake up"}])

    [message] = consumed.result()
    assert message.value == b"wake up"
    assert message.received_at - produced_at < WOKEN_BY_APPEND_SECONDS


@waiting_clients
def test_fetch_waits_until_min_bytes_have_arrived(client, bootstrap, create_topic, consuming):
    topic = create_topic("trickle")
    config = {"fetch.max.wait.ms": MAX_WAIT_MS, "fetch.min.bytes": 10_000}
    small = {"key": b"small", "value": b"s" * 100}
    large = {"key": b"large", "value": b"l" * 20_000}

    with consuming(client, bootstrap, topic, 2, start=0, config=config) as consumed:
        time.sleep(FETCH_IN_FLIGHT_SECONDS)
        client.produce(bootstrap, topic, [small])
        time.sleep(FETCH_IN_FLIGHT_SECONDS)
        enough_at = time.monotonic()
        client.produce(bootstrap, topic, [large])

    first, second = consumed.result()
    assert [first.as_sent(), second.as_sent()] == [small, large]
    assert first.received_at >= enough_at, "answered before fetch.min.bytes had arrived"
    assert second.received_at - enough_at < WOKEN_BY_APPEND_SECONDS


def test_a_batch_larger_than_the_fetch_size_limits_is_returned_whole(
        client, bootstrap, create_topic):
    """librdkafka raises fetch.max.bytes to at least message.max.bytes by itself;
    max.partition.fetch.bytes is the limit every client sends as asked."""
    topic = create_topic("large-records")
    records = [{"key": b"large", "value": b"x" * 200_000}, {"key": b"small", "value": b"y"}]
    config = {"max.partition.fetch.bytes": 1024, "fetch.max.bytes": 1024}

    client.produce(bootstrap, topic, records)
    consumed = client.consume(bootstrap, topic, len(records), config=config)

    assert [m.as_sent() for m in consumed] == records


def test_an_append_between_the_fetch_read_and_its_long_poll_answers_it(
        odradek_broker, create_topic):
    """The lost wakeup real clients hit only by chance, made certain by driving the Fetch
    handler on the broker's loop: the handler finds no data and returns its long poll, which
    starts one loop iteration later; a Produce read from another connection in between
    appends. The long poll must see that record, not wait out max_wait."""
    topic = create_topic("raced")
    fetch = build(request_class(ApiKey.FETCH, 12), replica_id=-1, max_wait=MAX_WAIT_MS,
                  min_bytes=1, max_bytes=2**20, isolation_level=0, session_id=0,
                  session_epoch=-1, forgotten_topics_data=(), rack_id="", topics=[{
                      "topic": topic, "partitions": [{
                          "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                          "last_fetched_epoch": -1, "log_start_offset": -1,
                          "partition_max_bytes": 2**20}]}])
    broker = odradek_broker.broker

    async def fetch_with_an_append_in_between() -> tuple[float, bytes]:
        long_poll = odradek_broker.handle(ApiKey.FETCH, 12, fetch)
        broker.replica_manager.append_records(
            {TopicPartition(topic, 0): bytearray(build_batch([Record(0, 0, b"k", b"v")]))},
            acks=1, timeout_ms=1_000, respond=lambda _: None)
        started = time.monotonic()
        response = await asyncio.wait_for(long_poll, MAX_WAIT_MS / 1000 * 2)
        return time.monotonic() - started, response.responses[0].partitions[0].records

    waited, records = odradek_broker.call(fetch_with_an_append_in_between())

    assert records, "the long poll answered without the appended record"
    assert waited < WOKEN_BY_APPEND_SECONDS
