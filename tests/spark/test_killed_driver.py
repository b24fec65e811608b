"""A streaming query whose driver is killed (SIGKILL, JVM included) and restarted from its
checkpoint loses nothing, and writes again at most the micro-batch that was in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import confluent_kafka

TIMEOUT_SECONDS = 120.0
RECORDS = 3000
PER_BATCH = 200  # maxOffsetsPerTrigger: the most a restart may write twice

# topic -> topic through Spark, one micro-batch per trigger, until killed ("run") or
# until everything there was at its start has been copied ("finish").
_DRIVER = """
import sys
from odradek.spark.session import local_session
bootstrap, source, sink, checkpoint, mode = sys.argv[1:6]
spark = local_session("killed-driver", master="local[2]")
df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
      .option("subscribe", source).option("startingOffsets", "earliest")
      .option("maxOffsetsPerTrigger", sys.argv[6]).load())
writer = (df.select("key", "value").writeStream.format("odradek")
          .option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
          .option("checkpointLocation", checkpoint))
writer = writer.trigger(availableNow=True) if mode == "finish" else writer
query = writer.start()
print("started", flush=True)
query.awaitTermination()
"""


def driver(bootstrap: str, source: str, sink: str, checkpoint, mode: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _DRIVER, bootstrap, source, sink, str(checkpoint), mode,
         str(PER_BATCH)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)  # its own process group: the JVM dies with it


def sink_values(bootstrap: str, sink: str, partitions: int) -> Counter:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                                         "enable.partition.eof": True})
    consumer.assign([confluent_kafka.TopicPartition(sink, p, 0) for p in range(partitions)])
    got: Counter = Counter()
    ended: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(ended) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is None:
                got[message.value()] += 1
            elif message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                ended.add(message.partition())
    finally:
        consumer.close()
    return got


def test_a_killed_driver_restarts_from_its_checkpoint_losing_nothing(
        bootstrap, topic, produce, tmp_path):
    source, sink = topic(partitions=2), topic(partitions=2)
    values = [b"%06d" % i for i in range(RECORDS)]
    produce(source, values)
    checkpoint = tmp_path / "checkpoint"

    running = driver(bootstrap, source, sink, checkpoint, "run")
    try:  # kill it mid-stream: some batches written, not all
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while sum(sink_values(bootstrap, sink, 2).values()) < RECORDS // 3:
            assert running.poll() is None, "the driver exited on its own"
            assert time.monotonic() < deadline, "the query wrote too little in time"
            time.sleep(0.5)
    finally:
        os.killpg(running.pid, signal.SIGKILL)
        running.wait(TIMEOUT_SECONDS)
    written_before_restart = sum(sink_values(bootstrap, sink, 2).values())
    assert written_before_restart < RECORDS, "killed too late to test anything"

    restarted = driver(bootstrap, source, sink, checkpoint, "finish")
    try:
        assert restarted.wait(TIMEOUT_SECONDS) == 0
    finally:
        if restarted.poll() is None:
            os.killpg(restarted.pid, signal.SIGKILL)

    got = sink_values(bootstrap, sink, 2)
    assert set(got) == set(values)  # nothing lost
    written_twice = sum(count - 1 for count in got.values())
    assert written_twice <= PER_BATCH  # at most the micro-batch in flight at the kill
