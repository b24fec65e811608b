"""Consumers start where asked: an offset (assign + seek, kcat -o N), the first record at or
after a timestamp (offsets_for_times, kcat -o s@ts), the earliest or the latest offset.

The records come from confluent-kafka (seed_producer), with timestamps kcat cannot set:
seeking is what the consumer under test does."""

from __future__ import annotations

import pytest

COUNT = 10
FIRST_TIMESTAMP = 1_700_000_000_000
STEP_MS = 1_000
# Room for two of the ~80-byte one-record batches: a segment rolls every two records.
SMALL_SEGMENT_BYTES = 200


@pytest.fixture(params=["one-batch", "a-segment-every-two-records"])
def topic(request, seed_producer, bootstrap, create_topic) -> str:
    """COUNT records, the one at offset i stamped FIRST_TIMESTAMP + i * STEP_MS: all in one
    batch (a seek lands inside it), or one batch each in segments of two records (a seek
    crosses segment boundaries)."""
    records = [{"key": f"k{i}".encode(), "value": f"v{i}".encode(),
                "timestamp": FIRST_TIMESTAMP + i * STEP_MS} for i in range(COUNT)]
    if request.param == "one-batch":
        name = create_topic("history")
        seed_producer.produce(bootstrap, name, records)
    else:
        name = create_topic("history", segment_bytes=SMALL_SEGMENT_BYTES)
        for record in records:
            seed_producer.produce(bootstrap, name, [record])
    return name


@pytest.mark.parametrize(("start", "first_offset"), [
    pytest.param({"start": 6}, 6, id="offset"),
    pytest.param({"start": "earliest"}, 0, id="earliest"),
    pytest.param({"start_timestamp": FIRST_TIMESTAMP + 4 * STEP_MS}, 4, id="timestamp-of-a-record"),
    pytest.param({"start_timestamp": FIRST_TIMESTAMP + 4 * STEP_MS + 1}, 5,
                 id="timestamp-between-records"),
])
def test_consumer_starts_at_the_offset_it_asked_for(client, bootstrap, topic, start,
                                                     first_offset):
    consumed = client.consume(bootstrap, topic, COUNT - first_offset, **start)

    assert [(m.offset, m.value) for m in consumed] == [
        (offset, f"v{offset}".encode()) for offset in range(first_offset, COUNT)]


def test_consumer_at_latest_receives_only_records_produced_after_it_started(
        client, seed_producer, bootstrap, topic, consuming):
    with consuming(client, bootstrap, topic, 2, start="latest") as consumed:
        seed_producer.produce(bootstrap, topic, [{"key": b"new", "value": b"n1"},
                                                 {"key": b"new", "value": b"n2"}])

    assert [(m.offset, m.value) for m in consumed.result()] == [(COUNT, b"n1"),
                                                                (COUNT + 1, b"n2")]


def test_an_offset_past_the_end_is_out_of_range_and_the_consumer_resets_to_earliest(
        client, bootstrap, topic):
    consumed = client.consume(bootstrap, topic, COUNT, start=COUNT + 100,
                              config={"auto.offset.reset": "earliest"})

    assert [m.offset for m in consumed] == list(range(COUNT))
