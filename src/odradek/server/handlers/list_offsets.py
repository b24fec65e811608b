"""ListOffsets (key 2): earliest, latest, max-timestamp and by-timestamp offsets.

Each partition answers through ``ReplicaManager.fetch_offset_for_timestamp``, against the
bound its caller may see: the high watermark for a consumer reading uncommitted data, the
last stable offset for ``read_committed``, the log end offset for a replica (KIP-79,
KIP-734). A topic the client may not DESCRIBE has each partition answered
TOPIC_AUTHORIZATION_FAILED, whoever asks (Kafka's ``KafkaApis.handleListOffsetRequest``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.delayed_fetch import IsolationLevel
from odradek.replication.partition import PartitionError
from odradek.replication.replica_manager import ReplicaManager
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles

UNKNOWN = -1


@handles(ApiKey.LIST_OFFSETS)
def handle_list_offsets(ctx: RequestContext, request, replica_manager: ReplicaManager) -> object:
    isolation_level = IsolationLevel(getattr(request, "isolation_level", 0))
    from_follower = request.replica_id >= 0
    describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                       {topic.name for topic in request.topics})
    topics = []
    for topic in request.topics:
        if topic.name not in describable:
            topics.append({"name": topic.name, "partitions": [
                _answer(wanted.partition_index, ErrorCode.topic_authorization_failed)
                for wanted in topic.partitions]})
            continue
        partitions = []
        for wanted in topic.partitions:
            try:
                found = replica_manager.fetch_offset_for_timestamp(
                    TopicPartition(topic.name, wanted.partition_index), wanted.timestamp,
                    isolation_level=isolation_level, from_follower=from_follower,
                    current_leader_epoch=getattr(wanted, "current_leader_epoch", -1))
            except PartitionError as e:
                partitions.append(_answer(wanted.partition_index, e.error_code))
                continue
            if found is None:
                partitions.append(_answer(wanted.partition_index, ErrorCode.none))
                continue
            partitions.append(_answer(wanted.partition_index, ErrorCode.none, found.offset,
                                      found.timestamp, found.leader_epoch))
        topics.append({"name": topic.name, "partitions": partitions})
    return ctx.respond(topics=topics)


def _answer(index: int, error: ErrorCode, offset: int = UNKNOWN, timestamp: int = UNKNOWN,
            leader_epoch: int = -1) -> dict:
    return {"partition_index": index, "error_code": error, "timestamp": timestamp,
            "offset": offset, "old_style_offsets": (), "leader_epoch": leader_epoch}
