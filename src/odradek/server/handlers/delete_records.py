"""DeleteRecords (key 21, KIP-107): move a partition's log start offset forward.

Records below the new log start offset are no longer readable (a consumer starting from the
earliest offset starts there) and segments wholly below it are deleted. Per partition, as
Kafka 3.9 (KafkaApis.handleDeleteRecordsRequest, ReplicaManager.deleteRecordsOnLocalLog,
Partition.deleteRecordsOnLeader):

* without DELETE on the topic, TOPIC_AUTHORIZATION_FAILED, whether or not it exists;
* an unknown partition is UNKNOWN_TOPIC_OR_PARTITION, one not led here NOT_LEADER_OR_FOLLOWER;
* internal topics are refused with INVALID_TOPIC_EXCEPTION;
* a topic whose ``cleanup.policy`` lacks ``delete`` is a POLICY_VIOLATION;
* offset -1 means the high watermark; a negative offset or one past the high watermark is
  OFFSET_OUT_OF_RANGE;
* the answer is the partition's low watermark: its log start offset afterwards.

The answer waits until every replica's log start offset reached the new one (Kafka's
DelayedDeleteRecords), or until the request's timeout; on a single node that is at once.
"""

from __future__ import annotations

from collections.abc import Iterator

from kio.schema.errors import ErrorCode

from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.protocol.messages import millis
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.delayed_produce import DeleteRecordsPartitionStatus
from odradek.replication.replica_manager import ReplicaManager
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles

INVALID_LOW_WATERMARK = -1


@handles(ApiKey.DELETE_RECORDS)
def handle_delete_records(ctx: RequestContext, request, metadata: MetadataStore,
                          replica_manager: ReplicaManager) -> object:
    wanted = [(TopicPartition(topic.name, p.partition_index), p.offset)
              for topic in request.topics for p in topic.partitions]
    deletable = ctx.authorized_names(AclOperation.DELETE, ResourceType.TOPIC,
                                     {topic.name for topic in request.topics})
    refused = [_metadata_error(metadata, tp) if tp.topic in deletable
               else ErrorCode.topic_authorization_failed for tp, _ in wanted]
    completion: Completion[list[DeleteRecordsPartitionStatus]] = Completion()
    replica_manager.delete_records(
        [entry for entry, error in zip(wanted, refused) if error is ErrorCode.none],
        timeout_ms=millis(request.timeout), respond=completion)
    return completion.then(lambda deleted: _response(ctx, request, refused, iter(deleted)))


def _response(ctx: RequestContext, request, refused: list[ErrorCode],
              deleted: Iterator[DeleteRecordsPartitionStatus]) -> object:
    """The answers in request order: the refusal, or the next deletion's."""
    errors = iter(refused)
    return ctx.respond(topics=[
        {"name": topic.name,
         "partitions": [_result(p.partition_index, next(errors), deleted)
                        for p in topic.partitions]}
        for topic in request.topics])


def _metadata_error(metadata: MetadataStore, tp: TopicPartition) -> ErrorCode:
    topic = metadata.topic(tp.topic)
    if topic is None or not 0 <= tp.partition < len(topic.partitions):
        return ErrorCode.unknown_topic_or_partition
    if topic.is_internal:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.none


def _result(index: int, refused: ErrorCode,
            deleted: Iterator[DeleteRecordsPartitionStatus]) -> dict:
    if refused is not ErrorCode.none:
        return {"partition_index": index, "low_watermark": INVALID_LOW_WATERMARK,
                "error_code": refused}
    status = next(deleted)
    low_watermark = (status.low_watermark if status.error is ErrorCode.none
                     else INVALID_LOW_WATERMARK)
    return {"partition_index": index, "low_watermark": low_watermark, "error_code": status.error}
