"""The three workloads, run with confluent-kafka (librdkafka) against any bootstrap address.

Each function returns a plain dict of numbers (JSON-ready) and raises on failure.
"""

from __future__ import annotations

import os
import signal
import struct
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

MB = 1_000_000  # MB/s are 10^6 bytes of record values per second

# The client settings of each workload (recorded in the results with the numbers).
THROUGHPUT_PRODUCER = {
    "acks": 1,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "none",
    # Keyless records go to a random partition each, spread evenly over the six, and no
    # per-record Python work picks it (a partition= argument costs ~25% of the client's
    # enqueue rate). librdkafka's default sticky partitioner would instead pile a short
    # run onto a few partitions.
    "sticky.partitioning.linger.ms": 0,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "delivery.report.only.error": True,
}
# librdkafka stops fetching a partition for fetch.queue.backoff.ms (default 1000 ms) once its
# local queue holds queued.min.messages (100,000). With the default the consumer idles most of
# each second and reads ~160k records/s from ANY broker. With 0 its broker thread re-checks the
# full queue in a busy loop (poll with a zero timeout, clock_gettime, a lock per partition),
# which took a fifth of the client's CPU away from the application thread. 10 ms is far
# shorter than the 100,000 records take to drain, and ends the spin (bench/README.md).
CONSUMER_QUEUE_BACKOFF_MS = 10
THROUGHPUT_CONSUMER = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "fetch.queue.backoff.ms": CONSUMER_QUEUE_BACKOFF_MS,
}
LATENCY_PRODUCER = {
    "acks": 1,
    "linger.ms": 0,
    "socket.nagle.disable": True,
    "delivery.report.only.error": True,
}
LATENCY_CONSUMER = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "fetch.wait.max.ms": 100,
    "fetch.min.bytes": 1,
    "socket.nagle.disable": True,
}


def _group_id() -> str:
    return f"bench-{uuid.uuid4().hex[:8]}"  # librdkafka requires one; assign() never joins it


@dataclass(frozen=True)
class Settings:
    records: int = 2_000_000
    record_size: int = 100
    partitions: int = 6
    latency_seconds: float = 10.0
    latency_rate: int = 2_000
    stall_seconds: float = 30.0  # give up when no progress is made for this long


class WorkloadError(RuntimeError):
    pass


# Set by the harness's SIGINT/SIGTERM handler. The handler also raises KeyboardInterrupt, but
# librdkafka callbacks (on_delivery, error_cb) run inside flush()/poll() and swallow it, so the
# long loops check this too.
STOP = threading.Event()


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM set STOP and raise KeyboardInterrupt, once: a second signal
    during the cleanup does not interrupt it."""
    def handler(signum, _frame):
        if STOP.is_set():
            return
        STOP.set()
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def check_stop() -> None:
    if STOP.is_set():
        raise KeyboardInterrupt("stop requested")


def make_payloads(count: int, size: int) -> list[bytes]:
    """``count`` random values of ``size`` bytes, generated before anything is timed."""
    blob = os.urandom(count * size)
    return [blob[i : i + size] for i in range(0, count * size, size)]


# Where the workloads connect: a bootstrap address, or a librdkafka configuration holding
# ``bootstrap.servers`` and the listener's security settings (TLS, SASL: bench.security).
Bootstrap = str | Mapping[str, str]


def connection(bootstrap: Bootstrap | None) -> dict[str, str]:
    """The librdkafka settings that reach ``bootstrap`` (none: a mock cluster's client)."""
    if bootstrap is None:
        return {}
    return {"bootstrap.servers": bootstrap} if isinstance(bootstrap, str) else dict(bootstrap)


def unique_topic(kind: str) -> str:
    return f"bench-{kind}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: Bootstrap, topic: str, partitions: int, timeout: float = 30.0,
                 replication_factor: int = 1, config: dict[str, str] | None = None) -> None:
    """CreateTopics, then wait until every partition has a leader."""
    admin = AdminClient(connection(bootstrap))
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                  config=config or {})],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    futures[topic].result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        ready = (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 and p.error is None for p in meta.partitions.values())
        )
        if ready:
            return
        if time.monotonic() > deadline:
            raise WorkloadError(f"topic {topic} not ready after {timeout:.0f}s: {meta}")
        time.sleep(0.1)


class ClientErrors:
    """Collects client-level errors (error_cb) and failed deliveries without per-record cost."""

    def __init__(self) -> None:
        self.client: list[str] = []
        self.failed_deliveries = 0
        self.first_delivery_error: str | None = None

    def on_error(self, err) -> None:
        self.client.append(str(err))

    def on_delivery(self, err, _msg) -> None:
        # Only called for failures: delivery.report.only.error=true.
        if err is not None:
            self.failed_deliveries += 1
            if self.first_delivery_error is None:
                self.first_delivery_error = str(err)


def _produce_blocking(produce, poll, topic: str, value: bytes) -> int:
    """Retry ``produce`` until the local queue has room; returns how many times it waited."""
    waits = 0
    while True:
        try:
            produce(topic, value)
            return waits
        except BufferError:
            waits += 1
            # poll() serves delivery reports (freeing queue slots); a short timeout instead of
            # poll(0) keeps a spinning producer from stealing CPU from the broker on a small box.
            poll(0.001)


