"""Produce (key 0): validate each partition's batch, append it, answer with its offset.

The batch is checked (size, CRC32C, header sanity, keys on compacted topics) and appended
as received, stamped with its offsets (DESIGN.md decision 3). acks=0 gets no response;
acks=1 and acks=-1 are answered once the leader has the batch in its log, which on a single
node is also the whole ISR.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.protocol.records import CompressionType, RecordsError, validate_produce_records
from odradek.replication.partition import TopicPartition
from odradek.server.handlers import RequestContext, handles

log = logging.getLogger(__name__)

VALID_ACKS = (0, 1, -1)
# KIP-110: zstd batches need Produce v7, so that older clients are never handed zstd data.
ZSTD_MIN_VERSION = 7


def _partition_error(index: int, error: ErrorCode, message: str | None = None) -> dict:
    return {"index": index, "error_code": error, "base_offset": -1, "log_append_time": -1,
            "log_start_offset": -1, "record_errors": (), "error_message": message}


@handles(ApiKey.PRODUCE)
def handle_produce(ctx: RequestContext, request) -> object:
    responses = []
    for topic_data in request.topic_data:
        partitions = [
            _produce_partition(ctx, topic_data.name, data.index, data.records, request.acks)
            for data in topic_data.partition_data
        ]
        responses.append({"name": topic_data.name, "partition_responses": partitions})
    if request.acks == 0:
        return None
    return ctx.respond(responses=responses, throttle_time=0)


def _produce_partition(ctx: RequestContext, topic: str, index: int, records, acks: int) -> dict:
    if acks not in VALID_ACKS:
        return _partition_error(index, ErrorCode.invalid_required_acks)
    replica_manager = ctx.broker.replica_manager
    partition = replica_manager.get_partition(TopicPartition(topic, index))
    if partition is None:
        return _partition_error(index, ErrorCode.unknown_topic_or_partition)
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
            )
        if batch.compression_type == CompressionType.ZSTD and ctx.api_version < ZSTD_MIN_VERSION:
            return _partition_error(index, ErrorCode.unsupported_compression_type)
        info = replica_manager.append(partition, bytearray(records))
    except RecordsError as exc:
        return _partition_error(index, exc.error_code, str(exc))
    except OSError as exc:
        log.error("append to %s failed: %s", partition.topic_partition, exc)
        return _partition_error(index, ErrorCode.kafka_storage_error, str(exc))
    return {
        "index": index,
        "error_code": ErrorCode.none,
        "base_offset": info.first_offset,
        "log_append_time": info.log_append_time,
        "log_start_offset": info.log_start_offset,
        "record_errors": (),
        "error_message": None,
    }
