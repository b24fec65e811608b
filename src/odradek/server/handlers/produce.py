"""Produce (key 0): validate each partition's batch, append it, answer with its offset.

The batch is checked (size, CRC32C, header sanity, keys on compacted topics, record
timestamps when the topic bounds them) and appended as received, stamped with its offsets
(DESIGN.md decision 3). A batch from an idempotent producer is also checked against the
partition's producer state (KIP-98): a retry of a batch already written is answered with its
original offsets, a gap in the sequences with OUT_OF_ORDER_SEQUENCE_NUMBER, a fenced epoch
with INVALID_PRODUCER_EPOCH. acks=0 gets no response; acks=1 and acks=-1 are answered once
the leader has the batch in its log, which on a single node is also the whole ISR.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.log import LogError
from odradek.metadata.model import INTERNAL_TOPICS
from odradek.protocol.api import ApiKey
from odradek.protocol.records import (
    NO_TIMESTAMP,
    CompressionType,
    RecordBatch,
    RecordsError,
    validate_produce_records,
)
from odradek.replication.partition import Partition, TopicPartition
from odradek.server.handlers import RequestContext, handles

log = logging.getLogger(__name__)

VALID_ACKS = (0, 1, -1)
# Kafka lets only its admin tools write to internal topics (ReplicaManager.appendToLocalLog).
ADMIN_CLIENT_ID = "__admin_client"
# KIP-110: zstd batches need Produce v7, so that older clients are never handed zstd data.
ZSTD_MIN_VERSION = 7
# The default of the message.timestamp.*.max.ms configs (Long.MAX_VALUE): no bound.
UNBOUNDED = 2**63 - 1


class InvalidTimestampError(RecordsError):
    """CreateTime records outside the topic's bounds; ``record_errors`` names each one by its
    index in the batch (Produce v8+, KIP-467)."""

    error_code = ErrorCode.invalid_timestamp

    def __init__(self, record_errors: list[dict]) -> None:
        # Kafka's message whatever the count; the details are in the record errors.
        super().__init__("One or more records have been rejected due to invalid timestamp")
        self.record_errors = record_errors


def _partition_error(index: int, error: ErrorCode, message: str | None = None,
                     record_errors: list[dict] | tuple = ()) -> dict:
    return {"index": index, "error_code": error, "base_offset": -1, "log_append_time": -1,
            "log_start_offset": -1, "record_errors": record_errors, "error_message": message}


@handles(ApiKey.PRODUCE)
def handle_produce(ctx: RequestContext, request) -> object:
    responses = []
    flushes: list[tuple[dict, Partition, int]] = []
    for topic_data in request.topic_data:
        partitions = []
        for data in topic_data.partition_data:
            answer, flush_to = _produce_partition(ctx, topic_data.name, data.index,
                                                  data.records, request.acks)
            partitions.append(answer)
            if flush_to is not None:
                flushes.append((answer, *flush_to))
        responses.append({"name": topic_data.name, "partition_responses": partitions})
    if request.acks == 0:
        return None  # the log flusher task fsyncs what flush.messages asks for
    if flushes:
        return _respond_once_flushed(ctx, responses, flushes)
    return ctx.respond(responses=responses, throttle_time=0)


async def _respond_once_flushed(ctx: RequestContext, responses: list[dict],
                                flushes: list[tuple[dict, Partition, int]]) -> object:
    """flush.messages was reached: the answer waits for the fsync, which runs on a thread so
    that the event loop keeps serving everyone else, and an acknowledged batch is on disk."""
    loop = asyncio.get_running_loop()
    outcomes = await asyncio.gather(
        *(loop.run_in_executor(None, partition.log.flush_to, offset)
          for _, partition, offset in flushes),
        return_exceptions=True,
    )
    for (answer, partition, _), outcome in zip(flushes, outcomes):
        if isinstance(outcome, OSError):  # KafkaStorageError: the log dir is now offline
            log.error("flush of %s failed: %s", partition.topic_partition, outcome)
            answer.update(_partition_error(answer["index"], ErrorCode.kafka_storage_error,
                                           str(outcome)))
        elif isinstance(outcome, BaseException):
            raise outcome
    return ctx.respond(responses=responses, throttle_time=0)


def _produce_partition(ctx: RequestContext, topic: str, index: int, records,
                       acks: int) -> tuple[dict, tuple[Partition, int] | None]:
    """The partition's answer, and (partition, offset) when it must be flushed to that
    offset before the answer goes out."""
    if acks not in VALID_ACKS:
        return _partition_error(index, ErrorCode.invalid_required_acks), None
    replica_manager = ctx.broker.replica_manager
    partition = replica_manager.get_partition(TopicPartition(topic, index))
    if partition is None:
        return _partition_error(index, ErrorCode.unknown_topic_or_partition), None
    if topic in INTERNAL_TOPICS and ctx.request.client_id != ADMIN_CLIENT_ID:
        return _partition_error(index, ErrorCode.invalid_topic_exception,
                                f"Cannot append to internal topic {topic}"), None
    config = partition.topic_config
    try:
        batch = validate_produce_records(
            records,
            max_message_bytes=config["max.message.bytes"],
            require_keys="compact" in config["cleanup.policy"],
        )
        if batch.size_in_bytes > config["segment.bytes"]:
            # Kafka: a batch that can never fit in a segment is RECORD_LIST_TOO_LARGE.
            return _partition_error(
                index, ErrorCode.record_list_too_large,
                f"{batch.size_in_bytes} bytes exceed segment.bytes ({config['segment.bytes']})",
            ), None
        if batch.compression_type == CompressionType.ZSTD and ctx.api_version < ZSTD_MIN_VERSION:
            return _partition_error(index, ErrorCode.unsupported_compression_type), None
        _validate_timestamps(batch, config, replica_manager.clock())
        info = replica_manager.append(partition, bytearray(records))
    except InvalidTimestampError as exc:
        return _partition_error(index, exc.error_code, str(exc), exc.record_errors), None
    except (RecordsError, LogError) as exc:
        return _partition_error(index, exc.error_code, str(exc)), None
    except OSError as exc:
        log.error("append to %s failed: %s", partition.topic_partition, exc)
        return _partition_error(index, ErrorCode.kafka_storage_error, str(exc)), None
    answer = {
        "index": index,
        "error_code": ErrorCode.none,
        "base_offset": info.first_offset,
        "log_append_time": info.log_append_time,
        "log_start_offset": info.log_start_offset,
        "record_errors": (),
        "error_message": None,
    }
    return answer, (partition, info.last_offset + 1) if info.needs_flush else None


def _validate_timestamps(batch: RecordBatch, config: Mapping[str, Any], now_ms: int) -> None:
    """Kafka's ``LogValidator.validateTimestamp``: on a CreateTime topic, every record's
    timestamp must lie within [now - before.max.ms, now + after.max.ms].

    Records are decoded only when a bound is set: by default there is none and the produce
    path stays header-only (DESIGN.md decision 3). The batch's max timestamp alone cannot
    decide the lower bound, and is the producer's word for the upper one.
    """
    if config["message.timestamp.type"] != "CreateTime":
        return  # LogAppendTime: the broker's clock replaces every timestamp
    before_max_ms, after_max_ms = _timestamp_bounds(config)
    if before_max_ms == UNBOUNDED and after_max_ms == UNBOUNDED:
        return
    errors = []
    for batch_index, record in enumerate(batch.records()):
        if record.timestamp == NO_TIMESTAMP:
            continue
        if now_ms - record.timestamp > before_max_ms or record.timestamp - now_ms > after_max_ms:
            errors.append({
                "batch_index": batch_index,
                "batch_index_error_message": (
                    f"Timestamp {record.timestamp} of message with offset {record.offset} is "
                    f"out of range. The timestamp should be within "
                    f"[{now_ms - before_max_ms}, {now_ms + after_max_ms}]"
                ),
            })
    if errors:
        raise InvalidTimestampError(errors)


def _timestamp_bounds(config: Mapping[str, Any]) -> tuple[int, int]:
    """(before.max.ms, after.max.ms); each unset one falls back to the deprecated
    message.timestamp.difference.max.ms, as in Kafka 3.6+ (KIP-937)."""
    difference_max_ms = config["message.timestamp.difference.max.ms"]
    before_max_ms = config["message.timestamp.before.max.ms"]
    after_max_ms = config["message.timestamp.after.max.ms"]
    return (difference_max_ms if before_max_ms == UNBOUNDED else before_max_ms,
            difference_max_ms if after_max_ms == UNBOUNDED else after_max_ms)
