"""OffsetForLeaderEpoch (key 23): where a leader epoch ends in the leader's log.

A follower asks this of its leader before it fetches, whenever it gets a new leader or
leader epoch (KIP-101, KIP-279): for the latest epoch in its own log, the leader answers
the largest epoch at or below it that it knows and the offset where that epoch ends in its
log, and the follower cuts its log there. Consumers ask it too, to detect truncation after
an unclean leader election (KIP-320). Each partition answers through
``ReplicaManager.last_offset_for_leader_epoch``; only the leader answers.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.partition import PartitionError
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.handlers import RequestContext, handles

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH)
def handle_offset_for_leader_epoch(ctx: RequestContext, request,
                                   replica_manager: ReplicaManager) -> object:
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            try:
                epoch, end_offset = replica_manager.last_offset_for_leader_epoch(
                    TopicPartition(topic.topic, wanted.partition),
                    wanted.current_leader_epoch, wanted.leader_epoch)
            except PartitionError as exc:
                epoch, end_offset, error = UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, exc.error_code
            else:
                error = ErrorCode.none
            partitions.append({"error_code": error, "partition": wanted.partition,
                               "leader_epoch": epoch, "end_offset": end_offset})
        topics.append({"topic": topic.topic, "partitions": partitions})
    return ctx.respond(topics=topics)
