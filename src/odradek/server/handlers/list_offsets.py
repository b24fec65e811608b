"""ListOffsets (key 2): earliest, latest, max-timestamp and by-timestamp offsets."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.log import LogError
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.partition import Partition, PartitionError
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.handlers import RequestContext, handles

# Special timestamps of ListOffsets (KIP-79, KIP-734).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
UNKNOWN = -1


@handles(ApiKey.LIST_OFFSETS)
def handle_list_offsets(ctx: RequestContext, request, replica_manager: ReplicaManager) -> object:
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            try:
                partition = replica_manager.leader_partition(
                    TopicPartition(topic.name, wanted.partition_index),
                    getattr(wanted, "current_leader_epoch", -1))
            except PartitionError as e:
                partitions.append(_answer(wanted.partition_index, e.error_code))
                continue
            try:
                offset, timestamp = _lookup(partition, wanted.timestamp)
            except LogError as e:  # KAFKA_STORAGE_ERROR: the partition's log dir failed
                partitions.append(_answer(wanted.partition_index, e.error_code))
                continue
            partitions.append(_answer(wanted.partition_index, ErrorCode.none, offset, timestamp,
                                      partition.leader_epoch if offset >= 0 else -1))
        topics.append({"name": topic.name, "partitions": partitions})
    return ctx.respond(topics=topics)


def _lookup(partition: Partition, timestamp: int) -> tuple[int, int]:
    partition.log.check_online()  # the offsets in memory of an offline log are no answer
    if timestamp == LATEST_TIMESTAMP:
        return partition.high_watermark, UNKNOWN
    if timestamp == EARLIEST_TIMESTAMP:
        return partition.log_start_offset, UNKNOWN
    if timestamp == MAX_TIMESTAMP:
        found = partition.log.max_timestamp_and_offset()
    else:
        found = partition.log.offset_for_timestamp(timestamp)
    if found is None:
        return UNKNOWN, UNKNOWN
    offset, found_timestamp = found
    if offset >= partition.high_watermark:
        return UNKNOWN, UNKNOWN
    return offset, found_timestamp


def _answer(index: int, error: ErrorCode, offset: int = UNKNOWN, timestamp: int = UNKNOWN,
            leader_epoch: int = -1) -> dict:
    return {"partition_index": index, "error_code": error, "timestamp": timestamp,
            "offset": offset, "old_style_offsets": (), "leader_epoch": leader_epoch}
