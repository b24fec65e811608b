"""Retention as consumers see it: segments past ``retention.ms`` or beyond ``retention.bytes``
are deleted by the broker's retention task, the log start offset moves forward, a consumer
positioned below it gets OFFSET_OUT_OF_RANGE and ``auto.offset.reset=earliest`` takes it to
the log start offset. Deleted segments' files linger as ``*.deleted`` for
``file.delete.delay.ms``. DeleteRecords moves the log start offset too, across a restart."""

from __future__ import annotations

import time

import confluent_kafka
import kafka
import kafka.errors
import pytest
from kafka.admin import KafkaAdminClient

pytestmark = pytest.mark.odradek_config(log_retention_check_interval_ms=200)

TIMEOUT_SECONDS = 10
HOUR_MS = 3_600_000
# Room for two of the ~80-byte one-record batches: a segment rolls every two records.
SMALL_SEGMENT_BYTES = 200
# What each client calls "raise OFFSET_OUT_OF_RANGE instead of resetting".
NO_RESET = {"confluent-kafka": "error", "kafka-python": "none"}


def low_watermark(bootstrap: str, topic: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "retention"})
    try:
        return consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                              TIMEOUT_SECONDS)[0]
    finally:
        consumer.close()


def wait_for_low_watermark(bootstrap: str, topic: str, expected: int) -> None:
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while (low := low_watermark(bootstrap, topic)) != expected:
        assert time.monotonic() < deadline, f"log start offset {low}, expected {expected}"
        time.sleep(0.1)


def produce_one_batch_each(seed_producer, bootstrap: str, topic: str, values: list[bytes],
                           timestamp: int | None = None) -> None:
    for value in values:
        record = {"value": value} | ({"timestamp": timestamp} if timestamp else {})
        seed_producer.produce(bootstrap, topic, [record])


def is_offset_out_of_range(error: BaseException) -> bool:
    if isinstance(error, confluent_kafka.KafkaException):
        # librdkafka's consumer reports the broker's OFFSET_OUT_OF_RANGE this way when it
        # may not reset the offset.
        return error.args[0].code() == confluent_kafka.KafkaError._AUTO_OFFSET_RESET
    return isinstance(error, kafka.errors.OffsetOutOfRangeError)


@pytest.mark.clients("confluent-kafka", "kafka-python")
def test_records_past_retention_ms_are_deleted_and_a_consumer_below_resets_to_earliest(
        client, seed_producer, bootstrap, create_topic):
    topic = create_topic("expiring", segment_bytes=SMALL_SEGMENT_BYTES, retention_ms=HOUR_MS,
                         file_delete_delay_ms=0)
    two_hours_ago = int(time.time() * 1000) - 2 * HOUR_MS
    produce_one_batch_each(seed_producer, bootstrap, topic, [b"old-%d" % i for i in range(6)],
                           timestamp=two_hours_ago)
    # Every old record goes, the active segment's too (rolled first, as in Kafka), whenever
    # the retention task runs; had new records been written before it ran, an old one could
    # share their segment and stay.
    wait_for_low_watermark(bootstrap, topic, 6)
    produce_one_batch_each(seed_producer, bootstrap, topic, [b"new-6", b"new-7"])

    with pytest.raises(Exception) as raised:
        client.consume(bootstrap, topic, 1, start=0,
                       config={"auto.offset.reset": NO_RESET[client.name]})
    assert is_offset_out_of_range(raised.value), raised.value
    consumed = client.consume(bootstrap, topic, 2, start=0,
                              config={"auto.offset.reset": "earliest"})
    assert [(m.offset, m.value) for m in consumed] == [(6, b"new-6"), (7, b"new-7")]


@pytest.mark.clients("confluent-kafka", "kafka-python")
def test_the_oldest_segments_beyond_retention_bytes_are_deleted(client, seed_producer, bootstrap,
                                                                 create_topic):
    topic = create_topic("bounded", segment_bytes=SMALL_SEGMENT_BYTES, retention_bytes=400,
                         file_delete_delay_ms=0)
    produce_one_batch_each(seed_producer, bootstrap, topic, [b"v%d" % i for i in range(10)])

    # Five segments of two ~70-byte batches: the oldest go while at least 400 bytes stay
    # (two go, leaving ~420 bytes; a third would leave ~280).
    wait_for_low_watermark(bootstrap, topic, 4)
    consumed = client.consume(bootstrap, topic, 6, start=0,
                              config={"auto.offset.reset": "earliest"})
    assert [m.value for m in consumed] == [b"v%d" % i for i in range(4, 10)]


def test_deleted_segments_stay_renamed_for_file_delete_delay_ms(seed_producer, bootstrap,
                                                                create_topic, odradek_broker):
    topic = create_topic("delayed", segment_bytes=SMALL_SEGMENT_BYTES, retention_bytes=1,
                         file_delete_delay_ms=1500)
    produce_one_batch_each(seed_producer, bootstrap, topic, [b"v%d" % i for i in range(4)])
    partition_dir = odradek_broker.data_dir / "delayed-0"

    wait_for_low_watermark(bootstrap, topic, 2)
    deleted = {path.name for path in partition_dir.glob("*.deleted")}
    assert deleted == {"00000000000000000000.log.deleted", "00000000000000000000.index.deleted",
                       "00000000000000000000.timeindex.deleted"}
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while any(partition_dir.glob("*.deleted")):
        assert time.monotonic() < deadline, "deleted segment files were never removed"
        time.sleep(0.1)


def test_delete_records_moves_the_log_start_offset_for_good(seed_producer, bootstrap,
                                                            create_topic, odradek_broker):
    topic = create_topic("trimmed")
    seed_producer.produce(bootstrap, topic, [{"value": b"v%d" % i} for i in range(5)])
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = admin.delete_records({kafka.TopicPartition(topic, 0): 3})
    finally:
        admin.close()
    assert result[kafka.TopicPartition(topic, 0)]["low_watermark"] == 3

    odradek_broker.restart()

    bootstrap = odradek_broker.bootstrap_servers
    assert low_watermark(bootstrap, topic) == 3
    consumed = seed_producer.consume(bootstrap, topic, 2, start="earliest")
    assert [(m.offset, m.value) for m in consumed] == [(3, b"v3"), (4, b"v4")]
