"""The pipelines of ``odradek pipeline run``, each over records made by the demo generators,
from a topic on a real broker to a topic on it, with the answers computed here from the same
records. Queries run with ``trigger(availableNow=True)``: they process what the input topic
holds and stop."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import confluent_kafka

from odradek.pipelines import fraud_filter, reservoir_sample, website_activity
from odradek.pipelines.generators import Record, events, page_views, payments
from odradek.pipelines.reservoir import Reservoir, offer
from odradek.pipelines.streams import StreamSettings

TIMEOUT_SECONDS = 60.0
ODRADEK = str(Path(sys.executable).with_name("odradek"))
MINUTE_MS = 60_000
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, on a window boundary


def generate(generator, count: int, seed: int = 11, step_ms: int = 1_000) -> list[Record]:
    clock = itertools.count(START_MS, step_ms).__next__
    return list(itertools.islice(generator(random.Random(seed), clock), count))


def settings(bootstrap: str, input_topic: str, output_topic: str, tmp_path: Path,
             checkpoint: str = "checkpoint") -> StreamSettings:
    return StreamSettings(bootstrap_servers=bootstrap, input_topic=input_topic,
                          output_topic=output_topic,
                          checkpoint_location=str(tmp_path / checkpoint),
                          trigger={"availableNow": True})


def run_to_end(query) -> None:
    """Waits for an availableNow query to finish what its input topic holds."""
    assert query.awaitTermination(TIMEOUT_SECONDS), "the query did not finish in time"
    assert query.exception() is None


def consume_all(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic`` (one partition), in offset order, as ``(key, value)``."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                                         "enable.auto.commit": False})
    try:
        partition = confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)
        _, high_watermark = consumer.get_watermark_offsets(partition, TIMEOUT_SECONDS)
        consumer.assign([partition])
        records = []
        while len(records) < high_watermark:
            message = consumer.poll(TIMEOUT_SECONDS)
            assert message is not None, f"{topic}: {len(records)} of {high_watermark} read"
            assert message.error() is None, message.error()
            records.append((message.key(), message.value()))
        return records
    finally:
        consumer.close()


def test_website_activity_counts_views_and_distinct_users_per_page_and_window(
        spark, bootstrap, topic, produce, tmp_path):
    views = generate(page_views, 150)  # one a second: three one-minute windows
    page_views_topic, counts_topic = topic(), topic()
    produce(page_views_topic, [(record.key, record.value) for record in views])

    run_to_end(website_activity.start(
        spark, settings(bootstrap, page_views_topic, counts_topic, tmp_path),
        window="1 minute", watermark="10 seconds"))

    expected_views = defaultdict(int)
    expected_users = defaultdict(set)
    for record in views:
        view = json.loads(record.value)
        window_start = view["ts"] - view["ts"] % MINUTE_MS
        expected_views[view["page"], window_start] += 1
        expected_users[view["page"], window_start].add(view["user_id"])
    # In update mode a window's record is written again when its counts change; the latest
    # one per page and window holds the counts of everything read.
    latest = {}
    for key, value in consume_all(bootstrap, counts_topic):
        count = json.loads(value)
        assert key == count["page"].encode()
        assert count["window_end"] - count["window_start"] == MINUTE_MS
        latest[count["page"], count["window_start"]] = count
    assert {window: count["views"] for window, count in latest.items()} == expected_views
    assert {window: count["users"] for window, count in latest.items()} == {
        window: len(users) for window, users in expected_users.items()}
    assert len({window_start for _, window_start in latest}) == 3


def test_fraud_filter_passes_exactly_the_payments_above_0_8_with_key_and_value_unchanged(
        spark, bootstrap, topic, produce, tmp_path):
    payments_made = [(record.key, record.value) for record in generate(payments, 300)]
    edge_cases = [
        (b"acct-900", b'{"payment_id":"edge-1","fraudProbability":0.8}'),  # not above
        (b"acct-901", b'{"payment_id":"edge-2","fraudProbability":0.8001}'),
        (b"acct-902", b"not json"),
        (None, b'{"payment_id":"edge-3","fraudProbability":0.99}'),
    ]
    payments_topic, fraudulent_topic = topic(), topic()
    produce(payments_topic, payments_made + edge_cases)

    run_to_end(fraud_filter.start(spark, settings(bootstrap, payments_topic, fraudulent_topic,
                                                  tmp_path)))

    expected = [(key, value) for key, value in payments_made
                if json.loads(value)["fraudProbability"] > 0.8] + [edge_cases[1], edge_cases[3]]
    assert len(expected) > 10
    assert consume_all(bootstrap, fraudulent_topic) == expected


def test_reservoir_sample_is_algorithm_r_over_the_stream_and_survives_a_restart(
        spark, bootstrap, topic, produce, tmp_path):
    stream = [record.value for record in generate(events, 60)]
    events_topic = topic()
    sample_topic = topic(**{"cleanup.policy": "compact"})
    run_settings = settings(bootstrap, events_topic, sample_topic, tmp_path)

    # Two queries on one checkpoint: the second continues from the first one's state.
    produce(events_topic, stream[:35])
    run_to_end(reservoir_sample.start(spark, run_settings, size=5, seed=3))
    produce(events_topic, stream[35:])
    run_to_end(reservoir_sample.start(spark, run_settings, size=5, seed=3))

    sample = {}
    for key, value in consume_all(bootstrap, sample_topic):
        sample[int(key)] = value  # the topic's latest value per slot is the sample
    assert sorted(sample) == [0, 1, 2, 3, 4]
    assert len(set(sample.values())) == 5
    assert set(sample.values()) <= set(stream)
    # Each query read its records in one micro-batch, seeded by the records seen before it.
    first = offer(Reservoir(5), stream[:35], reservoir_sample.batch_rng(3, 0))
    second = offer(first, stream[35:], reservoir_sample.batch_rng(3, 35))
    assert tuple(sample[slot] for slot in range(5)) == second.slots


def odradek(*args: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "ODRADEK_BOOTSTRAP_SERVERS"}
    return subprocess.run([ODRADEK, *args], capture_output=True, text=True, env=environment,
                          timeout=TIMEOUT_SECONDS)


def test_demo_produce_writes_count_records_of_the_scenario(bootstrap, topic):
    payments_topic = topic()
    result = odradek("demo", "produce", "payments", "--count", "20", "--rate", "1000",
                     "--topic", payments_topic, "-b", bootstrap)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == f"20 records produced to {payments_topic}"
    records = consume_all(bootstrap, payments_topic)
    assert len(records) == 20
    assert all(key == json.loads(value)["account_id"].encode() for key, value in records)


def test_pipeline_run_refuses_an_option_of_another_pipeline():
    result = odradek("pipeline", "run", "fraud-filter", "--sample-size", "3")
    assert result.returncode == 1
    assert result.stderr.strip() == "error: --sample-size is not an option of fraud-filter"
