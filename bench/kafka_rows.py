"""The rows every Kafka broker of the suite gets (odradek, Tansu), through confluent-kafka:
one and three producers, one consumer and three in a group, end-to-end latency at a fixed
rate, 1 MiB records, and what each costs the broker (CPU-seconds per million records and
resident memory).

The producers and consumers of the three-client rows are separate processes
(:mod:`bench.processes`), each preparing untimed (connecting, generating its values, joining
the group with its partitions paused) before one start signal.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition

from bench import workloads
from bench.brokers import Broker
from bench.processes import READY_TIMEOUT_S, ClientsRun, in_processes
from bench.rows import Row, Run, failed_run
from bench.workloads import (
    MB,
    THROUGHPUT_CONSUMER,
    THROUGHPUT_PRODUCER,
    Settings,
    WorkloadError,
)

THREE = 3
LARGE_RECORD = 1024 * 1024
# A 1 MiB value with its record and batch headers is over Kafka's default max.message.bytes
# (1 MiB + 12 bytes); the large-record topic allows two.
LARGE_TOPIC_CONFIG = {"max.message.bytes": str(2 * LARGE_RECORD)}
# A partition's fetch carries up to 16 MiB of them (fifteen: each is a little over 1 MiB
# with its headers) rather than one (the default max.partition.fetch.bytes is 1 MiB). A
# consumer has one fetch in flight per broker, and the gap between one response's end and
# the next one's start (the client's turn, then the broker's) is paid once per fetch. With
# the C client, in 8 interleaved rounds on one broker, 4 MiB fetches read a median 2,447
# MB/s, 8 MiB 2,886, 16 MiB 3,241 (3,021-3,384) and 32 MiB 3,333 (2,792-3,627).
LARGE_FETCH = {"max.partition.fetch.bytes": 16 * LARGE_RECORD,
               "fetch.max.bytes": 64 * LARGE_RECORD}
# A consumer process that reads nothing for this long has stopped.
STALL_S = 30.0


def with_broker_cost(broker: Broker, records: int, work: Callable[[], dict]) -> Run:
    """``work()``'s result as a run, with the broker's CPU-seconds spent meanwhile (its whole
    process tree, from /proc), per million records, and its RSS afterwards."""
    before = broker.cpu_now()
    result = work()
    cpu = broker.cpu_now() - before
    run: Run = {key: value for key, value in result.items()
                if isinstance(value, (int, float)) and not isinstance(value, bool)}
    run.update(broker_cpu_s=cpu, broker_cpu_s_per_m=cpu / records * 1e6,
               rss_mb=broker.rss_mb())
    return run


class Rows:
    """The rows of one system, filled run by run."""

    def __init__(self, system: str) -> None:
        self.system = system
        self.produce = Row("throughput", "one producer", system, "records/s")
        self.consume = Row("throughput", "one consumer", system, "records/s")
        self.produce_three = Row("throughput", "three producers", system, "records/s")
        self.consume_three = Row("throughput", "three consumers in a group", system,
                                 "records/s")
        self.latency = Row("latency", "end-to-end at 2,000 records/s", system, "ms",
                           higher_is_better=False, note="p50; p99, p99.9 and max beside it")
        self.large = Row("large records", "1 MiB records", system, "MB/s",
                         note="fetch; produce beside it")

    def all(self) -> list[Row]:
        return [self.produce, self.produce_three, self.consume, self.consume_three,
                self.latency, self.large]


def kafka_rows(running: list[Broker], settings: Settings, runs: int, quick: bool,
               progress: Callable[[str], None] = print) -> list[Row]:
    """Every row of the running brokers, each measured ``runs`` times: run by run, broker
    after broker, so that the machine drifting during the section weighs on all of them
    alike. Each broker is warmed up first with an untimed tenth of a run."""
    payloads = workloads.make_payloads(settings.records, settings.record_size)
    for broker in running:
        progress(f"{broker.name}: warming up")
        warm_up(broker, settings, payloads)
    rows = {broker.name: Rows(broker.name) for broker in running}
    for run in range(1, runs + 1):
        for broker in running:
            progress(f"{broker.name}: run {run} of {runs}")
            of = rows[broker.name]
            attempt(of.produce, of.consume, lambda: one_producer_then_consumer(
                broker, settings, payloads))
            attempt(of.produce_three, None, lambda: (three_producers(broker, settings), None))
            attempt(of.consume_three, None, lambda: (three_consumers(broker, settings), None))
            attempt(of.latency, None, lambda: (latency(broker, settings), None))
            attempt(of.large, None, lambda: (large_records(broker, 50 if quick else 200),
                                             None))
    return [row for of in rows.values() for row in of.all()]


def warm_up(broker: Broker, settings: Settings, payloads: list[bytes]) -> None:
    """An untimed tenth of a one-producer-then-consumer run: connections, metadata, and on
    a fresh broker __consumer_offsets, made before anything is measured."""
    one_producer_then_consumer(broker, settings, payloads[:max(1, len(payloads) // 10)])


def attempt(first: Row, second: Row | None,
            once: Callable[[], tuple[Run, Run | None]]) -> None:
    """One run of one or two rows (a consume run reads what its produce run wrote); a
    failure is recorded in both as one line."""
    try:
        one, other = once()
    except Exception as exc:  # a failed run is reported, not fatal
        one = other = failed_run(exc)
    first.runs.append(one)
    if second is not None and other is not None:
        second.runs.append(other)


def one_producer_then_consumer(broker: Broker, settings: Settings,
                               payloads: list[bytes]) -> tuple[Run, Run]:
    produced: dict = {}

    def produce() -> dict:
        produced.update(workloads.produce_throughput(broker.bootstrap, settings, payloads))
        return produced

    produce_run = with_broker_cost(broker, len(payloads), produce)
    produce_run["value"] = produce_run["records_per_s"]
    consume_run = with_broker_cost(broker, len(payloads), lambda: workloads.consume_throughput(
        broker.bootstrap, settings, produced["topic"], len(payloads)))
    consume_run["value"] = consume_run["records_per_s"]
    return produce_run, consume_run


def latency(broker: Broker, settings: Settings) -> Run:
    result = workloads.end_to_end_latency(broker.bootstrap, settings)
    return {"value": result["p50_ms"], **{key: result[key] for key in (
        "p99_ms", "p999_ms", "max_ms", "received", "rate_achieved")}}


# --------------------------------------------------------------------------- 1 MiB records


def large_records(broker: Broker, count: int) -> Run:
    """``count`` 1 MiB records into a one-partition topic, then read back by one consumer:
    MB/s each way, the fetch being the row's figure (what a broker's fetch path and socket
    writes reach, against the machine's loopback limit)."""
    topic = workloads.unique_topic("large")
    workloads.create_topic(broker.bootstrap, topic, 1, config=LARGE_TOPIC_CONFIG)
    payloads = workloads.make_payloads(count, LARGE_RECORD)
    producer, errors = workloads.producer_with_errors(broker.bootstrap, {
        "acks": 1, "linger.ms": 5, "message.max.bytes": 2 * LARGE_RECORD + 1024,
        "delivery.report.only.error": True})
    produced = workloads.timed_produce(producer, errors, topic, payloads)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic,
                         **THROUGHPUT_CONSUMER, **LARGE_FETCH})
    try:
        received = 0
        t0 = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = t0 + 120
        while received < count:
            if time.perf_counter() > deadline:
                raise WorkloadError(f"read {received} of {count} 1 MiB records in 120 s")
            for message in consumer.consume(min(64, count - received), timeout=1):
                if message.error() is not None:
                    raise WorkloadError(str(message.error()))
                received += 1
        seconds = time.perf_counter() - t0
    finally:
        consumer.close()
    return {"value": count * LARGE_RECORD / MB / seconds,
            "produce_mb_per_s": produced["mb_per_s"], "records": count}


