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

A third line is a yardstick, not a broker: the same produce frame through the least work
that still answers it (``produce_floor``), to show how much of the produce is this
interpreter's floor and how much is the broker's own checks and bookkeeping.

Two more lines replay the produce frame, to the broker and to the floor, with the thread
asleep for half a millisecond before each request, and count only the requests' own CPU
time: what a request that arrives on its own costs, once the core's caches and branch
predictors have gone cold while the thread slept. That is how requests come in the latency
and many-clients rows, one at a time on many connections, rather than pipelined on one.

``--socket REQUESTS`` measures both through the socket as well: ``rdkafka_performance``
sends the small-request row's load, REQUESTS single-record produce requests, to the
broker and, in alternate runs, to ``produce_floor`` answering in the broker's place.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
from kio.schema.errors import ErrorCode

from bench import workloads
from bench.c_client import DEFAULT_TOOL, SINGLE_RECORD, find_tool, produced, run_tool
from odradek.protocol.api import ApiKey, response_class
from odradek.protocol.framing import encode_response, parse_request
from odradek.protocol.messages import build
from odradek.protocol.records import RecordBatch
from odradek.security.principal import ANONYMOUS
from odradek.server.dispatcher import Dispatcher
from odradek.server.request_context import ConnectionContext
from odradek.testing.embedded import EmbeddedBroker

RECORD = b"x" * 100
PARTITIONS = 6
POLL_TIMEOUT_SECONDS = 10
# The gap before each request of the paused replay: what a request arriving on its own
# finds (2,000 a second, the latency row's pace), caches and branch predictors gone cold
# while the thread slept. A tenth of --requests keeps the run short.
PAUSE_S = 0.0005
PAUSED_SHARE = 10


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


def cpu_per_call(call: Callable[[], object], calls: int, pause_s: float = 0.0) -> float:
    """CPU microseconds per ``call()``, made ``calls`` times in a row on this thread. With
    ``pause_s`` the thread sleeps that long before each call, as a broker's loop does
    between requests that arrive one at a time, and only the calls' own CPU time counts."""
    if not pause_s:
        started = time.process_time()
        for _ in range(calls):
            call()
        return (time.process_time() - started) / calls * 1e6
    spent = 0.0
    for _ in range(calls):
        time.sleep(pause_s)
        started = time.thread_time()
        call()
        spent += time.thread_time() - started
    return spent / calls * 1e6


def cost_per_request(broker: EmbeddedBroker, frame: bytes, requests: int,
                     pause_s: float = 0.0) -> float:
    """CPU microseconds per request of handing ``frame`` to the dispatcher ``requests``
    times on the broker's loop, as a plaintext client of the first listener (``pause_s``:
    see :func:`cpu_per_call`)."""
    config = broker.broker.config
    listener = config.listeners[0].name
    connection = ConnectionContext(listener, config.listener_security_protocol_map[listener],
                                   ANONYMOUS, ("127.0.0.1", 0))
    dispatcher = broker.broker.dispatcher

    async def replay() -> float:
        return cpu_per_call(lambda: dispatcher(frame, connection), requests, pause_s)

    return broker.call(replay())


def produce_floor(sample: bytes, fd: int) -> Callable[[bytes], bytearray]:
    """The least work that answers a single-partition produce shaped like ``sample``:
    parsed as the dispatcher parses it, its batch's header read and its CRC checked,
    stamped with an offset and a leader epoch and written to ``fd``, and the answer packed
    into a response encoded in advance. A yardstick, not a broker: none of the rest a
    broker does is here (no topic or leadership lookup, no validation beyond the CRC, no
    producer state, roll, index, leader-epoch cache, high watermark, quotas, delayed
    operations or response building)."""
    request = parse_request(sample)
    if len(request.body.topic_data) != 1 or len(request.body.topic_data[0].partition_data) != 1:
        raise ValueError("the yardstick answers a single-partition produce only")
    topic = request.body.topic_data[0]
    # The answer, encoded once with a marker in place of the base offset: each request
    # then packs its correlation id and offset into a copy.
    marker = 0x0DDBA11_CAFEF00D
    template = encode_response(request.correlation_id, build(
        response_class(ApiKey.PRODUCE, request.api_version), throttle_time=0, responses=[{
            "name": topic.name, "partition_responses": [{
                "index": topic.partition_data[0].index, "error_code": ErrorCode.none,
                "base_offset": marker, "log_append_time": -1, "log_start_offset": 0,
                "record_errors": []}]}]))
    offset_at = template.find(marker.to_bytes(8, "big"))
    log_end_offset = 0

    def answer(frame: bytes) -> bytearray:
        nonlocal log_end_offset
        request = parse_request(frame)
        records = bytearray(request.body.topic_data[0].partition_data[0].records)
        batch = RecordBatch(records)
        if not batch.is_valid_crc():
            raise ValueError("corrupt batch")
        base_offset = log_end_offset
        batch.set_base_offset(base_offset)
        batch.set_partition_leader_epoch(0)
        os.write(fd, records)
        log_end_offset = batch.next_offset
        response = bytearray(template)
        response[4:8] = request.correlation_id.to_bytes(4, "big")
        response[offset_at:offset_at + 8] = base_offset.to_bytes(8, "big")
        return response

    return answer


