"""The connector's options, parsed and checked on the driver before any query runs."""

from __future__ import annotations

import pytest

from odradek.spark.options import EARLIEST, LATEST, OptionError, sink_options, source_options

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(streaming: bool = True, **options: str):
    return source_options({**BOOTSTRAP, **options}, streaming=streaming)


def test_defaults_follow_sparks_kafka_source():
    streaming, batch = parse(subscribe="a"), parse(streaming=False, subscribe="a")
    assert streaming.starting.kind == "latest" and batch.starting.kind == "earliest"
    assert batch.ending.kind == "latest"
    assert streaming.fail_on_data_loss and not streaming.include_headers
    assert streaming.max_offsets_per_trigger is None and streaming.commit_group is None
    assert streaming.group_id_prefix == "spark-kafka-source"
    assert batch.group_id_prefix == "spark-kafka-relation"


def test_names_are_case_insensitive_and_kafka_options_go_to_the_client():
    options = source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "kafka.client.id": "etl",
                              "SubScribe": "a, b", "MAXOFFSETSPERTRIGGER": "10"}, streaming=True)
    assert options.client_config == {"bootstrap.servers": "h:1", "client.id": "etl"}
    assert options.subscribe == ("a", "b") and options.max_offsets_per_trigger == 10


def test_explicit_offsets_and_timestamps_are_read_per_partition():
    offsets = parse(subscribe="a", startingOffsets='{"a": {"0": 23, "1": -2, "2": -1}}')
    by_time = parse(subscribe="a", startingOffsetsByTimestamp='{"a": {"0": 1000}}',
                    startingOffsets="earliest")
    one_time = parse(subscribe="a", startingTimestamp="5000",
                     startingOffsetsByTimestamp='{"a": {"0": 1000}}')
    assert offsets.starting.per_partition == {("a", 0): 23, ("a", 1): EARLIEST, ("a", 2): LATEST}
    assert by_time.starting.kind == "timestamps"  # timestamps win over offsets, as in Spark
    assert by_time.starting.per_partition == {("a", 0): 1000}
    assert one_time.starting.kind == "timestamp" and one_time.starting.timestamp_ms == 5000


def test_the_pattern_matches_whole_names_and_leaves_internal_topics_out():
    options = parse(subscribePattern="orders-.*")
    assert options.matches("orders-eu") and not options.matches("old-orders-eu")
    assert not parse(subscribePattern=".*").matches("__consumer_offsets")
    assert parse(assign='{"a": [0, 2]}').assign == {"a": (0, 2)}


def test_progress_goes_to_the_named_group_or_else_to_kafka_group_id():
    assert parse(subscribe="a", commitOffsetsToGroup="etl").commit_group == "etl"
    assert parse(subscribe="a", **{"kafka.group.id": "app"}).commit_group == "app"


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "a", "subscribePattern": "b"}, "exactly one of"),
    ({"subscribe": " , "}, "names no topic"),
    ({"subscribePattern": "("}, "not a valid regular expression"),
    ({"assign": '{"a": [-1]}'}, "not a non-negative integer"),
    ({"assign": '["a"]'}, "JSON object of topic to partitions"),
    ({"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, "partition: integer"),
    ({"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, "below -2"),
    ({"subscribe": "a", "endingOffsets": "latest"}, "only be used in batch queries"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "many"}, "'maxOffsetsPerTrigger' must be an "
                                                         "integer"),
    ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "oldest"}, "'error' or 'latest'"),
])
def test_mistakes_name_the_option(options, message):
    with pytest.raises(OptionError, match=message):
        parse(**options)


def test_the_bootstrap_servers_are_required():
    with pytest.raises(OptionError, match="'kafka.bootstrap.servers' must be given"):
        source_options({"subscribe": "a"}, streaming=False)
    with pytest.raises(OptionError, match="'kafka.bootstrap.servers' must be given"):
        sink_options({"topic": "a"})


def test_sink_options():
    options = sink_options({**BOOTSTRAP, "topic": "out", "includeHeaders": "true"})
    assert options.topic == "out" and options.include_headers