# --------------------------------------------------------------------------- three clients


def three_producers(broker: Broker, settings: Settings) -> Run:
    """``settings.records`` into a new topic from three producer processes, a third each:
    records/s from the start signal until the last one's ``flush()`` returned."""
    topic = workloads.unique_topic("three-producers")
    workloads.create_topic(broker.bootstrap, topic, settings.partitions)
    share = settings.records // THREE
    clients = in_processes(broker, _producer,
                           [(broker.bootstrap, topic, share, settings.record_size)] * THREE)
    return clients_run(broker, clients)


def three_consumers(broker: Broker, settings: Settings) -> Run:
    """A topic of ``settings.records`` (as many in each partition) read by three consumer
    processes in one group, each reading its share of the partitions from the start
    signal to their end."""
    topic = workloads.unique_topic("three-consumers")
    workloads.create_topic(broker.bootstrap, topic, settings.partitions)
    per_partition = settings.records // settings.partitions
    fill_evenly(broker, topic, settings.partitions, workloads.make_payloads(
        per_partition * settings.partitions, settings.record_size))
    clients = in_processes(broker, _group_consumer, [
        (broker.bootstrap, topic, f"{topic}-group", settings.partitions // THREE,
         per_partition)] * THREE)
    if clients.records != per_partition * settings.partitions:
        raise WorkloadError(f"the group read {clients.records} of "
                            f"{per_partition * settings.partitions} records")
    return clients_run(broker, clients)