def floor_cost_per_request(frame: bytes, requests: int, pause_s: float = 0.0) -> float:
    """CPU microseconds per request of answering the produce ``frame`` ``requests`` times
    with the least work (``produce_floor``; ``pause_s``: see :func:`cpu_per_call`)."""
    with tempfile.TemporaryFile(prefix="bench-request-floor-") as log:
        answer = produce_floor(frame, log.fileno())
        return cpu_per_call(lambda: answer(frame), requests, pause_s)


def through_the_socket(broker: EmbeddedBroker, tool: Path, requests: int, runs: int
                       ) -> dict[str, list[float]]:
    """CPU microseconds per request of the small-request row's load (``rdkafka_performance``
    sending ``requests`` single-record produce requests to one partition), answered by the
    broker and, in alternate runs, by ``produce_floor`` in the broker's place: this
    process's CPU time (the broker's thread; the tool runs in its own process) per request."""
    topic = "request-cost-socket"
    workloads.create_topic(broker.bootstrap_servers, topic, 1)

    def send(count: int) -> None:
        produced(run_tool(tool, broker.bootstrap_servers, [
            "-P", "-t", topic, "-p", "0", "-s", str(len(RECORD)), "-c", str(count),
            *SINGLE_RECORD]), count)

    sample = captured_frames(broker, ApiKey.PRODUCE, lambda: send(10))[-1]
    dispatch = Dispatcher.__call__
    costs: dict[str, list[float]] = {"the broker": [], "the floor": []}
    with tempfile.TemporaryFile(prefix="bench-request-floor-") as log:
        answer = produce_floor(sample, log.fileno())

        def floor(dispatcher: Dispatcher, frame: bytes, connection: ConnectionContext):
            if int.from_bytes(frame[:2], "big") == ApiKey.PRODUCE:
                return [answer(frame)]
            return dispatch(dispatcher, frame, connection)

        for _ in range(runs):
            for name, handler in (("the broker", dispatch), ("the floor", floor)):
                Dispatcher.__call__ = handler  # type: ignore[method-assign]
                try:
                    started = time.process_time()
                    send(requests)
                    costs[name].append((time.process_time() - started) / requests * 1e6)
                finally:
                    Dispatcher.__call__ = dispatch  # type: ignore[method-assign]
    return costs


def report(name: str, costs: list[float], requests: int) -> None:
    median = statistics.median(costs)
    print(f"{name}: {median:.1f} µs of CPU per request ({min(costs):.1f}-{max(costs):.1f} "
          f"over {len(costs)} runs of {requests:,}), {1e6 / median:,.0f} requests per "
          f"CPU-second", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.request_cost",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--socket", type=int, metavar="REQUESTS", default=0,
                        help="also send REQUESTS single-record produce requests through the "
                             "socket with rdkafka_performance, to the broker and to the floor, "
                             "--runs times each")
    parser.add_argument("--tool", type=Path, help="rdkafka_performance for --socket "
                        f"(default {DEFAULT_TOOL})")
    args = parser.parse_args()
    tool = find_tool(args.tool) if args.socket else None
    if args.socket and tool is None:
        parser.error(f"no {DEFAULT_TOOL}: `make bench-tools` builds it, or give --tool")
    with EmbeddedBroker(Path(tempfile.mkdtemp(prefix="bench-request-cost-")),
                        num_partitions=PARTITIONS) as broker:
        produce, fetch = produce_frame(broker), fetch_frame(broker)
        paused = max(1, args.requests // PAUSED_SHARE)
        idle = f"each after {PAUSE_S * 1e3:g} ms idle"
        # name -> (requests per run, one run's CPU microseconds per request)
        measures: dict[str, tuple[int, Callable[[], float]]] = {
            "produce, 1 record": (
                args.requests, lambda: cost_per_request(broker, produce, args.requests)),
            f"fetch, {PARTITIONS} partitions, 1 record": (
                args.requests, lambda: cost_per_request(broker, fetch, args.requests)),
            "produce, 1 record, the floor (a yardstick, not a broker)": (
                args.requests, lambda: floor_cost_per_request(produce, args.requests)),
            f"produce, 1 record, {idle}": (
                paused, lambda: cost_per_request(broker, produce, paused, PAUSE_S)),
            f"produce, 1 record, the floor, {idle}": (
                paused, lambda: floor_cost_per_request(produce, paused, PAUSE_S)),
        }
        for name, (requests, measure) in measures.items():
            report(name, [measure() for _ in range(args.runs)], requests)
        if tool is not None:
            for name, costs in through_the_socket(broker, tool, args.socket, args.runs).items():
                report(f"produce through the socket, 1 record, {name}", costs, args.socket)


if __name__ == "__main__":
    sys.exit(main())
