"""Writing a DataFrame's rows as records, batch and streaming.

The columns are those of Spark's Kafka sink: ``value`` (required; string or binary, null
for a tombstone), ``key`` (string or binary), ``topic`` (string; the ``topic`` option
overrides it), ``partition`` (int; the producer's partitioner when absent or null) and,
with ``includeHeaders``, ``headers`` (array of ``struct<key: string, value: binary>``).

Each task produces its rows with one idempotent confluent-kafka producer and waits for
every acknowledgement before it reports success, so a retry inside a task never writes a
record twice and a task that succeeded has nothing left in flight. A task that fails
(and is retried by Spark) may have written part of its rows: the sink is at-least-once
across task retries, as Spark's Kafka sink is. With ``exactlyOnce`` each task writes its
rows in one transaction instead, and a retried or replayed task whose rows were committed
writes nothing (``exactly_once.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import confluent_kafka
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from odradek.spark import exactly_once
from odradek.spark.options import OptionError, SinkOptions
from odradek.spark.schema import HEADERS

FLUSH_TIMEOUT_SECONDS = 120.0


@dataclass
class WriteResult(WriterCommitMessage):
    records: int


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Fails on the driver, before any task runs, as Spark's Kafka sink does."""
    types = {f.name: f.dataType for f in schema.fields}
    allowed = {"value": (StringType(), BinaryType()), "key": (StringType(), BinaryType()),
               "topic": (StringType(),), "partition": (IntegerType(),), "headers": (HEADERS,)}
    if "value" not in types:
        raise OptionError("the data to write has no 'value' column")
    if options.topic is None and "topic" not in types:
        raise OptionError("the data to write has no 'topic' column and no 'topic' option is "
                          "set")
    for name, accepted in allowed.items():
        if name in types and types[name] not in accepted:
            raise OptionError(f"column {name!r} must be of type "
                              f"{' or '.join(t.simpleString() for t in accepted)}, not "
                              f"{types[name].simpleString()}")


class _RecordWriter:
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        if self.options.sink_id is None:
            producer = confluent_kafka.Producer({"linger.ms": 5, **self.options.client_config,
                                                 "enable.idempotence": True})
            return WriteResult(_produce(producer, iterator, self.options))
        with exactly_once.transaction(self.options) as producer:
            if producer is None:  # an earlier attempt committed these rows
                for _ in iterator:  # Spark sends the rows all the same: read them to the end
                    pass
                return WriteResult(0)
            return WriteResult(_produce(producer, iterator, self.options))


def _produce(producer: confluent_kafka.Producer, iterator: Iterator[pa.RecordBatch],
             options: SinkOptions) -> int:
    """Produces every row as a record, waits for every acknowledgement and returns how many
    records there were."""
    failures: list[confluent_kafka.KafkaError] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failures.append(error)

    written = 0
    for batch in iterator:
        for record in _records(batch, options):
            while True:
                try:
                    producer.produce(**record, on_delivery=delivered)
                    break
                except BufferError:  # the producer's queue is full: let it drain
                    producer.poll(0.1)
            written += 1
        producer.poll(0)
        if failures:
            break
    remaining = producer.flush(FLUSH_TIMEOUT_SECONDS)
    if failures:
        raise confluent_kafka.KafkaException(failures[0])
    if remaining:
        raise TimeoutError(f"{remaining} records not acknowledged within "
                           f"{FLUSH_TIMEOUT_SECONDS:.0f} s")
    return written


def _records(batch: pa.RecordBatch, options: SinkOptions) -> Iterator[dict]:
    names = batch.schema.names
    count = batch.num_rows
    values = batch.column("value").to_pylist()
    keys = batch.column("key").to_pylist() if "key" in names else [None] * count
    topics = ([options.topic] * count if options.topic is not None
              else batch.column("topic").to_pylist())
    partitions = (batch.column("partition").to_pylist() if "partition" in names
                  else [None] * count)
    headers = (batch.column("headers").to_pylist() if options.include_headers
               and "headers" in names else [None] * count)
    for value, key, topic, partition, header in zip(values, keys, topics, partitions, headers):
        if topic is None:
            raise ValueError("a row has a null 'topic' and no 'topic' option is set")
        record = {"topic": topic, "value": value, "key": key}
        if partition is not None:
            record["partition"] = partition
        if header:
            record["headers"] = [(h["key"], h["value"]) for h in header]
        yield record


class BatchWriter(_RecordWriter, DataSourceArrowWriter):
    pass


class StreamWriter(_RecordWriter, DataSourceStreamArrowWriter):
    def commit(self, messages, batchId: int) -> None:
        pass  # every record was acknowledged (or committed) before its task succeeded

    def abort(self, messages, batchId: int) -> None:
        # Records of failed tasks stay written (at-least-once) or were aborted with their
        # transaction (exactlyOnce): see the module docstring.
        pass
