"""KIP-467 record errors: a batch with records the topic refuses is refused whole, and the
Produce response (v8+) names each refused record by its index in the batch, with the
partition's error code and message. On a ``cleanup.policy=compact`` topic a record without
a key is INVALID_RECORD; timestamps out of the topic's bounds are INVALID_TIMESTAMP
(test_produce_timestamp_bounds.py)."""

from __future__ import annotations

import time

import confluent_kafka
from kio.schema.errors import ErrorCode
from raw_client import RawClient

from odradek.protocol.records import Record, build_batch

TIMEOUT_SECONDS = 20.0
KEYLESS = (3, 11, 19, 27, 40, 52, 66, 71, 88, 99)


def now_ms() -> int:
    return int(time.time() * 1000)


def log_end_offset(bootstrap: str, topic: str) -> int:
    """The partition's high watermark, as a consumer's ListOffsets sees it (one node: the
    log end offset)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        _, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                                 timeout=TIMEOUT_SECONDS)
        return high
    finally:
        consumer.close()


def batch_of(count: int, *, keyless: tuple[int, ...] = ()) -> bytes:
    now = now_ms()
    return build_batch([Record(i, now, None if i in keyless else b"key-%d" % i, b"value-%d" % i)
                        for i in range(count)])


def test_a_batch_with_keyless_records_on_a_compacted_topic_names_each_one_and_appends_none(
        odradek_broker, bootstrap, create_topic):
    topic = create_topic("accounts", cleanup_policy="compact")
    with RawClient(odradek_broker.port) as raw:
        assert raw.produce(topic, batch_of(5)).error_code == ErrorCode.none
        response = raw.produce(topic, batch_of(100, keyless=KEYLESS))
    assert response.error_code == ErrorCode.invalid_record
    assert [error.batch_index for error in response.record_errors] == list(KEYLESS)
    assert all(f"without key in topic partition {topic}-0" in error.batch_index_error_message
               for error in response.record_errors)
    assert "10 record errors" in response.error_message
    assert response.base_offset == -1
    assert log_end_offset(bootstrap, topic) == 5


def test_a_producer_sees_keyless_records_on_a_compacted_topic_fail_and_keyed_ones_succeed(
        bootstrap, create_topic):
    topic = create_topic("profiles", cleanup_policy="compact")
    # A long linger puts everything sent before a flush in one batch; flush sends it at once.
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000})
    reports: list[tuple[bytes | None, confluent_kafka.KafkaError | None, int]] = []

    def send(key: bytes | None, value: bytes) -> None:
        producer.produce(topic, key=key, value=value, on_delivery=lambda error, message:
                         reports.append((message.key(), error, message.offset())))

    # One batch: the keyless records make the broker refuse all of it. librdkafka reads the
    # record errors: the records they name fail with INVALID_RECORD, the rest of the batch
    # with "an invalid record in the same batch caused the failure of this message too".
    for i in range(6):
        send(None if i % 2 else b"user-%d" % i, b"v%d" % i)
    assert producer.flush(TIMEOUT_SECONDS) == 0
    assert [(key, error.code()) for key, error, _ in reports] == [
        (b"user-0", confluent_kafka.KafkaError._INVALID_DIFFERENT_RECORD),
        (None, confluent_kafka.KafkaError.INVALID_RECORD),
        (b"user-2", confluent_kafka.KafkaError._INVALID_DIFFERENT_RECORD),
        (None, confluent_kafka.KafkaError.INVALID_RECORD),
        (b"user-4", confluent_kafka.KafkaError._INVALID_DIFFERENT_RECORD),
        (None, confluent_kafka.KafkaError.INVALID_RECORD),
    ]
    assert log_end_offset(bootstrap, topic) == 0

    reports.clear()
    for i in range(3):
        send(b"user-%d" % i, b"again")
    assert producer.flush(TIMEOUT_SECONDS) == 0
    assert [(key, error, offset) for key, error, offset in reports] == [
        (b"user-0", None, 0), (b"user-1", None, 1), (b"user-2", None, 2)]
    assert log_end_offset(bootstrap, topic) == 3
