"""DeleteRecords (key 21, KIP-107): move a partition's log start offset forward.

Records below the new log start offset are no longer readable (a consumer starting from the
earliest offset starts there) and segments wholly below it are deleted. Per partition, as
Kafka 3.9 (ReplicaManager.deleteRecordsOnLocalLog, Partition.deleteRecordsOnLeader):

* an unknown partition is UNKNOWN_TOPIC_OR_PARTITION, one not led here NOT_LEADER_OR_FOLLOWER;
* internal topics are refused with INVALID_TOPIC_EXCEPTION;
* a topic whose ``cleanup.policy`` lacks ``delete`` is a POLICY_VIOLATION;
* offset -1 means the high watermark; a negative offset or one past the high watermark is
  OFFSET_OUT_OF_RANGE;
* the answer is the partition's low watermark: its log start offset afterwards.

On a single node every replica is at the new log start offset at once, so Kafka's wait for
the followers (DelayedDeleteRecords) is never needed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.log import OffsetOutOfRangeError
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.handlers import RequestContext, handles

HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK
INVALID_LOW_WATERMARK = -1


@handles(ApiKey.DELETE_RECORDS)
def handle_delete_records(ctx: RequestContext, request, metadata: MetadataStore,
                          replica_manager: ReplicaManager) -> object:
    topics = [
        {"name": topic.name,
         "partitions": [_delete(metadata, replica_manager, topic.name, p.partition_index,
                                p.offset)
                        for p in topic.partitions]}
        for topic in request.topics
    ]
    return ctx.respond(topics=topics)


def _delete(store: MetadataStore, replica_manager: ReplicaManager, topic_name: str,
            index: int, offset: int) -> dict:
    topic = store.topic(topic_name)
    if topic is None or not 0 <= index < len(topic.partitions):
        return _result(index, ErrorCode.unknown_topic_or_partition)
    if topic.is_internal:
        return _result(index, ErrorCode.invalid_topic_exception)
    partition = replica_manager.get_partition(TopicPartition(topic_name, index))
    if partition is None:
        return _result(index, ErrorCode.not_leader_or_follower)
    if "delete" not in partition.topic_config["cleanup.policy"]:
        return _result(index, ErrorCode.policy_violation)
    if offset == HIGH_WATERMARK:
        offset = partition.high_watermark
    try:
        low_watermark = partition.log.delete_records_before(offset)
    except OffsetOutOfRangeError:
        return _result(index, ErrorCode.offset_out_of_range)
    return _result(index, ErrorCode.none, low_watermark)


def _result(index: int, error: ErrorCode, low_watermark: int = INVALID_LOW_WATERMARK) -> dict:
    return {"partition_index": index, "low_watermark": low_watermark, "error_code": error}
