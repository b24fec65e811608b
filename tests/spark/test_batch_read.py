"""``spark.read.format("odradek")``: Spark's Kafka schema and batch options, through a real
broker. No test registers the format: Spark finds it through ``pyspark_odradek``."""

from __future__ import annotations

import json

import confluent_kafka
import confluent_kafka.admin
import pytest
from pyspark.errors import PySparkException
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

import odradek.spark

TIMEOUT_SECONDS = 30.0

# Spark's Kafka source schema, spelled out independently of the connector's
KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()),
    StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("offset", LongType()), StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType())])
HEADERS_FIELD = StructField("headers", ArrayType(StructType([
    StructField("key", StringType()), StructField("value", BinaryType())])))


def read(spark, bootstrap: str, **options):
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value if isinstance(value, str) else json.dumps(value))
    return reader.load()


def test_the_schema_and_the_records_are_those_of_sparks_kafka_source(spark, bootstrap, topic):
    name = topic(partitions=1)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    producer.produce(name, key=b"k1", value=b"v1", timestamp=1_700_000_000_123,
                     headers=[("h", b"x"), ("h", b"y")])
    producer.produce(name, value=None, key=b"k2", timestamp=1_700_000_000_456)
    assert producer.flush(TIMEOUT_SECONDS) == 0

    plain = read(spark, bootstrap, subscribe=name)
    with_headers = read(spark, bootstrap, subscribe=name, includeHeaders="true")

    assert plain.schema == KAFKA_SCHEMA
    assert with_headers.schema == StructType([*KAFKA_SCHEMA.fields, HEADERS_FIELD])
    rows = [r.asDict() for r in with_headers.orderBy("offset").collect()]
    assert [(r["key"], r["value"], r["topic"], r["partition"], r["offset"], r["timestampType"])
            for r in rows] == [(b"k1", b"v1", name, 0, 0, 0), (b"k2", None, name, 0, 1, 0)]
    assert [r["timestamp"].timestamp() for r in rows] == [1_700_000_000.123, 1_700_000_000.456]
    assert [[(h.key, h.value) for h in r["headers"]] if r["headers"] else None
            for r in rows] == [[("h", b"x"), ("h", b"y")], None]


def test_log_append_time_topics_report_timestamp_type_1(spark, bootstrap, topic, produce):
    name = topic(**{"message.timestamp.type": "LogAppendTime"})
    produce(name, [b"a"])
    [row] = read(spark, bootstrap, subscribe=name).collect()
    assert row.timestampType == 1


def test_starting_and_ending_offsets_select_a_range_per_partition(
        spark, bootstrap, topic, produce):
    name = topic(partitions=2)
    for partition in range(2):
        produce(name, [f"p{partition}-{i}".encode() for i in range(10)], partition=partition)

    df = read(spark, bootstrap, subscribe=name,
              startingOffsets={name: {"0": 3, "1": -2}}, endingOffsets={name: {"0": 5, "1": -1}})

    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, 3), (0, 4)] + [(1, i) for i in range(10)]


def test_subscribe_pattern_reads_every_matching_topic_and_assign_only_named_partitions(
        spark, bootstrap, topic, produce):
    first, second = topic(partitions=2), topic(partitions=2)
    for name in (first, second):
        for partition in range(2):
            produce(name, [b"x"], partition=partition)
    prefix = first.rsplit("-", 1)[0]

    by_pattern = read(spark, bootstrap, subscribePattern=f"{prefix}-\\d+")
    assigned = read(spark, bootstrap, assign={second: [1]})

    assert sorted((r.topic, r.partition) for r in by_pattern.collect()) == [
        (first, 0), (first, 1), (second, 0), (second, 1)]
    assert [(r.topic, r.partition) for r in assigned.collect()] == [(second, 1)]


def test_starting_timestamps_start_at_the_first_record_at_or_after_them(
        spark, bootstrap, topic):
    name = topic(partitions=2)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for partition in range(2):
        for i in range(5):
            producer.produce(name, value=b"v", partition=partition, timestamp=1000 * (i + 1))
    assert producer.flush(TIMEOUT_SECONDS) == 0

    everywhere = read(spark, bootstrap, subscribe=name, startingTimestamp="3000")
    per_partition = read(spark, bootstrap, subscribe=name,
                         startingOffsetsByTimestamp={name: {"0": 4500, "1": 1000}})
    too_late = read(spark, bootstrap, subscribe=name, startingTimestamp="99000",
                    startingOffsetsByTimestampStrategy="latest")
    between = read(spark, bootstrap, subscribe=name, startingTimestamp="2000",
                   endingTimestamp="4000")

    assert sorted((r.partition, r.offset) for r in everywhere.collect()) == [
        (p, o) for p in range(2) for o in (2, 3, 4)]
    assert sorted((r.partition, r.offset) for r in per_partition.collect()) == [
        (0, 4)] + [(1, o) for o in range(5)]
    assert too_late.count() == 0
    assert sorted((r.partition, r.offset) for r in between.collect()) == [
        (p, o) for p in range(2) for o in (1, 2)]
    with pytest.raises(PySparkException, match="no record at or after"):
        read(spark, bootstrap, subscribe=name, startingTimestamp="99000").collect()


def test_min_partitions_splits_large_ranges_into_more_tasks(spark, bootstrap, topic, produce):
    name = topic(partitions=1)
    produce(name, [str(i).encode() for i in range(1000)])

    df = read(spark, bootstrap, subscribe=name, minPartitions="4")

    assert df.rdd.getNumPartitions() == 4
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(1000))


def test_records_deleted_before_they_are_read_fail_the_query_unless_told_otherwise(
        spark, bootstrap, topic, produce):
    name = topic()
    produce(name, [str(i).encode() for i in range(10)])
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.delete_records([confluent_kafka.TopicPartition(name, 0, 6)]).values()
    future.result(TIMEOUT_SECONDS)
    from_zero = {"startingOffsets": {name: {"0": 0}}}

    with pytest.raises(PySparkException, match="failOnDataLoss"):
        read(spark, bootstrap, subscribe=name, **from_zero).collect()
    skipped = read(spark, bootstrap, subscribe=name, failOnDataLoss="false", **from_zero)
    assert sorted(r.offset for r in skipped.collect()) == [6, 7, 8, 9]


@pytest.mark.parametrize(("options", "message"), [
    ({}, "exactly one of the options 'subscribe', 'subscribePattern' or 'assign'"),
    ({"subscribe": "a", "assign": '{"a": [0]}'}, "exactly one of the options"),
    ({"subscribe": "a", "startingOffsets": "latest"}, "can't be 'latest' in a batch query"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "can't be 'earliest'"),
    ({"subscribe": "a", "startingOffsets": "{not json"}, "'startingOffsets' is not valid JSON"),
    ({"subscribe": "a", "minPartitions": "0"}, "'minPartitions' must be positive"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "'failOnDataLoss' must be true or false"),
    ({"subscribe": "a", "kafka.fetch.wait.max.ms": "soon"}, "fetch.wait.max.ms"),
])
def test_bad_options_fail_with_a_message_naming_the_option(spark, bootstrap, options, message):
    with pytest.raises(Exception, match=message):
        read(spark, bootstrap, **options).collect()


def test_an_explicit_registration_works_alongside_the_lookup(spark, bootstrap, topic, produce):
    name = topic()
    produce(name, [b"one"])
    odradek.spark.register(spark)
    assert [r.value for r in read(spark, bootstrap, subscribe=name).collect()] == [b"one"]
