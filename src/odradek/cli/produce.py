"""``odradek produce``: one record per line of stdin."""

from __future__ import annotations

import enum
import sys
from typing import Annotated, Optional

import typer
from confluent_kafka import KafkaError, Message, Producer

from odradek.cli import output
from odradek.cli.arguments import (
    DEFAULT_BOOTSTRAP_SERVERS,
    BootstrapServers,
    ClientProperties,
    key_value_pairs,
)
from odradek.cli.client import Kafka
from odradek.cli.errors import fail

# How long to let librdkafka drain its queue when it is full before queueing again.
QUEUE_FULL_POLL_SECONDS = 0.1


class Acks(str, enum.Enum):
    all = "all"
    leader = "1"
    none = "0"


class Compression(str, enum.Enum):
    none = "none"
    gzip = "gzip"
    snappy = "snappy"
    lz4 = "lz4"
    zstd = "zstd"


class DeliveryReport:
    """Counts delivery reports and keeps the first failure (later ones usually repeat it)."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0
        self.first_error: KafkaError | None = None

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.delivered += 1
            return
        self.failed += 1
        self.first_error = self.first_error or error


def produce(
    topic: str,
    key_separator: Annotated[Optional[str], typer.Option(
        metavar="SEP", help="Split each line into key and value at the first SEP; a line "
                            "without SEP has a null key.")] = None,
    headers: Annotated[Optional[list[str]], typer.Option(
        "--header", metavar="KEY=VALUE", help="A header added to every record (repeatable).")]
    = None,
    partition: Annotated[Optional[int], typer.Option(
        min=0, show_default="the partitioner picks",
        help="Write every record to this partition.")]
    = None,
    acks: Annotated[Optional[Acks], typer.Option(
        show_default="all",
        help="Replicas that must have a record before it counts as written.")]
    = None,
    compression: Annotated[Optional[Compression], typer.Option(
        show_default="none", help="Compression codec for record batches.")] = None,
    null_marker: Annotated[Optional[str], typer.Option(
        metavar="MARKER", help="A key or value equal to MARKER is sent as null (a value: a "
                               "tombstone).")] = None,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Write each line of stdin as one record to TOPIC."""
    if key_separator == "":
        fail("--key-separator must not be empty")
    record_headers = [(key, value.encode()) for key, value in key_value_pairs(headers, "--header")]
    separator = key_separator.encode() if key_separator is not None else None
    null = null_marker.encode() if null_marker is not None else None
    settings = {}
    if acks is not None:
        settings["acks"] = acks.value
    if compression is not None:
        settings["compression.type"] = compression.value
    report = DeliveryReport()
    with Kafka(bootstrap_server, command_config) as kafka:
        producer = kafka.producer(**settings)
        kafka.partitions(producer, topic, partition)
        target = {"partition": partition} if partition is not None else {}
        for line in sys.stdin.buffer:
            key, value = _split(line.removesuffix(b"\n").removesuffix(b"\r"), separator)
            queue(producer, topic, key=None if key == null else key,
                   value=None if value == null else value,
                  headers=record_headers or None, on_delivery=report, **target)
        finish(kafka, producer, topic, report)


def _split(line: bytes, separator: bytes | None) -> tuple[bytes | None, bytes]:
    if separator is None:
        return None, line
    key, found, value = line.partition(separator)
    return (key, value) if found else (None, line)


def queue(producer: Producer, topic: str, **record: object) -> None:
    """``producer.produce``, waiting while librdkafka's queue is full."""
    while True:
        try:
            producer.produce(topic, **record)
        except BufferError:  # librdkafka's queue is full: deliver some, then try again
            producer.poll(QUEUE_FULL_POLL_SECONDS)
            continue
        producer.poll(0)  # serve delivery reports as we go
        return


def finish(kafka: Kafka, producer: Producer, topic: str, report: DeliveryReport) -> None:
    """Waits for every delivery report, then says how many records were produced, or fails
    with the first error."""
    producer.flush()
    if report.failed:
        fail(f"{output.records(report.failed)} not produced to {topic} "
             f"({report.delivered} produced): {kafka.describe(report.first_error)}")
    output.note(f"{output.records(report.delivered)} produced to {topic}")
