"""``df.write.format("odradek")``: the columns and options of Spark's Kafka sink, checked by
reading the topic back with confluent-kafka."""

from __future__ import annotations

import time

import confluent_kafka
import pytest

TIMEOUT_SECONDS = 30.0


def consume_all(bootstrap: str, topic: str, count: int, partitions: int = 1) -> list:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + TIMEOUT_SECONDS
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message)
        extra = consumer.poll(0.5)  # nothing beyond what was written
        assert extra is None or extra.error(), f"unexpected record {extra.value()!r}"
    finally:
        consumer.close()
    assert len(got) == count, f"{len(got)} of {count} records"
    return got


def write(df, bootstrap: str, **options):
    writer = df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.mode("append").save()


def test_keys_values_partitions_and_headers_are_written_as_records(spark, bootstrap, topic):
    name = topic(partitions=3)
    df = spark.createDataFrame(
        [(b"k1", b"v1", 2, [("h", b"1")]), (None, b"v2", 0, None), (b"k3", None, 1, [])],
        "key binary, value binary, partition int, headers array<struct<key:string,value:binary>>")

    write(df, bootstrap, topic=name, includeHeaders="true")

    got = consume_all(bootstrap, name, 3, partitions=3)
    assert sorted((m.partition(), m.key(), m.value(), m.headers()) for m in got) == [
        (0, None, b"v2", None), (1, b"k3", None, None), (2, b"k1", b"v1", [("h", b"1")])]


def test_string_columns_and_a_topic_column_route_each_row(spark, bootstrap, topic):
    first, second = topic(), topic()
    df = spark.createDataFrame([("a", "x", first), ("b", "y", second), ("c", "z", first)],
                               "key string, value string, topic string")

    write(df, bootstrap)

    assert sorted((m.key(), m.value()) for m in consume_all(bootstrap, first, 2)) == [
        (b"a", b"x"), (b"c", b"z")]
    assert [(m.key(), m.value()) for m in consume_all(bootstrap, second, 1)] == [(b"b", b"y")]


def test_the_topic_option_overrides_the_topic_column(spark, bootstrap, topic):
    chosen, ignored = topic(), topic()
    df = spark.createDataFrame([("v", ignored)], "value string, topic string")
    write(df, bootstrap, topic=chosen)
    assert [m.value() for m in consume_all(bootstrap, chosen, 1)] == [b"v"]
    assert consume_all(bootstrap, ignored, 0) == []


def test_many_rows_from_many_tasks_arrive_once_each(spark, bootstrap, topic):
    name = topic(partitions=4)
    df = spark.range(20_000, numPartitions=4).selectExpr("CAST(id AS STRING) AS value")
    write(df, bootstrap, topic=name)
    got = consume_all(bootstrap, name, 20_000, partitions=4)
    assert sorted(int(m.value()) for m in got) == list(range(20_000))


@pytest.mark.parametrize(("ddl", "options", "message"), [
    ("key string", {"topic": "t"}, "no 'value' column"),
    ("value string", {}, "no 'topic' column and no 'topic' option"),
    ("value int", {"topic": "t"}, "column 'value' must be of type string or binary, not int"),
    ("value string, partition string", {"topic": "t"}, "column 'partition' must be of type int"),
])
def test_data_that_cannot_be_records_fails_before_any_task_runs(
        spark, bootstrap, ddl, options, message):
    df = spark.createDataFrame([], ddl)
    with pytest.raises(Exception, match=message):
        write(df, bootstrap, **options)