def fill_evenly(broker: Broker, topic: str, partitions: int, payloads: list[bytes]) -> None:
    """``payloads`` into ``topic``'s partitions in turn, untimed: each partition then holds
    a known count, which a consumer can read to without asking for watermarks (Tansu 0.6
    answers ListOffsets(latest) with its last batch's base offset + 1)."""
    producer, errors = workloads.producer_with_errors(broker.bootstrap, THROUGHPUT_PRODUCER)
    for i, value in enumerate(payloads):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) or errors.failed_deliveries:
        raise WorkloadError(f"filling {topic}: {errors.first_delivery_error or 'timed out'}")


def clients_run(broker: Broker, clients: ClientsRun) -> Run:
    return {"value": clients.records / clients.seconds, "seconds": clients.seconds,
            "broker_cpu_s": clients.broker_cpu_s,
            "broker_cpu_s_per_m": clients.broker_cpu_s / clients.records * 1e6,
            "rss_mb": broker.rss_mb()}


def _producer(bootstrap: str, topic: str, count: int,
              size: int) -> Callable[[], tuple[int, float]]:
    """Connects and generates ``count`` values; the timed part produces and flushes them."""
    payloads = workloads.make_payloads(count, size)
    producer, errors = workloads.producer_with_errors(bootstrap, THROUGHPUT_PRODUCER)
    producer.list_topics(topic, timeout=10)

    def produce() -> tuple[int, float]:
        workloads.timed_produce(producer, errors, topic, payloads)
        return count, time.monotonic()

    return produce


def _group_consumer(bootstrap: str, topic: str, group: str, share: int,
                    per_partition: int) -> Callable[[], tuple[int, float]]:
    """Joins ``group`` and holds what it is given paused until it holds ``share``
    partitions, which happens once all three members are in the group (with fewer, each
    gets more); the timed part reads the ``per_partition`` records of each."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         **THROUGHPUT_CONSUMER})
    held: list[TopicPartition] = []
    started = False

    def on_assign(client: Consumer, assigned: list[TopicPartition]) -> None:
        held[:] = assigned
        client.assign(assigned)
        if not started:
            client.pause(assigned)

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=lambda *_: held.clear())
    deadline = time.monotonic() + READY_TIMEOUT_S
    while len(held) != share:
        if time.monotonic() > deadline:
            raise WorkloadError(f"held {len(held)} partitions, not {share}")
        consumer.poll(0.05)
    expected = per_partition * len(held)

    def consume() -> tuple[int, float]:
        nonlocal started
        started = True
        consumer.resume(held)
        read, last = 0, time.monotonic()
        while read < expected:
            batch = consumer.consume(min(10_000, expected - read), timeout=1)
            if batch:
                read += len(batch)
                last = time.monotonic()
            elif time.monotonic() - last > STALL_S:
                raise WorkloadError(f"read {read} of {expected} records, then nothing")
        return read, last

    return consume
