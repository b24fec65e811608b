"""Log compaction as consumers see it: on a ``cleanup.policy=compact`` topic the broker's
log cleaner leaves the latest record of each key (and whatever the active segment holds)
at its original offset, tombstones go after ``delete.retention.ms``, an idempotent
producer's emptied last batch stays as an empty batch that consumers read past, and a
record without a key is refused with INVALID_RECORD."""

from __future__ import annotations

import time

import confluent_kafka
import pytest

from odradek.protocol.records import RecordBatch, iter_batches
from odradek.protocol.topic_partition import TopicPartition

pytestmark = pytest.mark.odradek_config(log_cleaner_backoff_ms=100)

TIMEOUT_SECONDS = 10
# Room for two or three one-record batches: segments roll every few records.
SMALL_SEGMENT_BYTES = 200


def produce_one_batch_each(
        bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]
) -> list[confluent_kafka.KafkaError]:
    """Sends each record in a batch of its own; returns the delivery errors."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors = []
    for key, value in records:
        producer.produce(topic, key=key, value=value,
                         on_delivery=lambda error, _: error and errors.append(error))
        producer.flush(TIMEOUT_SECONDS)
    return errors


def consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from the beginning to the high watermark."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "compaction", "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0,
                                                        confluent_kafka.OFFSET_BEGINNING)])
        got, deadline = [], time.monotonic() + TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error():
                if message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    return got
                raise confluent_kafka.KafkaException(message.error())
            got.append((message.offset(), message.key(), message.value()))
        raise TimeoutError(f"consumed {len(got)} records, no end of partition")
    finally:
        consumer.close()


def active_segment_base(odradek_broker, topic: str) -> int:
    async def base() -> int:
        replica = odradek_broker.broker.replica_manager.get_partition(TopicPartition(topic, 0))
        return replica.log.segments[-1].base_offset

    return odradek_broker.call(base())


def stored_batches(odradek_broker, topic: str) -> list[RecordBatch]:
    """Every batch in the partition's log, as stored, read segment by segment."""
    async def read() -> list[bytes]:
        log = odradek_broker.broker.replica_manager.get_partition(TopicPartition(topic, 0)).log
        chunks, offset = [], log.log_start_offset
        while offset < log.log_end_offset:
            chunk = log.read(offset, 2**31 - 1).records
            chunks.append(chunk)
            offset = list(iter_batches(chunk))[-1].next_offset
        return chunks

    return [batch for chunk in odradek_broker.call(read()) for batch in iter_batches(chunk)]


def wait_for(condition, what: str):
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while not (result := condition()):
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.2)
    return result


def test_a_consumer_of_a_compacted_topic_sees_the_latest_value_of_each_key_at_its_offset(
        odradek_broker, bootstrap, create_topic):
    topic = create_topic("prices", cleanup_policy="compact", segment_bytes=SMALL_SEGMENT_BYTES,
                         min_cleanable_dirty_ratio=0.01)
    sent = [(b"k%d" % (i % 4), b"v%d" % i) for i in range(40)]
    assert produce_one_batch_each(bootstrap, topic, sent) == []
    everything = [(offset, key, value) for offset, (key, value) in enumerate(sent)]

    def compacted():
        active_base = active_segment_base(odradek_broker, topic)
        latest = {key: offset for offset, key, _ in everything if offset < active_base}
        expected = [r for r in everything if r[0] >= active_base or latest[r[1]] == r[0]]
        return expected if consume_all(bootstrap, topic) == expected else None

    expected = wait_for(compacted, "the cleaner has compacted the log")
    assert len(expected) < len(everything)
    # Every key's latest value survives, at the offset the producer was told.
    assert {key: (offset, value) for offset, key, value in expected} == \
        {key: (offset, value) for offset, key, value in everything}


def test_tombstones_disappear_after_delete_retention_ms(odradek_broker, bootstrap, create_topic):
    topic = create_topic("sessions", cleanup_policy="compact", segment_bytes=SMALL_SEGMENT_BYTES,
                         min_cleanable_dirty_ratio=0.01, delete_retention_ms=500)
    sent = [(b"gone", b"v"), (b"kept", b"v"), (b"gone", None)]
    sent += [(b"filler", b"%d" % i) for i in range(10)]  # the tombstone leaves the active segment
    assert produce_one_batch_each(bootstrap, topic, sent) == []
    wait_for(lambda: all(key != b"gone" for _, key, _ in consume_all(bootstrap, topic)),
             "the tombstone is gone")
    records = consume_all(bootstrap, topic)
    assert (1, b"kept", b"v") in records
    assert records[-1] == (12, b"filler", b"9")


def test_a_record_without_a_key_is_refused_with_invalid_record(bootstrap, create_topic):
    topic = create_topic("keyed", cleanup_policy="compact")
    errors = produce_one_batch_each(bootstrap, topic, [(None, b"no key")])
    assert [error.code() for error in errors] == [confluent_kafka.KafkaError.INVALID_RECORD]


@pytest.mark.clients("confluent-kafka", "kafka-python")
@pytest.mark.parametrize("fetch_config", [None, {"max.partition.fetch.bytes": 64}],
                         ids=["default-fetch", "one-batch-per-fetch"])
def test_consumers_read_past_the_empty_batch_kept_for_an_idempotent_producers_last_sequence(
        odradek_broker, bootstrap, create_topic, client, fetch_config):
    topic = create_topic("balances", cleanup_policy="compact", segment_bytes=SMALL_SEGMENT_BYTES,
                         min_cleanable_dirty_ratio=0.01)
    idempotent = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                                           "enable.idempotence": True})
    errors: list[confluent_kafka.KafkaError] = []

    def send_idempotent(key: bytes, value: bytes) -> None:
        idempotent.produce(topic, key=key, value=value, partition=0,
                           on_delivery=lambda error, _: error and errors.append(error))
        assert idempotent.flush(TIMEOUT_SECONDS) == 0

    send_idempotent(b"a", b"first")  # offset 0
    send_idempotent(b"b", b"first")  # offset 1: the producer's last batch
    sent = [(b"a", b"second"), (b"b", b"second")] + [(b"filler", b"%d" % i) for i in range(8)]
    assert produce_one_batch_each(bootstrap, topic, sent) == []

    def empty_batch():
        return next((b for b in stored_batches(odradek_broker, topic)
                     if b.has_producer_id and b.records_count == 0), None)

    kept = wait_for(empty_batch, "the cleaner has emptied the producer's last batch")
    assert (kept.base_offset, kept.last_offset, kept.base_sequence) == (1, 1, 1)
    active_base = active_segment_base(odradek_broker, topic)
    everything = [(0, b"a", b"first"), (1, b"b", b"first")] + [
        (offset, key, value) for offset, (key, value) in enumerate(sent, start=2)]
    latest = {key: offset for offset, key, _ in everything if offset < active_base}
    expected = [r for r in everything if r[0] >= active_base or latest[r[1]] == r[0]]

    consumed = client.consume(bootstrap, topic, len(expected), config=fetch_config)
    assert [(c.offset, c.key, c.value) for c in consumed] == expected

    # The producer goes on where it left off.
    send_idempotent(b"c", b"after compaction")
    assert errors == []
