"""A consumer catching up whose fetch answers are many times larger than the broker's socket
send buffer: every client reads every record, whole and in order, while the broker holds at
most one piece of an answer in memory at a time (the rest waits as file regions)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import confluent_kafka
import pytest
from conftest import create_topic

from odradek.log.file_region import FileRegion
from odradek.server.connection import UNSENT_PIECE_BYTES
from odradek.testing.embedded import EmbeddedBroker

PARTITIONS = 4
RECORDS_PER_PARTITION = 300
RECORD_BYTES = 10_000
# Doubled by Linux to 128 KiB: each partition's 1 MiB of an answer (the clients' default
# max.partition.fetch.bytes) fills the socket eight times over.
SEND_BUFFER_BYTES = 65536
TIMEOUT_SECONDS = 60.0


def value(partition: int, index: int) -> bytes:
    """A record's value: printable (kcat prints values as text) and different everywhere."""
    return random.Random(partition * RECORDS_PER_PARTITION + index).randbytes(
        RECORD_BYTES // 2).hex().encode()


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("large-fetches"),
                        socket_send_buffer_bytes=SEND_BUFFER_BYTES) as broker:
        yield broker


@pytest.fixture(scope="module")
def topic(broker: EmbeddedBroker) -> str:
    name = create_topic(broker, "catching-up", PARTITIONS)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for partition in range(PARTITIONS):
        for index in range(RECORDS_PER_PARTITION):
            producer.produce(name, value(partition, index), partition=partition)
            producer.poll(0)
    assert producer.flush(TIMEOUT_SECONDS) == 0
    return name


def test_a_consumer_catching_up_reads_answers_larger_than_the_socket_whole_and_in_order(
        client, broker, topic, monkeypatch):
    reads: list[int] = []
    read = FileRegion.read

    def counted(region: FileRegion, start: int = 0, size: int | None = None) -> bytes:
        reads.append(region.size - start if size is None else size)
        return read(region, start, size)

    monkeypatch.setattr(FileRegion, "read", counted)

    consumed = client.consume(broker.bootstrap_servers, topic,
                              PARTITIONS * RECORDS_PER_PARTITION,
                              partitions=list(range(PARTITIONS)), timeout=TIMEOUT_SECONDS)

    for partition in range(PARTITIONS):
        records = [m for m in consumed if m.partition == partition]
        assert [m.offset for m in records] == list(range(RECORDS_PER_PARTITION))
        assert [m.value for m in records] == [value(partition, index)
                                             for index in range(RECORDS_PER_PARTITION)]
    # The socket was full again and again; each time one piece of an answer was read into
    # memory, never the rest of it.
    assert reads and max(reads) <= UNSENT_PIECE_BYTES