def producer_with_errors(bootstrap: Bootstrap | None,
                         settings: dict) -> tuple[Producer, ClientErrors]:
    """A producer with ``settings`` whose delivery and client errors are collected."""
    errors = ClientErrors()
    producer = Producer({**connection(bootstrap), **settings,
                         "on_delivery": errors.on_delivery, "error_cb": errors.on_error})
    return producer, errors


def produce_throughput(bootstrap: Bootstrap, s: Settings, payloads: list[bytes],
                       replication_factor: int = 1, acks: int = 1) -> dict:
    """``payloads`` into a new topic of ``s.partitions`` partitions with THROUGHPUT_PRODUCER,
    whose ``acks`` (-1: all) may be overridden; for the replicated cluster (bench.cluster)."""
    topic = unique_topic("throughput")
    create_topic(bootstrap, topic, s.partitions, replication_factor=replication_factor)
    client_config = {**THROUGHPUT_PRODUCER, "acks": acks}
    producer, errors = producer_with_errors(bootstrap, client_config)
    return {"topic": topic, **timed_produce(producer, errors, topic, payloads),
            "client_config": client_config}


def client_ceiling(s: Settings, payloads: list[bytes]) -> dict:
    """``payloads`` produced as by :func:`produce_throughput`, to librdkafka's built-in mock
    cluster in this process (``test.mock.num.brokers``): what this client reaches when the
    broker costs it nothing on the network and nothing in another process."""
    topic = unique_topic("ceiling")
    producer, errors = producer_with_errors(None, {
        **THROUGHPUT_PRODUCER, "test.mock.num.brokers": 1, "test.mock.broker.rtt": 0})
    return {"topic": topic, **timed_produce(producer, errors, topic, payloads),
            "client_config": THROUGHPUT_PRODUCER}


def timed_produce(producer: Producer, errors: ClientErrors, topic: str,
                  payloads: list[bytes]) -> dict:
    """The time from the first ``produce()`` of ``payloads`` to the end of ``flush()``."""
    producer.list_topics(topic, timeout=10)  # metadata + connection before the clock starts
    produce, poll = producer.produce, producer.poll
    waits = 0

    t0 = time.perf_counter()
    for value in payloads:
        try:
            produce(topic, value)
        except BufferError:
            waits += _produce_blocking(produce, poll, topic, value)
    t_enqueued = time.perf_counter()
    remaining = producer.flush(max(60.0, len(payloads) / 20_000))
    t1 = time.perf_counter()
    check_stop()

    if remaining:
        raise WorkloadError(f"flush timed out with {remaining} records undelivered")
    if errors.failed_deliveries:
        raise WorkloadError(
            f"{errors.failed_deliveries} records failed: {errors.first_delivery_error}"
        )
    seconds = t1 - t0
    count = len(payloads)
    size = sum(map(len, payloads[:1000])) / min(1000, count)
    return {
        "records": count,
        "seconds": seconds,
        "records_per_s": count / seconds,
        "mb_per_s": count * size / MB / seconds,
        "enqueue_seconds": t_enqueued - t0,
        "queue_full_waits": waits,
        "client_errors": errors.client[:10],
    }


def consume_throughput(bootstrap: Bootstrap, s: Settings, topic: str, expected: int) -> dict:
    errors = ClientErrors()
    consumer = Consumer(
        {
            **connection(bootstrap),
            "group.id": _group_id(),
            **THROUGHPUT_CONSUMER,
            "error_cb": errors.on_error,
        }
    )
    try:
        # Informational only: Tansu 0.6's ListOffsets(latest) answers the last batch's base
        # offset + 1, not the log end offset, so the sum undercounts there.
        stored = 0
        for p in range(s.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            stored += high - low

        received = 0
        message_errors: list[str] = []
        error_of = Message.error
        t0 = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(s.partitions)])
        last_progress = t0
        while received < expected:
            check_stop()
            # Never ask for more than is left: consume() waits for a full batch or the timeout,
            # which would add up to 1 s of idle time to the last batch.
            batch = consumer.consume(num_messages=min(10_000, expected - received), timeout=1)
            now = time.perf_counter()
            if batch:
                if any(map(error_of, batch)):
                    bad = [m for m in batch if m.error() is not None]
                    message_errors += [str(m.error()) for m in bad[:5]]
                    received -= len(bad)
                received += len(batch)
                last_progress = now
            elif now - last_progress > s.stall_seconds:
                raise WorkloadError(
                    f"no records for {s.stall_seconds:.0f}s after {received}/{expected}; "
                    f"errors: {(message_errors + errors.client)[:5]}"
                )
        t1 = time.perf_counter()
        sample = batch[-1].value()
    finally:
        consumer.close()

    if sample is None or len(sample) != s.record_size:
        raise WorkloadError(f"last record has {len(sample or b'')} bytes, not {s.record_size}")
    seconds = t1 - t0
    return {
        "records": received,
        "watermark_records": stored,
        "seconds": seconds,
        "records_per_s": received / seconds,
        "mb_per_s": received * s.record_size / MB / seconds,
        "message_errors": message_errors[:10],
        "client_errors": errors.client[:10],
        "client_config": THROUGHPUT_CONSUMER,
    }


