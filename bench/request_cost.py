"""What one request costs the broker's Python, without the network: a single-record produce
and a six-partition fetch, each replayed through the broker's dispatcher.

    .venv/bin/python -m bench.request_cost [--requests 20000] [--runs 5]

A broker runs in this process (``EmbeddedBroker``). confluent-kafka sends it, over loopback,
the requests the small-request and latency rows send:

- produce: one 100-byte record, acks=1, no idempotence (``linger.ms=0``,
  ``batch.num.messages=1``: what ``rdkafka_performance`` sends in the small-request row);
- fetch: six partitions of which one holds a record, read_committed (librdkafka's default):
  what a caught-up consumer sends in the latency row, where the fetch answers at once.

The frames of the last such request are kept and then handed to the dispatcher
``--requests`` times in a row on the broker's loop, as the connection would hand them: parse,
handle, encode, but no socket. The CPU time of each run (``time.process_time``) divided by the
requests is the figure; the median of ``--runs`` is printed with the min and max. Replaying
the produce frame appends its record again each time; replaying the fetch frame reads the
same record each time.

The gap between these figures and the broker CPU per request of the small-request row
(``bench.c_client``) is what the socket costs: reading the frame and writing the answer.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import confluent_kafka

from odradek.protocol.api import ApiKey
from odradek.security.principal import ANONYMOUS
from odradek.server.dispatcher import Dispatcher
from odradek.server.request_context import ConnectionContext
from odradek.testing.embedded import EmbeddedBroker

RECORD = b"x" * 100
PARTITIONS = 6
POLL_TIMEOUT_SECONDS = 10


def captured_frames(broker: EmbeddedBroker, api_key: ApiKey, send: Callable[[], None]
                    ) -> list[bytes]:
    """The frames of ``api_key`` the broker receives while ``send`` runs."""
    frames: list[bytes] = []
    dispatch = Dispatcher.__call__

    def keep(dispatcher: Dispatcher, frame: bytes, connection: ConnectionContext):
        if int.from_bytes(frame[:2], "big") == api_key:
            frames.append(bytes(frame))
        return dispatch(dispatcher, frame, connection)

    Dispatcher.__call__ = keep  # type: ignore[method-assign]
    try:
        send()
    finally:
        Dispatcher.__call__ = dispatch  # type: ignore[method-assign]
    if not frames:
        raise RuntimeError(f"the client sent no {api_key.name} request")
    return frames


def produce_frame(broker: EmbeddedBroker) -> bytes:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0,
        "batch.num.messages": 1, "acks": 1, "enable.idempotence": False})

    def send() -> None:
        producer.produce("request-cost-produce", RECORD)
        if producer.flush(POLL_TIMEOUT_SECONDS):
            raise RuntimeError("the record was not delivered")

    send()  # the topic is created, the metadata known: the next request is a plain one
    return captured_frames(broker, ApiKey.PRODUCE, send)[-1]


def fetch_frame(broker: EmbeddedBroker) -> bytes:
    topic = "request-cost-fetch"
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topic, RECORD, partition=0)
    if producer.flush(POLL_TIMEOUT_SECONDS):
        raise RuntimeError("the record was not delivered")
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap_servers, "group.id": "request-cost",
        "fetch.wait.max.ms": 100, "fetch.min.bytes": 1})

    def send() -> None:
        consumer.assign([confluent_kafka.TopicPartition(topic, partition, 0)
                         for partition in range(PARTITIONS)])
        message = consumer.poll(POLL_TIMEOUT_SECONDS)
        if message is None or message.error() is not None or message.value() != RECORD:
            raise RuntimeError(f"the consumer did not read the record: {message}")

    try:
        # The first fetch, which found the record, is the one to replay.
        return captured_frames(broker, ApiKey.FETCH, send)[0]
    finally:
        consumer.close()


def cost_per_request(broker: EmbeddedBroker, frame: bytes, requests: int) -> float:
    """CPU microseconds per request of handing ``frame`` to the dispatcher ``requests``
    times, as a plaintext client of the first listener."""
    config = broker.broker.config
    listener = config.listeners[0].name
    connection = ConnectionContext(listener, config.listener_security_protocol_map[listener],
                                   ANONYMOUS, ("127.0.0.1", 0))
    dispatcher = broker.broker.dispatcher

    async def replay() -> float:
        started = time.process_time()
        for _ in range(requests):
            dispatcher(frame, connection)
        return (time.process_time() - started) / requests * 1e6

    return broker.call(replay())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.request_cost",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with EmbeddedBroker(Path(tempfile.mkdtemp(prefix="bench-request-cost-")),
                        num_partitions=PARTITIONS) as broker:
        frames = {"produce, 1 record": produce_frame(broker),
                  f"fetch, {PARTITIONS} partitions, 1 record": fetch_frame(broker)}
        for name, frame in frames.items():
            costs = [cost_per_request(broker, frame, args.requests) for _ in range(args.runs)]
            median = statistics.median(costs)
            print(f"{name}: {median:.1f} µs of CPU per request ({min(costs):.1f}-"
                  f"{max(costs):.1f} over {args.runs} runs of {args.requests:,}), "
                  f"{1e6 / median:,.0f} requests per CPU-second", flush=True)


if __name__ == "__main__":
    sys.exit(main())
