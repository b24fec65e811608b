"""A topic with message.timestamp.type=LogAppendTime: the broker's clock stamps the records."""

from __future__ import annotations

import time

import pytest

from odradek.protocol.records import TimestampType

# What a producer claims; the broker must replace it (2001-09-09).
PRODUCER_TIMESTAMP = 1_000_000_000_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.mark.parametrize("codec", [None, "gzip"], ids=["uncompressed", "gzip"])
def test_log_append_time_topic_stamps_broker_time(client, codec, bootstrap, create_topic):
    """Consumers see the append time with type LogAppendTime, in compressed batches too (the
    broker stamps the batch header); delivery reports carry the same time where the client
    exposes them (kcat prints none; kafka-python gives no type)."""
    topic = create_topic("stamped", message_timestamp_type="LogAppendTime")
    timestamp = {"timestamp": PRODUCER_TIMESTAMP} if client.sets_timestamps else {}
    records = [{"key": f"k{i}".encode(), "value": b"v", **timestamp} for i in range(3)]

    before = now_ms()
    delivered = client.produce(bootstrap, topic, records, compression=codec)
    after = now_ms()
    consumed = client.consume(bootstrap, topic, len(records))

    assert all(before <= m.timestamp <= after for m in consumed), (before, consumed, after)
    assert {m.timestamp_type for m in consumed} == {TimestampType.LOG_APPEND_TIME}
    if client.reports_deliveries:
        assert [d.timestamp for d in delivered] == [m.timestamp for m in consumed]
        assert {d.timestamp_type for d in delivered} <= {TimestampType.LOG_APPEND_TIME, None}