# --------------------------------------------------------------------------- latency

_HEADER = struct.Struct(">QB")  # send time (monotonic ns), kind
_MEASURED, _WARMUP = 0, 1


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, int(-(-q * len(sorted_values) // 100)))  # ceil(q/100 * n)
    return sorted_values[min(rank, len(sorted_values)) - 1]


class _LatencyConsumer(threading.Thread):
    def __init__(self, bootstrap: Bootstrap, topic: str, partitions: int):
        super().__init__(name="latency-consumer", daemon=True)
        self.errors = ClientErrors()
        self.consumer = Consumer(
            {
                **connection(bootstrap),
                "group.id": _group_id(),
                **LATENCY_CONSUMER,
                "error_cb": self.errors.on_error,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.latencies_ns: list[int] = []
        self.warm = threading.Event()
        self.stop = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        # poll(), one record at a time: it returns as soon as a record is there, whereas
        # consume(num_messages=N, timeout=T) waits for N records or T and would add up to T
        # of client-side batching to every latency.
        poll, clock, unpack = self.consumer.poll, time.monotonic_ns, _HEADER.unpack_from
        append = self.latencies_ns.append
        try:
            while not self.stop.is_set():
                msg = poll(0.1)
                if msg is None:
                    continue
                now = clock()
                if msg.error() is not None:
                    self.errors.on_error(msg.error())
                    continue
                sent, kind = unpack(msg.value())
                if kind == _MEASURED:
                    append(now - sent)
                else:
                    self.warm.set()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            self.failure = exc
        finally:
            self.consumer.close()


def end_to_end_latency(bootstrap: Bootstrap, s: Settings,
                       topic: str | None = None) -> dict:
    """Records at ``s.latency_rate`` into ``topic`` (of ``s.partitions`` partitions; a new
    one when None), each timed from its send to its arrival at a consumer."""
    if topic is None:
        topic = unique_topic("latency")
        create_topic(bootstrap, topic, s.partitions)
    producer, errors = producer_with_errors(bootstrap, LATENCY_PRODUCER)
    pad = os.urandom(s.record_size - _HEADER.size)
    pack, clock = _HEADER.pack, time.monotonic_ns
    reader = _LatencyConsumer(bootstrap, topic, s.partitions)
    reader.start()
    try:
        # Warm up: connections, metadata and the consumer's fetch loop, not measured.
        deadline = time.monotonic() + 30
        while not reader.warm.is_set():
            check_stop()
            if time.monotonic() > deadline or reader.failure is not None:
                raise WorkloadError(f"consumer never saw a warm-up record: {reader.failure}")
            producer.produce(topic, pack(clock(), _WARMUP) + pad)
            producer.poll(0)
            reader.warm.wait(0.05)
        time.sleep(0.2)  # let in-flight warm-up records drain

        total = max(1, int(s.latency_rate * s.latency_seconds))
        period_ns = 1_000_000_000 // s.latency_rate
        produce, poll = producer.produce, producer.poll
        start = clock() + 1_000_000
        max_behind_ns = 0
        for i in range(total):
            due = start + i * period_ns
            now = clock()
            if due > now:
                time.sleep((due - now) / 1e9)
                now = clock()
            max_behind_ns = max(max_behind_ns, now - due)
            if STOP.is_set():
                check_stop()
            produce(topic, pack(now, _MEASURED) + pad)
            poll(0)
        send_seconds = (clock() - start) / 1e9
        remaining = producer.flush(30)

        deadline = time.monotonic() + 10
        while len(reader.latencies_ns) < total and time.monotonic() < deadline:
            check_stop()
            if reader.failure is not None:
                break
            time.sleep(0.01)
    finally:
        reader.stop.set()
        reader.join(10)

    if reader.failure is not None:
        raise WorkloadError(f"consumer thread failed: {reader.failure!r}")
    if remaining or errors.failed_deliveries:
        raise WorkloadError(
            f"{remaining} undelivered, {errors.failed_deliveries} failed: "
            f"{errors.first_delivery_error}"
        )
    lat_ms = sorted(ns / 1e6 for ns in reader.latencies_ns)
    if not lat_ms:
        raise WorkloadError("no measured record came back")
    return {
        "sent": total,
        "received": len(lat_ms),
        "lost": total - len(lat_ms),
        "rate_target": s.latency_rate,
        "rate_achieved": total / send_seconds,
        "max_send_behind_ms": max_behind_ns / 1e6,
        "p50_ms": _percentile(lat_ms, 50),
        "p99_ms": _percentile(lat_ms, 99),
        "p999_ms": _percentile(lat_ms, 99.9),
        "max_ms": lat_ms[-1],
        "mean_ms": sum(lat_ms) / len(lat_ms),
        "client_errors": (errors.client + reader.errors.client)[:10],
        "client_config": {"producer": LATENCY_PRODUCER, "consumer": LATENCY_CONSUMER},
    }
