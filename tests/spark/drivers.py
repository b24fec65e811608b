"""A streaming query from one topic to another in a driver process of its own, so that a test
can kill it (SIGKILL: the JVM and the Python workers die with it) and restart it from its
checkpoint; and what a topic holds, counted by value, as a reader of either isolation level
sees it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin

TIMEOUT_SECONDS = 120.0
# HotSpot's optimizing compiler (C2) pays off in a JVM that runs for long: the tests' Spark
# drivers live for seconds to minutes, and on two cores C2's compiling takes turns with
# their work. With the quick compiler (C1) alone, a session starts and runs its first jobs
# a quarter to a third faster. ``spark.driver.extraJavaOptions`` of a session this process
# starts; ``SPARK_SUBMIT_OPTS`` in the environment of a command that starts one.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1"

# Reads ``source`` from the beginning, ``per_batch`` records per micro-batch, and writes
# ``key`` and the ``value`` expression to ``sink``, until killed or, with ``finish``, until
# everything there was at its start has been copied. With ``attempts`` (a file), the first
# attempt of every task fails, by micro-batch id: halfway through its rows by raising or by
# killing its Python worker, or after its write succeeded; every write that succeeds appends
# a line to that file.
_DRIVER = r"""
import json
import os
import sys
import time

from pyspark import TaskContext

from odradek.spark.session import local_session
from odradek.spark.source import OdradekDataSource
from odradek.spark.writer import StreamWriter

config = json.loads(sys.argv[1])
FAULTS = ("raise", "crash", "after-write")


def halfway(iterator, fault):
    for batch in iterator:
        yield batch.slice(0, (batch.num_rows + 1) // 2)
        time.sleep(1)  # the producer sends what it was given (linger.ms is 5)
        if fault == "crash":
            os._exit(1)
        raise RuntimeError("injected failure halfway through the rows")


class FailingFirstAttempts(StreamWriter):
    def write(self, iterator):
        context = TaskContext.get()
        batch = int(context.getLocalProperty("streaming.sql.batchId"))
        attempt = context.attemptNumber()
        fault = FAULTS[batch % len(FAULTS)] if attempt == 0 else None
        if fault in ("raise", "crash"):
            iterator = halfway(iterator, fault)
        result = super().write(iterator)
        with open(config["attempts"], "a") as attempts:
            attempts.write(json.dumps({"batch": batch, "partition": context.partitionId(),
                                       "attempt": attempt, "records": result.records}) + "\n")
        if fault == "after-write":
            raise RuntimeError("injected failure after the write")
        return result


class OdradekWithFaults(OdradekDataSource):
    @classmethod
    def name(cls):
        return "odradek_with_faults"

    def streamWriter(self, schema, overwrite):
        return FailingFirstAttempts(super().streamWriter(schema, overwrite).options)


spark = local_session("copy", master=config["master"],
                      **{"spark.driver.extraJavaOptions": config["jvm_options"]})
spark.dataSource.register(OdradekWithFaults)
df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", config["bootstrap"])
      .option("subscribe", config["source"]).option("startingOffsets", "earliest")
      .option("maxOffsetsPerTrigger", config["per_batch"]).load())
writer = (df.selectExpr("key", f"{config['value']} AS value").writeStream
          .format("odradek_with_faults" if config["attempts"] else "odradek")
          .option("kafka.bootstrap.servers", config["bootstrap"])
          .option("topic", config["sink"])
          .option("checkpointLocation", config["checkpoint"]))
for name, value in config["sink_options"].items():
    writer = writer.option(name, value)
if config["finish"]:
    writer = writer.trigger(availableNow=True)
query = writer.start()
query.awaitTermination()
"""


@dataclass(frozen=True)
class CopyQuery:
    bootstrap: str
    source: str
    sink: str
    checkpoint: Path
    per_batch: int  # maxOffsetsPerTrigger
    value: str = "value"  # a SQL expression over the source's columns
    sink_options: dict[str, str] = field(default_factory=dict)
    master: str = "local[2]"
    attempts: Path | None = None  # fail first attempts, see _DRIVER

    def start(self, *, finish: bool = False) -> subprocess.Popen:
        """The driver, in a process group of its own; its stderr goes to ``driver.log`` next
        to the checkpoint."""
        config = {"bootstrap": self.bootstrap, "source": self.source, "sink": self.sink,
                  "checkpoint": str(self.checkpoint), "per_batch": self.per_batch,
                  "value": self.value, "sink_options": self.sink_options,
                  "master": self.master, "jvm_options": JVM_OPTIONS, "finish": finish,
                  "attempts": str(self.attempts) if self.attempts else None}
        with open(self.log, "a") as log:
            return subprocess.Popen([sys.executable, "-c", _DRIVER, json.dumps(config)],
                                    stdout=subprocess.DEVNULL, stderr=log,
                                    start_new_session=True)

    @property
    def log(self) -> Path:
        return self.checkpoint.with_name("driver.log")

    def run_to_end(self) -> None:
        """Runs the query until it has copied what the source holds."""
        driver = self.start(finish=True)
        try:
            code = driver.wait(TIMEOUT_SECONDS)
            assert code == 0, f"the driver failed:\n{self.log.read_text()[-3000:]}"
        finally:
            if driver.poll() is None:
                kill(driver)

    def last_batch(self, log: str) -> int:
        """The last micro-batch in the checkpoint's ``offsets`` or ``commits`` log, or -1."""
        directory = self.checkpoint / log
        ids = [int(f.name) for f in directory.iterdir() if f.name.isdigit()] \
            if directory.exists() else []
        return max(ids, default=-1)


def kill(driver: subprocess.Popen) -> None:
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(TIMEOUT_SECONDS)


def topic_values(bootstrap: str, topic: str, partitions: int,
                 read_committed: bool = False) -> Counter:
    """How many times each value is in ``topic``. A read_committed reader first waits for
    every transaction on the topic to end, so that it counts all there will be."""
    if read_committed:
        _await_no_open_transaction(bootstrap, topic, partitions)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "check", "enable.partition.eof": True,
        "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
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


def _await_no_open_transaction(bootstrap: str, topic: str, partitions: int) -> None:
    """Until each partition's last stable offset is its high watermark."""
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    spec = {confluent_kafka.TopicPartition(topic, p): confluent_kafka.admin.OffsetSpec.latest()
            for p in range(partitions)}

    def ends(isolation: confluent_kafka.IsolationLevel) -> list[int]:
        futures = admin.list_offsets(spec, isolation_level=isolation)
        return [futures[tp].result(TIMEOUT_SECONDS).offset for tp in spec]

    deadline = time.monotonic() + TIMEOUT_SECONDS
    while (stable := ends(confluent_kafka.IsolationLevel.READ_COMMITTED)) != (
            high := ends(confluent_kafka.IsolationLevel.READ_UNCOMMITTED)):
        assert time.monotonic() < deadline, (
            f"transactions still open on {topic}: last stable offsets {stable}, high "
            f"watermarks {high}")
        time.sleep(0.5)
