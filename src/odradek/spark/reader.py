"""Reading one :class:`OffsetRange` into Arrow record batches, on an executor.

A task assigns its one partition to a confluent-kafka consumer (no group membership, no
commits), positions it at the range's start and consumes until the range's end. The end is
reached when a record at or past it arrives, or when the consumer reports the partition's
end at or past it: compaction and transaction markers leave gaps, so the record at
``end - 1`` may not exist.

Records become columns of Spark's Kafka schema (``schema.py``) in chunks of
:data:`CHUNK_RECORDS`, so the Python work per record is a handful of attribute reads.
"""

from __future__ import annotations

import contextlib
import gc
import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pyarrow as pa
import pyarrow.compute as pc

from odradek.spark.offsets import OffsetRange, data_loss
from odradek.spark.options import SourceOptions

CHUNK_RECORDS = 20_000
CONSUME_TIMEOUT_SECONDS = 0.5

# confluent-kafka's timestamp types, as the Kafka ids Spark's ``timestampType`` column uses
_TIMESTAMP_TYPE = {confluent_kafka.TIMESTAMP_CREATE_TIME: 0,
                   confluent_kafka.TIMESTAMP_LOG_APPEND_TIME: 1,
                   confluent_kafka.TIMESTAMP_NOT_AVAILABLE: -1}


def read_range(r: OffsetRange, options: SourceOptions, schema: pa.Schema
               ) -> Iterator[pa.RecordBatch]:
    consumer = confluent_kafka.Consumer({
        "group.id": f"{options.group_id_prefix}-{uuid.uuid4()}",
        # librdkafka stops fetching for fetch.queue.backoff.ms (1 s) whenever its queue holds
        # queued.min.messages, which the task drains far sooner. Not 0: librdkafka's broker
        # thread would then re-check the full queue in a busy loop, taking CPU from the task.
        "fetch.queue.backoff.ms": 10,
        "fetch.max.bytes": 64 << 20,
        "max.partition.fetch.bytes": 8 << 20,
        **options.client_config,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    })
    try:
        consumer.assign([confluent_kafka.TopicPartition(r.topic, r.partition, r.start)])
        with _without_cyclic_gc():
            yield from _consume(consumer, r, options, schema)
    finally:
        consumer.close()


@contextlib.contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """Reading creates no reference cycles, but tens of thousands of tracked objects per
    chunk (confluent-kafka's messages, timestamp tuples), so the cyclic collector runs over
    and over walking them: with it on, a range reads at about half the speed. A Spark
    Python worker runs one task at a time, so pausing it affects only this read."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _consume(consumer: confluent_kafka.Consumer, r: OffsetRange, options: SourceOptions,
             schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    position = r.start
    deadline = time.monotonic() + options.poll_timeout_ms / 1000
    while position < r.end:
        # never more than the range can still hold: consume() waits for a full chunk
        messages = consumer.consume(min(CHUNK_RECORDS, r.end - position), CONSUME_TIMEOUT_SECONDS)
        records = []
        for message in messages:
            error = message.error()
            if error is None:
                records.append(message)
            elif error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                position = max(position, message.offset())
            elif error.code() == confluent_kafka.KafkaError._AUTO_OFFSET_RESET:
                position = _skip_lost(consumer, r, options)
            else:
                raise confluent_kafka.KafkaException(error)
        if records:
            position = records[-1].offset() + 1
            if position > r.end:
                records = [m for m in records if m.offset() < r.end]
            if records:
                yield to_record_batch(records, r, options.include_headers, schema)
            deadline = time.monotonic() + options.poll_timeout_ms / 1000
        elif time.monotonic() > deadline:
            raise TimeoutError(f"no record of {r.topic}-{r.partition} after offset {position} "
                               f"within {options.poll_timeout_ms} ms, though the range ends at "
                               f"{r.end} ('kafkaConsumer.pollTimeoutMs')")


def _skip_lost(consumer: confluent_kafka.Consumer, r: OffsetRange,
               options: SourceOptions) -> int:
    """The range's start is below the partition's log start: retention or DeleteRecords
    removed records this task was to read."""
    low, _ = consumer.get_watermark_offsets(
        confluent_kafka.TopicPartition(r.topic, r.partition), timeout=10)
    data_loss(options, f"offsets {r.start}..{low - 1} of {r.topic}-{r.partition} were deleted "
                       "before they were read")
    if low >= r.end:
        return r.end
    consumer.assign([confluent_kafka.TopicPartition(r.topic, r.partition, low)])
    return low


def to_record_batch(messages: list[confluent_kafka.Message], r: OffsetRange,
                    include_headers: bool, schema: pa.Schema) -> pa.RecordBatch:
    count = len(messages)
    timestamps = [m.timestamp() for m in messages]
    columns = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.repeat(pa.scalar(r.topic, pa.string()), count),
        pa.repeat(pa.scalar(r.partition, pa.int32()), count),
        pa.array([m.offset() for m in messages], pa.int64()),
        pc.multiply(pa.array([t[1] for t in timestamps], pa.int64()), 1000).cast(
            schema.field("timestamp").type),
        pa.array([_TIMESTAMP_TYPE[t[0]] for t in timestamps], pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array([_headers(m) for m in messages], schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _headers(message: confluent_kafka.Message) -> list[dict] | None:
    headers = message.headers()
    return None if not headers else [{"key": k, "value": v} for k, v in headers]

