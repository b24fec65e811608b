"""Produce (key 0): validate each partition's batch, append it, answer with its offset.

The batch is checked by the log validator (size, CRC32C, header sanity, keys on compacted
topics, record timestamps when the topic bounds them; each refused record is named, KIP-467)
and appended as received, stamped with its offsets (DESIGN.md decision 3). A batch from an
idempotent producer is also checked against the partition's producer state (KIP-98): a
retry of a batch already written is answered with its original offsets, a gap in the
sequences with OUT_OF_ORDER_SEQUENCE_NUMBER, a fenced epoch with INVALID_PRODUCER_EPOCH.
acks=0 gets no response; acks=1 and acks=-1 are answered once the leader has the batch in
its log, which on a single node is also the whole ISR.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from kio.schema.errors import ErrorCode

from odradek.log import LogError
from odradek.log.validator import (
    AppendOrigin,
    RecordValidationError,
    analyze_and_validate,
    validate_for_leader,
)
from odradek.metadata.model import INTERNAL_TOPICS
from odradek.protocol.api import ApiKey
from odradek.protocol.records import RecordsError
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.partition import Partition
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.handlers import RequestContext, handles

log = logging.getLogger(__name__)

VALID_ACKS = (0, 1, -1)
# Kafka lets only its admin tools write to internal topics (ReplicaManager.appendToLocalLog).
ADMIN_CLIENT_ID = "__admin_client"


def _partition_error(index: int, error: ErrorCode, message: str | None = None,
                     record_errors: list[dict] | tuple = ()) -> dict:
    return {"index": index, "error_code": error, "base_offset": -1, "log_append_time": -1,
            "log_start_offset": -1, "record_errors": record_errors, "error_message": message}


@handles(ApiKey.PRODUCE)
def handle_produce(ctx: RequestContext, request, replica_manager: ReplicaManager) -> object:
    responses = []
    flushes: list[tuple[dict, Partition, int]] = []
    for topic_data in request.topic_data:
        partitions = []
        for data in topic_data.partition_data:
            answer, flush_to = _produce_partition(ctx, replica_manager, topic_data.name,
                                                  data.index, data.records, request.acks)
            partitions.append(answer)
            if flush_to is not None:
                flushes.append((answer, *flush_to))
        responses.append({"name": topic_data.name, "partition_responses": partitions})
    if request.acks == 0:
        return None  # the log flusher task fsyncs what flush.messages asks for
    if flushes:
        return _respond_once_flushed(ctx, responses, flushes)
    return ctx.respond(responses=responses)


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
    return ctx.respond(responses=responses)


def _produce_partition(ctx: RequestContext, replica_manager: ReplicaManager, topic: str,
                       index: int, records, acks: int
                       ) -> tuple[dict, tuple[Partition, int] | None]:
    """The partition's answer, and (partition, offset) when it must be flushed to that
    offset before the answer goes out."""
    if acks not in VALID_ACKS:
        return _partition_error(index, ErrorCode.invalid_required_acks), None
    partition = replica_manager.get_partition(TopicPartition(topic, index))
    if partition is None:
        return _partition_error(index, ErrorCode.unknown_topic_or_partition), None
    if topic in INTERNAL_TOPICS and ctx.client_id != ADMIN_CLIENT_ID:
        return _partition_error(index, ErrorCode.invalid_topic_exception,
                                f"Cannot append to internal topic {topic}"), None
    config = partition.topic_config
    try:
        batch = analyze_and_validate(records, origin=AppendOrigin.CLIENT,
                                     max_message_bytes=config["max.message.bytes"])
        validate_for_leader(batch, config, topic_partition=partition.topic_partition,
                            origin=AppendOrigin.CLIENT, now_ms=replica_manager.clock(),
                            produce_version=ctx.api_version)
        info = replica_manager.append(partition, bytearray(records))
    except RecordValidationError as exc:
        # KIP-467: Produce v8+ names each refused record; older versions drop the field.
        record_errors = [dataclasses.asdict(error) for error in exc.record_errors]
        return _partition_error(index, exc.error_code, exc.error_message, record_errors), None
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
