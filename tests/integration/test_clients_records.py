"""Every client's records come back as sent: keys, nulls, empty values, headers, CreateTime."""

from __future__ import annotations

from odradek.protocol.records import TimestampType

RECORDS = [
    {"key": b"order-1", "value": b"created", "headers": [("trace", b"t1"), ("source", b"web")]},
    {"key": b"order-1", "value": b"paid", "headers": [("retry", b"1"), ("retry", b"2")]},
    {"key": None, "value": b"no key"},
    {"key": b"", "value": b"empty key"},
    {"key": b"order-2", "value": None},  # a tombstone
    {"key": b"order-3", "value": b""},
    {"key": b"order-4", "value": b"empty header value", "headers": [("note", b"")]},
]
NULL_HEADER_VALUE = {"key": b"order-5", "value": b"null header value",
                     "headers": [("note", None), ("note", b"set")]}

# CreateTime is whatever the producer said, in any order: an old one, a later one, and one
# earlier again.
TIMESTAMPS = [1_000_000_000_000, 1_600_000_000_123, 1_000_000_000_001]


def test_keys_null_keys_tombstones_empty_values_and_headers_come_back_as_sent(
        client, bootstrap, create_topic):
    """Repeated header keys keep their order; a null header value is sent where the client
    allows one (kafka-python does not)."""
    topic = create_topic("orders")
    records = RECORDS + ([NULL_HEADER_VALUE] if client.null_header_values else [])

    client.produce(bootstrap, topic, records)
    consumed = client.consume(bootstrap, topic, len(records))

    assert [m.as_sent() for m in consumed] == records
    assert [m.offset for m in consumed] == list(range(len(records)))
    assert {m.timestamp_type for m in consumed} == {TimestampType.CREATE_TIME}


def test_explicit_create_time_is_preserved_exactly(client, seed_producer, bootstrap,
                                                   create_topic):
    """kcat cannot set a timestamp (-P has no option for it): it reads records that
    confluent-kafka produced."""
    topic = create_topic("events")
    producer = client if client.sets_timestamps else seed_producer
    records = [{"key": b"k", "value": f"v{i}".encode(), "timestamp": timestamp}
               for i, timestamp in enumerate(TIMESTAMPS)]

    producer.produce(bootstrap, topic, records)
    consumed = client.consume(bootstrap, topic, len(records))

    assert [(m.timestamp, m.timestamp_type) for m in consumed] == [
        (timestamp, TimestampType.CREATE_TIME) for timestamp in TIMESTAMPS]
