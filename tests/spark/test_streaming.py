"""``spark.readStream.format("odradek")`` and ``writeStream.format("odradek")``: micro-batch
offsets, rate limits, new partitions, restarts from a checkpoint, data loss and committed
progress, through a real broker."""

from __future__ import annotations

import time

import confluent_kafka
import confluent_kafka.admin
import pytest
from pyspark.errors import PySparkException

TIMEOUT_SECONDS = 60.0


def stream(spark, bootstrap: str, name: str, **options):
    reader = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", name))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(df, checkpoint, rows: list | None = None, sink=None):
    """Runs one Trigger.AvailableNow query to the end, appending what it read to ``rows``
    (or writing it with ``sink``); returns its progress reports."""
    writer = df.writeStream.option("checkpointLocation", str(checkpoint)).trigger(
        availableNow=True)
    if sink is not None:
        writer = sink(writer)
    else:  # the memory sink can't restart from a checkpoint; foreachBatch can
        writer = writer.foreachBatch(lambda batch, _: rows.extend(batch.collect()))
    query = writer.start()
    try:
        assert query.awaitTermination(TIMEOUT_SECONDS), "the query did not finish"
    finally:
        query.stop()
    if query.exception() is not None:
        raise query.exception()
    return [p for p in query.recentProgress if p["numInputRows"]]


def values(rows) -> list[bytes]:
    return sorted(bytes(r.value) for r in rows)


def numbered(start: int, stop: int) -> list[bytes]:
    return [b"%06d" % i for i in range(start, stop)]


def committed(bootstrap: str, group: str, name: str, partitions: int) -> list[int]:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.list_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions(
        group, [confluent_kafka.TopicPartition(name, p) for p in range(partitions)])]).values()
    return [tp.offset for tp in future.result(TIMEOUT_SECONDS).topic_partitions]


def test_a_restarted_query_resumes_from_its_checkpoint_without_rereading(
        spark, bootstrap, topic, produce, tmp_path):
    name = topic(partitions=2)
    produce(name, numbered(0, 50))
    df = stream(spark, bootstrap, name, startingOffsets="earliest")

    first, second = [], []
    run_available_now(df, tmp_path / "cp", first)
    produce(name, numbered(50, 80))
    run_available_now(df, tmp_path / "cp", second)

    assert values(first) == numbered(0, 50)
    assert values(second) == numbered(50, 80)


def test_a_new_query_starts_at_the_latest_offsets_by_default(
        spark, bootstrap, topic, produce, tmp_path):
    name = topic()
    produce(name, numbered(0, 10))
    df = stream(spark, bootstrap, name)
    query = (df.writeStream.format("memory").queryName("from_latest")
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        query.processAllAvailable()
        produce(name, numbered(10, 15))
        query.processAllAvailable()
    finally:
        query.stop()
    assert values(spark.sql("SELECT value FROM from_latest").collect()) == numbered(10, 15)


def test_max_offsets_per_trigger_caps_every_micro_batch(
        spark, bootstrap, topic, produce, tmp_path):
    name = topic(partitions=2)
    produce(name, numbered(0, 100))
    df = stream(spark, bootstrap, name, startingOffsets="earliest", maxOffsetsPerTrigger="30")

    rows = []
    progress = run_available_now(df, tmp_path / "cp", rows)

    # shared between the partitions in proportion to what each holds, rounded down
    sizes = [p["numInputRows"] for p in progress]
    assert len(sizes) >= 4 and all(size <= 30 for size in sizes), sizes
    assert values(rows) == numbered(0, 100)


def test_partitions_added_while_the_query_runs_are_read_from_their_start(
        spark, bootstrap, topic, produce, tmp_path):
    name = topic(partitions=1)
    produce(name, numbered(0, 5))
    df = stream(spark, bootstrap, name, startingOffsets="earliest")
    query = (df.writeStream.format("memory").queryName("grown")
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        query.processAllAvailable()
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        [future] = admin.create_partitions(
            [confluent_kafka.admin.NewPartitions(name, 3)]).values()
        future.result(TIMEOUT_SECONDS)
        produce(name, numbered(5, 10), partition=2)
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while (spark.sql("SELECT * FROM grown").count() < 10
               and time.monotonic() < deadline):
            query.processAllAvailable()
    finally:
        query.stop()
    got = spark.sql("SELECT partition, value FROM grown").collect()
    assert sorted(bytes(r.value) for r in got) == numbered(0, 10)
    assert {r.partition for r in got if bytes(r.value) >= b"000005"} == {2}


def test_each_finished_micro_batch_commits_its_end_offsets_to_the_group(
        spark, bootstrap, topic, produce, tmp_path):
    name = topic(partitions=2)
    produce(name, numbered(0, 40))
    df = stream(spark, bootstrap, name, startingOffsets="earliest",
                commitOffsetsToGroup="spark-pipeline")

    run_available_now(df, tmp_path / "cp", [])

    # the end offset of each partition; the producer's partitioner spread the records
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    latest = admin.list_offsets({confluent_kafka.TopicPartition(name, p):
                                 confluent_kafka.admin.OffsetSpec.latest() for p in range(2)})
    ends = [f.result(TIMEOUT_SECONDS).offset for _, f in sorted(
        latest.items(), key=lambda item: item[0].partition)]
    assert sum(ends) == 40
    assert committed(bootstrap, "spark-pipeline", name, 2) == ends


def test_records_deleted_before_a_restart_fail_it_unless_failOnDataLoss_is_false(
        spark, bootstrap, topic, produce, tmp_path):
    name = topic()
    produce(name, numbered(0, 10))
    run_available_now(stream(spark, bootstrap, name, startingOffsets="earliest"),
                      tmp_path / "cp", [])
    produce(name, numbered(10, 20))
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.delete_records([confluent_kafka.TopicPartition(name, 0, 15)]).values()
    future.result(TIMEOUT_SECONDS)

    strict, lenient = [], []
    with pytest.raises(PySparkException, match="failOnDataLoss"):
        run_available_now(stream(spark, bootstrap, name), tmp_path / "cp", strict)
    run_available_now(stream(spark, bootstrap, name, failOnDataLoss="false"),
                      tmp_path / "cp", lenient)

    assert strict == []
    assert values(lenient) == numbered(15, 20)


def test_a_stream_written_to_a_topic_arrives_once_across_a_restart(
        spark, bootstrap, topic, produce, tmp_path):
    source, sink = topic(partitions=2), topic(partitions=2)
    produce(source, [(b"k%d" % i, v) for i, v in enumerate(numbered(0, 60))])

    def to_sink(writer):
        return (writer.format("odradek").option("kafka.bootstrap.servers", bootstrap)
                .option("topic", sink))

    df = stream(spark, bootstrap, source, startingOffsets="earliest").select("key", "value")
    run_available_now(df, tmp_path / "cp", sink=to_sink)
    produce(source, [(b"k%d" % i, v) for i, v in enumerate(numbered(60, 90), start=60)])
    run_available_now(df, tmp_path / "cp", sink=to_sink)

    read_back = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", sink).load().collect())
    assert sorted(bytes(r.value) for r in read_back) == numbered(0, 90)
    assert all(bytes(r.key) == b"k%d" % int(r.value) for r in read_back)
