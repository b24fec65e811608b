"""kcat's own views of the broker: -f format strings, -Q offsets by timestamp, -L metadata."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.clients("kcat")

TIMESTAMPS = [1_700_000_000_000, 1_700_000_001_000, 1_700_000_002_000]


@pytest.fixture
def topic(seed_producer, bootstrap, create_topic) -> str:
    name = create_topic("formatted", partitions=2)
    seed_producer.produce(bootstrap, name, [
        {"key": f"k{i}".encode(), "value": f"v{i}".encode(), "timestamp": timestamp,
         "headers": [("h", b"1"), ("h", None)], "partition": 1}
        for i, timestamp in enumerate(TIMESTAMPS)])
    return name


def test_kcat_format_string_prints_partition_offset_timestamp_key_value_and_headers(
        client, bootstrap, topic):
    printed = client.run(bootstrap, "-C", "-t", topic, "-p", "1", "-o", "beginning", "-e",
                         "-f", r"%p|%o|%T|%k|%K|%s|%S|%h\n")

    assert printed.splitlines() == [
        f"1|{i}|{timestamp}|k{i}|2|v{i}|2|h=1,h=NULL" for i, timestamp in enumerate(TIMESTAMPS)]


def test_kcat_query_finds_the_offset_of_a_timestamp(client, bootstrap, topic):
    printed = client.run(bootstrap, "-Q", "-t", f"{topic}:1:{TIMESTAMPS[1]}")

    assert f"{topic} [1] offset 1" in printed


def test_kcat_metadata_lists_the_broker_and_the_topics_partitions(
        client, odradek_broker, bootstrap, topic):
    printed = client.run(bootstrap, "-L", "-t", topic)

    assert f"broker {odradek_broker.broker.node_id} at 127.0.0.1:{odradek_broker.port}" in printed
    assert f'topic "{topic}" with 2 partitions' in printed
    assert "partition 1, leader" in printed
