"""``odradek perf produce`` and ``odradek perf consume``: the counterparts of Kafka's
``kafka-producer-perf-test.sh`` and ``kafka-consumer-perf-test.sh``, with their options
where they make sense and their report lines, so that a cluster is measured as Kafka's is.

The producer prints a line per reporting interval and a total with latency percentiles;
latency is librdkafka's, from ``produce()`` to the broker's acknowledgement. The consumer
prints Kafka's comma-separated line: MB (2^20 bytes of keys and values) and records, each
per second, the time to join the group and the time spent fetching after it.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer
from confluent_kafka import KafkaError, Message, Producer

from odradek.cli import output
from odradek.cli.arguments import (
    DEFAULT_BOOTSTRAP_SERVERS,
    BootstrapServers,
    ClientProperties,
)
from odradek.cli.client import Kafka
from odradek.cli.errors import fail
from odradek.cli.produce import queue
from odradek.server.config_defs import parse_properties

app = typer.Typer(help="Measure a cluster: producer and consumer load tests.",
                  no_args_is_help=True)

MB = 1024 * 1024
# Kafka keeps at most this many latencies for the percentiles: every n-th record's.
MAX_LATENCY_SAMPLES = 500_000
# How many records one consume() call asks for.
CONSUME_BATCH = 10_000
# What librdkafka may take between two produce() calls before the throttle waits.
THROTTLE_SLACK_S = 0.001

ReportingInterval = Annotated[int, typer.Option(
    min=1, metavar="MS", help="Print a line of statistics every MS milliseconds.")]


class ProduceStats:
    """Kafka's ``ProducerPerformance.Stats``: counts, bytes and latencies, the whole run's and
    the current window's, printed through ``emit``."""

    def __init__(self, num_records: int, reporting_interval_ms: int,
                 clock: Callable[[], float] = time.monotonic,
                 emit: Callable[[str], None] = output.line) -> None:
        self._clock = clock
        self._emit = emit
        self._interval_s = reporting_interval_ms / 1000
        self._sampling = max(1, num_records // MAX_LATENCY_SAMPLES)
        self.start = self._window_start = clock()
        self.count = self.bytes = 0
        self.max_ms = self.total_ms = 0.0
        self.samples: list[float] = []
        self._window_count = self._window_bytes = 0
        self._window_max_ms = self._window_total_ms = 0.0

    def record(self, latency_ms: float, size: int) -> None:
        if self.count % self._sampling == 0:
            self.samples.append(latency_ms)
        self.count += 1
        self.bytes += size
        self.total_ms += latency_ms
        self.max_ms = max(self.max_ms, latency_ms)
        self._window_count += 1
        self._window_bytes += size
        self._window_total_ms += latency_ms
        self._window_max_ms = max(self._window_max_ms, latency_ms)
        now = self._clock()
        if now - self._window_start >= self._interval_s:
            self._print_window(now)

    def _print_window(self, now: float) -> None:
        elapsed = now - self._window_start
        self._emit(f"{self._window_count} records sent, "
                   f"{self._window_count / elapsed:.1f} records/sec "
                   f"({self._window_bytes / MB / elapsed:.2f} MB/sec), "
                   f"{self._window_total_ms / max(self._window_count, 1):.1f} ms avg latency, "
                   f"{self._window_max_ms:.1f} ms max latency.")
        self._window_start = now
        self._window_count = self._window_bytes = 0
        self._window_max_ms = self._window_total_ms = 0.0

    def total(self) -> str:
        elapsed = max(self._clock() - self.start, 1e-9)
        p50, p95, p99, p999 = percentiles(self.samples, (0.5, 0.95, 0.99, 0.999))
        return (f"{self.count} records sent, {self.count / elapsed:f} records/sec "
                f"({self.bytes / MB / elapsed:.2f} MB/sec), "
                f"{self.total_ms / max(self.count, 1):.2f} ms avg latency, "
                f"{self.max_ms:.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, "
                f"{p99} ms 99th, {p999} ms 99.9th.")


def percentiles(latencies_ms: list[float], fractions: tuple[float, ...]) -> list[int]:
    """Kafka's: the sample at ``fraction`` of the sorted samples, in whole milliseconds."""
    ordered = sorted(latencies_ms)
    if not ordered:
        return [0 for _ in fractions]
    return [int(ordered[min(int(fraction * len(ordered)), len(ordered) - 1)])
            for fraction in fractions]


class Throttle:
    """Kafka's ``ThroughputThrottler``: holds the sender back to ``records_per_s`` on average
    since the start (no limit when it is negative), serving librdkafka while it waits."""

    def __init__(self, records_per_s: float, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self._rate = records_per_s
        self._clock = clock
        self._start = clock()

    def wait(self, sent: int, producer: Producer) -> None:
        if self._rate <= 0:
            return
        ahead = self._start + sent / self._rate - self._clock()
        if ahead > THROTTLE_SLACK_S:
            producer.poll(ahead)


def _properties(config_file: Path | None, *lists: list[str] | None) -> list[str]:
    """A Java properties file's entries as key=value, then the options' (later ones win)."""
    found = [] if config_file is None else [
        f"{key}={value}" for key, value in parse_properties(config_file.read_text()).items()]
    for items in lists:
        found += items or []
    return found


def _payloads(record_size: int | None, payload_file: Path | None, delimiter: str
              ) -> list[bytes]:
    if (record_size is None) == (payload_file is None):
        fail("give exactly one of --record-size and --payload-file")
    if record_size is not None:
        # Kafka's: random uppercase letters, made once and sent as every record's value.
        return [bytes(random.choice(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(record_size))]
    if not delimiter:
        fail("--payload-delimiter must not be empty")
    payloads = [p for p in payload_file.read_bytes().split(delimiter.encode()) if p]
    if not payloads:
        fail(f"{payload_file} holds no payload")
    return payloads


@app.command("produce")
def produce(
    topic: Annotated[str, typer.Option(help="The topic to produce to.")],
    num_records: Annotated[int, typer.Option(min=1, help="How many records to send.")],
    throughput: Annotated[float, typer.Option(
        help="At most this many records/s on average; -1 for no limit.")],
    record_size: Annotated[Optional[int], typer.Option(
        min=0, help="Bytes in each record's value (random letters).")] = None,
    payload_file: Annotated[Optional[Path], typer.Option(
        exists=True, dir_okay=False,
        help="Values taken at random from this file, split at --payload-delimiter.")] = None,
    payload_delimiter: Annotated[str, typer.Option(
        help="What separates the payloads in --payload-file.")] = "\n",
    producer_props: Annotated[Optional[list[str]], typer.Option(
        metavar="KEY=VALUE", help="A producer property, e.g. acks=all (repeatable); these "
                                  "win over --producer.config.")] = None,
    producer_config: Annotated[Optional[Path], typer.Option(
        "--producer.config", exists=True, dir_okay=False, metavar="FILE",
        help="Producer properties, one key=value per line ('#' starts a comment).")] = None,
    transactional_id: Annotated[Optional[str], typer.Option(
        help="Produce in transactions with this transactional id.")] = None,
    transaction_duration_ms: Annotated[Optional[int], typer.Option(
        min=1, show_default="3000 with --transactional-id",
        help="Commit a transaction after this many ms; alone, it makes the producer "
             "transactional with a transactional id of its own.")] = None,
    reporting_interval: ReportingInterval = 5000,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Send records as fast as allowed and report throughput and latency
    (kafka-producer-perf-test)."""
    payloads = _payloads(record_size, payload_file, payload_delimiter)
    if transaction_duration_ms is not None and transactional_id is None:
        transactional_id = f"performance-producer-{uuid.uuid4()}"
    if transactional_id is not None and transaction_duration_ms is None:
        transaction_duration_ms = 3000
    properties = _properties(producer_config, command_config, producer_props)
    stats: ProduceStats | None = None
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)
        elif stats is not None:
            stats.record(message.latency() * 1000, len(message))

    with Kafka(bootstrap_server, properties) as kafka:
        settings = {"on_delivery": delivered}
        if transactional_id is not None:
            settings["transactional.id"] = transactional_id
        producer = kafka.producer(**settings)
        kafka.partitions(producer, topic)
        if transactional_id is not None:
            producer.init_transactions()
            producer.begin_transaction()
            transaction_start = time.monotonic()
        stats = ProduceStats(num_records, reporting_interval)
        throttle = Throttle(throughput)
        one = payloads[0] if len(payloads) == 1 else None
        for sent in range(num_records):
            queue(producer, topic, value=one if one is not None else random.choice(payloads))
            if transactional_id is not None \
                    and time.monotonic() - transaction_start >= transaction_duration_ms / 1000:
                producer.commit_transaction()
                producer.begin_transaction()
                transaction_start = time.monotonic()
            throttle.wait(sent + 1, producer)
        if transactional_id is not None:
            producer.commit_transaction()
        producer.flush()
    if failures:
        fail(f"{output.records(len(failures))} not produced to {topic} "
             f"({stats.count} produced): {kafka.describe(failures[0])}")
    output.line(stats.total())


def _timestamp(epoch_s: float) -> str:
    """Kafka's ``yyyy-MM-dd HH:mm:ss:SSS``, local time."""
    moment = datetime.fromtimestamp(epoch_s)
    return moment.strftime("%Y-%m-%d %H:%M:%S:") + f"{moment.microsecond // 1000:03d}"


CONSUME_HEADER = ("data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                  "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def consume_line(first: str, elapsed_s: float, consumed_bytes: int, records: int,
                 rebalance_s: float) -> str:
    """One of Kafka's consumer report lines, after its first column(s)."""
    megabytes = consumed_bytes / MB
    elapsed_s = max(elapsed_s, 1e-9)
    fetch_s = max(elapsed_s - rebalance_s, 1e-9)
    return (f"{first}, {megabytes:.4f}, {megabytes / elapsed_s:.4f}, {records}, "
            f"{records / elapsed_s:.4f}, {round(rebalance_s * 1000)}, "
            f"{round(fetch_s * 1000)}, {megabytes / fetch_s:.4f}, {records / fetch_s:.4f}")


@app.command("consume")
def consume(
    topic: Annotated[str, typer.Option(help="The topic to consume from.")],
    num_records: Annotated[int, typer.Option(
        "--num-records", "--messages", min=1, help="How many records to read.")],
    group: Annotated[Optional[str], typer.Option(
        show_default="perf-consumer-<random>", help="The consumer group.")] = None,
    from_latest: Annotated[bool, typer.Option(
        "--from-latest", help="Without a committed offset, start at the end, not the "
                              "beginning.")] = False,
    fetch_size: Annotated[int, typer.Option(
        min=1, help="Bytes to fetch from a partition per request "
                    "(max.partition.fetch.bytes).")] = 1024 * 1024,
    timeout: Annotated[int, typer.Option(
        min=1, metavar="MS", help="Give up after this many ms without a record.")] = 10_000,
    show_detailed_stats: Annotated[bool, typer.Option(
        "--show-detailed-stats", help="A line per reporting interval.")] = False,
    hide_header: Annotated[bool, typer.Option(
        "--hide-header", help="No header line.")] = False,
    consumer_config: Annotated[Optional[Path], typer.Option(
        "--consumer.config", exists=True, dir_okay=False, metavar="FILE",
        help="Consumer properties, one key=value per line ('#' starts a comment).")] = None,
    reporting_interval: ReportingInterval = 5000,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Read records as fast as they come and report throughput
    (kafka-consumer-perf-test)."""
    properties = _properties(consumer_config, command_config)
    if not hide_header:
        first = "time, threadId" if show_detailed_stats else "start.time, end.time"
        output.line(f"{first}, {CONSUME_HEADER}")
    assigned_at: list[float] = []
    with Kafka(bootstrap_server, properties) as kafka:
        consumer = kafka.consumer(**{
            "group.id": group or f"perf-consumer-{random.randrange(100_000)}",
            "auto.offset.reset": "latest" if from_latest else "earliest",
            "max.partition.fetch.bytes": fetch_size})
        kafka.partitions(consumer, topic)
        start_wall, start = time.time(), time.monotonic()

        def on_assign(_consumer, _partitions) -> None:
            assigned_at.append(time.monotonic())  # the first is the end of the join

        consumer.subscribe([topic], on_assign=on_assign)
        records = consumed_bytes = 0
        window_start, window_records, window_bytes = start, 0, 0
        last_record = start
        while records < num_records:
            now = time.monotonic()
            if now - last_record > timeout / 1000:
                break
            messages = consumer.consume(min(CONSUME_BATCH, num_records - records), 0.1)
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.fatal() or error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                                         KafkaError.TOPIC_AUTHORIZATION_FAILED):
                        fail(kafka.describe(error, f"topic {topic!r}"))
                    continue
                size = len(message.value() or b"") + len(message.key() or b"")
                records += 1
                consumed_bytes += size
                window_records += 1
                window_bytes += size
            if messages:
                last_record = time.monotonic()
            if show_detailed_stats and last_record - window_start >= reporting_interval / 1000:
                output.line(consume_line(f"{_timestamp(time.time())}, 0",
                                         last_record - window_start, window_bytes,
                                         window_records, 0.0))
                window_start, window_records, window_bytes = last_record, 0, 0
        end = last_record
        rebalance_s = (assigned_at[0] - start) if assigned_at else 0.0
        if not show_detailed_stats:
            output.line(consume_line(
                f"{_timestamp(start_wall)}, {_timestamp(start_wall + end - start)}",
                end - start, consumed_bytes, records, rebalance_s))
        if records < num_records:
            fail(f"exiting after {output.records(records)} of {num_records}: timeout "
                 f"({timeout} ms) exceeded; --timeout gives the consumer longer")
