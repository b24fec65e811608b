"""OffsetForLeaderEpoch (key 23): where a leader epoch ends in the leader's log.

A follower asks this of its leader before it fetches, whenever it gets a new leader or
leader epoch (KIP-101, KIP-279): for the latest epoch in its own log, the leader answers
the largest epoch at or below it that it knows and the offset where that epoch ends in its
log, and the follower cuts its log there. Consumers ask it too, to detect truncation after
an unclean leader election (KIP-320). Each partition answers through
``ReplicaManager.last_offset_for_leader_epoch``; only the leader answers.

Authorization, as Kafka's ``KafkaApis.handleOffsetForLeaderEpochRequest``: CLUSTER_ACTION
on the cluster (a follower's broker) may ask of every topic; anyone else needs DESCRIBE on
the topic, else each of its partitions is answered TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.partition import PartitionError
from odradek.replication.replica_manager import ReplicaManager
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import authorize_cluster

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH)
def handle_offset_for_leader_epoch(ctx: RequestContext, request,
                                   replica_manager: ReplicaManager) -> object:
    names = {topic.topic for topic in request.topics}
    describable = (names if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
                   else ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names))
    topics = []
    for topic in request.topics:
        if topic.topic not in describable:
            topics.append({"topic": topic.topic, "partitions": [
                _answer(wanted.partition, ErrorCode.topic_authorization_failed)
                for wanted in topic.partitions]})
            continue
        partitions = []
        for wanted in topic.partitions:
            try:
                epoch, end_offset = replica_manager.last_offset_for_leader_epoch(
                    TopicPartition(topic.topic, wanted.partition),
                    wanted.current_leader_epoch, wanted.leader_epoch)
            except PartitionError as exc:
                partitions.append(_answer(wanted.partition, exc.error_code))
            else:
                partitions.append(_answer(wanted.partition, ErrorCode.none, epoch, end_offset))
        topics.append({"topic": topic.topic, "partitions": partitions})
    return ctx.respond(topics=topics)


def _answer(partition: int, error: ErrorCode, leader_epoch: int = UNDEFINED_EPOCH,
            end_offset: int = UNDEFINED_EPOCH_OFFSET) -> dict:
    return {"error_code": error, "partition": partition, "leader_epoch": leader_epoch,
            "end_offset": end_offset}
