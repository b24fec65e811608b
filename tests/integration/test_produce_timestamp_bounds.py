"""Produce-time timestamp bounds: ``message.timestamp.before.max.ms`` and
``message.timestamp.after.max.ms`` refuse CreateTime records too far from the broker's clock
with INVALID_TIMESTAMP; each unset one falls back to the deprecated
``message.timestamp.difference.max.ms`` (Kafka 3.6+, KIP-937). LogAppendTime topics replace
the timestamps, so nothing is refused there."""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from kio.schema.errors import ErrorCode
from raw_client import RawClient

from odradek.protocol.records import Record, build_batch

HOUR_MS = 3_600_000
TIMEOUT_SECONDS = 20.0


def now_ms() -> int:
    return int(time.time() * 1000)


def produce_at(bootstrap: str, topic: str, timestamp: int) -> confluent_kafka.KafkaError | None:
    """Produces one record with ``timestamp``; returns the delivery error, if any."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    errors = []
    producer.produce(topic, b"v", timestamp=timestamp,
                     on_delivery=lambda error, _: errors.append(error))
    assert producer.flush(TIMEOUT_SECONDS) == 0
    return errors[0]


@pytest.mark.parametrize(("configs", "age_ms", "accepted"), [
    ({"message_timestamp_before_max_ms": HOUR_MS}, 2 * HOUR_MS, False),
    ({"message_timestamp_before_max_ms": HOUR_MS}, HOUR_MS // 2, True),
    ({"message_timestamp_before_max_ms": HOUR_MS}, -2 * HOUR_MS, True),
    ({"message_timestamp_after_max_ms": HOUR_MS}, -2 * HOUR_MS, False),
    ({"message_timestamp_after_max_ms": HOUR_MS}, 2 * HOUR_MS, True),
    ({"message_timestamp_difference_max_ms": HOUR_MS}, 2 * HOUR_MS, False),
    ({"message_timestamp_difference_max_ms": HOUR_MS}, -2 * HOUR_MS, False),
    ({"message_timestamp_difference_max_ms": HOUR_MS,
      "message_timestamp_before_max_ms": 3 * HOUR_MS}, 2 * HOUR_MS, True),
    ({"message_timestamp_type": "LogAppendTime",
      "message_timestamp_before_max_ms": HOUR_MS}, 2 * HOUR_MS, True),
    ({}, 20 * 365 * 24 * HOUR_MS, True),
], ids=["old-before", "recent-before", "future-before", "future-after", "old-after",
        "old-difference", "future-difference", "before-over-difference", "log-append-time",
        "unbounded"])
def test_a_create_time_record_outside_the_topic_bounds_is_invalid_timestamp(
        bootstrap, create_topic, configs, age_ms, accepted):
    topic = create_topic("bounded", **configs)
    error = produce_at(bootstrap, topic, now_ms() - age_ms)
    if accepted:
        assert error is None
    else:
        assert error.code() == confluent_kafka.KafkaError.INVALID_TIMESTAMP


def test_every_record_is_checked_and_each_one_out_of_bounds_is_named(odradek_broker,
                                                                   create_topic):
    # The first record's timestamp is the batch's base and the last is its max: only the
    # middle one is too old, which only looking at each record finds.
    topic = create_topic("bounded-records", message_timestamp_before_max_ms=HOUR_MS)
    now = now_ms()
    batch = build_batch([Record(0, now, None, b"a"), Record(1, now - 2 * HOUR_MS, None, b"b"),
                         Record(2, now + 1, None, b"c")])
    with RawClient(odradek_broker.port) as raw:
        response = raw.produce(topic, batch)
    assert response.error_code == ErrorCode.invalid_timestamp
    assert [error.batch_index for error in response.record_errors] == [1]
    assert "out of range" in response.record_errors[0].batch_index_error_message
