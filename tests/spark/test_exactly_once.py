"""``exactlyOnce``: a streaming query copying a topic writes every record once for read_committed
readers through replays, killed drivers and failed tasks (``odradek.spark.exactly_once``),
checked by counting the copies of each input record with confluent-kafka."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import confluent_kafka
import pytest
from drivers import JVM_OPTIONS, TIMEOUT_SECONDS, CopyQuery, kill, topic_values

from odradek.pipelines import reservoir_sample
from odradek.pipelines.streams import StreamSettings

ODRADEK = str(Path(sys.executable).with_name("odradek"))

COPY = "concat('copy of ', CAST(value AS STRING))"  # the output value of each input value


def numbered(start: int, stop: int) -> list[bytes]:
    return [b"%06d" % i for i in range(start, stop)]


def produce_evenly(produce, source: str, values: list[bytes]) -> None:
    """Half of ``values`` to each of the two partitions of ``source``, so that every
    micro-batch of the copy has two tasks of the same size."""
    produce(source, values[0::2], partition=0)
    produce(source, values[1::2], partition=1)


def each_copied_once(values: list[bytes]) -> Counter:
    return Counter(b"copy of " + value for value in values)


def copy(spark, bootstrap: str, source: str, sink: str, checkpoint: Path,
         sink_id: str) -> list[dict]:
    """Copies what ``source`` holds (100 records a micro-batch) to ``sink`` with exactlyOnce;
    the progress of each micro-batch that read records."""
    df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", 100).load())
    query = (df.selectExpr("key", f"{COPY} AS value").writeStream.format("odradek")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
             .option("exactlyOnce", "true").option("sinkId", sink_id)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(TIMEOUT_SECONDS), "the query did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    return [p for p in query.recentProgress if p["numInputRows"]]


def lose_commit(checkpoint: Path, batch_id: int) -> None:
    """What a driver killed after the tasks of ``batch_id`` committed, but before Spark wrote
    the batch to its commit log, leaves behind."""
    (checkpoint / "commits" / str(batch_id)).unlink()
    (checkpoint / "commits" / f".{batch_id}.crc").unlink(missing_ok=True)


def test_a_streaming_query_writes_each_record_once_for_read_committed_readers(
        spark, bootstrap, topic, produce, tmp_path):
    source, sink = topic(partitions=2), topic(partitions=2)
    values = numbered(0, 300)
    produce_evenly(produce, source, values)

    progress = copy(spark, bootstrap, source, sink, tmp_path / "cp", "copy")

    assert len(progress) == 3
    assert topic_values(bootstrap, sink, 2, read_committed=True) == each_copied_once(values)


def test_a_micro_batch_run_again_after_its_tasks_committed_writes_nothing_again(
        spark, bootstrap, topic, produce, tmp_path):
    source, sink = topic(partitions=2), topic(partitions=2)
    values = numbered(0, 250)
    produce_evenly(produce, source, values)
    checkpoint = tmp_path / "cp"
    last = copy(spark, bootstrap, source, sink, checkpoint, "replayed")[-1]

    lose_commit(checkpoint, last["batchId"])
    replayed = copy(spark, bootstrap, source, sink, checkpoint, "replayed")

    assert [(p["batchId"], p["numInputRows"]) for p in replayed] == [
        (last["batchId"], last["numInputRows"])]
    # not even an aborted attempt: every task found its batch committed
    assert topic_values(bootstrap, sink, 2) == each_copied_once(values)
    assert topic_values(bootstrap, sink, 2, read_committed=True) == each_copied_once(values)


def test_a_new_checkpoint_with_the_same_sinkId_writes_its_micro_batches(
        spark, bootstrap, topic, produce, tmp_path):
    source, sink = topic(), topic()
    values = numbered(0, 50)
    produce(source, values)

    copy(spark, bootstrap, source, sink, tmp_path / "first", "reused")
    copy(spark, bootstrap, source, sink, tmp_path / "second", "reused")

    # the second query read the source from the start again, and its batch 0 is its own
    assert topic_values(bootstrap, sink, 1, read_committed=True) == Counter(
        {copied: 2 for copied in each_copied_once(values)})


KILLS = 2


def markers(bootstrap: str, sink_id: str, topic: str, tasks: int) -> list[int]:
    """The micro-batch each task's marker says it committed last (-1: none), as the broker
    has it now, without waiting for open transactions."""
    found = []
    for task in range(tasks):
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                             "group.id": f"{sink_id}-{task}",
                                             "isolation.level": "read_uncommitted"})
        try:
            [marker] = consumer.committed([confluent_kafka.TopicPartition(topic, 0)],
                                          TIMEOUT_SECONDS)
        finally:
            consumer.close()
        found.append(max(marker.offset, -1))
    return found


def test_a_driver_killed_at_random_points_and_restarted_writes_each_record_once(
        bootstrap, topic, produce, tmp_path):
    source, sink = topic(partitions=2), topic(partitions=2)
    # 10 micro-batches: each run gets through one and at most a few more before its kill,
    # so the last kill still finds micro-batches to do.
    values = numbered(0, 1000)
    produce_evenly(produce, source, values)
    query = CopyQuery(bootstrap, source, sink, tmp_path / "checkpoint", per_batch=100,
                      value=COPY, sink_options={"exactlyOnce": "true", "sinkId": "killed"})
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)

    kills = []  # (last batch planned, last batch committed by Spark, by each task) at each
    for _ in range(KILLS):
        committed = query.last_batch("commits")
        running = query.start()
        try:  # once this run has finished a micro-batch, at a random point after
            deadline = time.monotonic() + TIMEOUT_SECONDS
            while query.last_batch("commits") == committed:
                assert running.poll() is None, f"the driver exited:\n{query.log.read_text()}"
                assert time.monotonic() < deadline, "no micro-batch finished in time"
                time.sleep(0.1)
            time.sleep(rng.uniform(0, 1))
        finally:
            kill(running)
        kills.append((query.last_batch("offsets"), query.last_batch("commits"),
                      markers(bootstrap, "killed", sink, 2)))
    query.run_to_end()

    assert query.last_batch("commits") > kills[-1][1], "killed too late to test anything"
    assert topic_values(bootstrap, sink, 2, read_committed=True) == each_copied_once(values), \
        f"seed {seed}, kills {kills}"
    seen = topic_values(bootstrap, sink, 2)
    print(f"\n{len(values)} records, {KILLS} kills (seed {seed}) at (batch planned, batch "
          f"committed by Spark, by each task) {kills}: read_uncommitted saw "
          f"{sum(seen.values())} records, {sum(n - 1 for n in seen.values())} of them from "
          "aborted attempts")


def test_tasks_failing_mid_transaction_or_after_it_are_retried_and_write_once(
        bootstrap, topic, produce, tmp_path):
    source, sink = topic(partitions=2), topic(partitions=2)
    values = numbered(0, 600)
    produce_evenly(produce, source, values)
    attempts_log = tmp_path / "attempts.jsonl"
    # local[2,4]: Spark retries a failed task up to 3 times
    query = CopyQuery(bootstrap, source, sink, tmp_path / "checkpoint", per_batch=200,
                      value=COPY, sink_options={"exactlyOnce": "true", "sinkId": "retried"},
                      master="local[2,4]", attempts=attempts_log)

    query.run_to_end()

    assert topic_values(bootstrap, sink, 2, read_committed=True) == each_copied_once(values)
    seen = topic_values(bootstrap, sink, 2)
    aborted = sum(seen.values()) - len(values)
    assert set(seen) == set(each_copied_once(values)) and aborted > 0
    # batch 0 raised halfway, batch 1 killed its Python worker halfway, batch 2 failed after
    # its write: the retries of 0 and 1 wrote every row, those of 2 found them committed
    attempts = [json.loads(line) for line in attempts_log.read_text().splitlines()]
    retries = Counter()
    for a in attempts:
        if a["attempt"] > 0:
            retries[a["batch"], "wrote" if a["records"] else "skipped"] += 1
    assert retries == {(0, "wrote"): 2, (1, "wrote"): 2, (2, "skipped"): 2}, attempts
    print(f"\n{len(values)} records in 3 micro-batches of 2 tasks, each task's first attempt "
          f"failed: read_uncommitted saw {aborted} records of aborted attempts")


@pytest.mark.parametrize(("options", "message"), [
    ({"exactlyOnce": "true", "topic": "t"}, "'exactlyOnce' needs the option 'sinkId'"),
    ({"exactlyOnce": "yes", "sinkId": "s", "topic": "t"},
     "'exactlyOnce' must be true or false, not 'yes'"),
    ({"exactlyOnce": "true", "sinkId": "s"}, "'exactlyOnce' needs the option 'topic'"),
    ({"sinkId": "s", "topic": "t"}, "'sinkId' is only used with 'exactlyOnce' set to true"),
    ({"exactlyOnce": "true", "sinkId": "s", "topic": "t", "kafka.transactional.id": "x"},
     "'kafka.transactional.id' can't be set with 'exactlyOnce'"),
])
def test_exactly_once_options_are_checked_before_any_task_runs(
        spark, bootstrap, options, message):
    writer = spark.createDataFrame([("v", "t")], "value string, topic string").write.format(
        "odradek").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        writer = writer.option(name, value)
    with pytest.raises(Exception, match=re.escape(message)):
        writer.mode("append").save()


def test_a_batch_write_outside_a_streaming_query_cannot_be_exactly_once(
        spark, bootstrap, topic):
    name = topic()
    writer = (spark.createDataFrame([("v",)], "value string").write.format("odradek")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", name)
              .option("exactlyOnce", "true").option("sinkId", "batch"))
    with pytest.raises(Exception, match="this write is not part of one"):
        writer.mode("append").save()
    assert topic_values(bootstrap, name, 1) == Counter()


def test_an_update_mode_pipeline_writes_each_micro_batch_once_through_foreachBatch(
        spark, bootstrap, topic, produce, tmp_path):
    events_topic, sample_topic = topic(), topic()
    produce(events_topic, numbered(0, 40))
    settings = StreamSettings(bootstrap_servers=bootstrap, input_topic=events_topic,
                              output_topic=sample_topic, checkpoint_location=str(tmp_path / "cp"),
                              trigger={"availableNow": True}, sink_id="sample")

    def run() -> list[dict]:
        query = reservoir_sample.start(spark, settings, size=5)
        assert query.awaitTermination(TIMEOUT_SECONDS), "the query did not finish"
        assert query.exception() is None
        return query.recentProgress

    [batch] = run()
    written = topic_values(bootstrap, sample_topic, 1, read_committed=True)
    lose_commit(tmp_path / "cp", batch["batchId"])
    [replayed] = run()

    assert replayed["batchId"] == batch["batchId"]
    assert sum(written.values()) == 5  # the five slots the micro-batch filled
    assert topic_values(bootstrap, sample_topic, 1) == written


def cli_environment() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "ODRADEK_BOOTSTRAP_SERVERS"},
            "SPARK_SUBMIT_OPTS": JVM_OPTIONS}


def test_pipeline_run_refuses_exactly_once_when_printing():
    result = subprocess.run([ODRADEK, "pipeline", "run", "fraud-filter", "--exactly-once",
                             "--print"], capture_output=True, text=True, check=False,
                            env=cli_environment(), timeout=TIMEOUT_SECONDS)
    assert result.returncode == 1
    assert result.stderr.strip() == ("error: --exactly-once writes to a topic: it can't be used "
                                     "with --print")


def test_pipeline_run_with_exactly_once_writes_through_transactions(
        bootstrap, topic, produce, tmp_path):
    payments = [(b"acct-%d" % i, b'{"payment_id":"p%d","fraudProbability":0.%d}' % (i, i % 10))
                for i in range(100)]
    payments_topic, fraudulent_topic = topic(), topic()
    produce(payments_topic, payments)
    expected = Counter(value for _, value in payments
                       if json.loads(value)["fraudProbability"] > 0.8)

    log = tmp_path / "pipeline.log"
    with open(log, "w") as output:
        run = subprocess.Popen(
            [ODRADEK, "pipeline", "run", "fraud-filter", "--exactly-once",
             "--trigger-seconds", "0", "--input-topic", payments_topic,
             "--output-topic", fraudulent_topic, "--checkpoint-dir", str(tmp_path / "cp"),
             "--master", "local[2]", "-b", bootstrap],
            stdout=output, stderr=subprocess.STDOUT, env=cli_environment())
    try:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while topic_values(bootstrap, fraudulent_topic, 1, read_committed=True) != expected:
            assert run.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the pipeline wrote too little in time"
            time.sleep(0.5)
    finally:
        run.send_signal(signal.SIGINT)
        run.wait(TIMEOUT_SECONDS)
    assert run.returncode == 0, log.read_text()

    # the marker of the one task of each micro-batch, in its transaction's group
    markers = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"odradek-fraud-filter-{fraudulent_topic}-0",
        "isolation.level": "read_committed"})
    try:
        [marker] = markers.committed([confluent_kafka.TopicPartition(fraudulent_topic, 0)],
                                     TIMEOUT_SECONDS)
    finally:
        markers.close()
    assert marker.offset >= 0
