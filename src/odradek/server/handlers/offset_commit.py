"""OffsetCommit (key 8): a group's consumed positions, written to ``__consumer_offsets``.

A member commits with its generation and member id, and is fenced if they are stale
(ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) or if its group is between
JoinGroup and SyncGroup (REBALANCE_IN_PROGRESS). Generation -1 without a member id is a
simple commit (a consumer using assign(), an admin client), allowed while the group has no
members. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION, as from Kafka.
The answer is sent once the commit is in the log. ``retention_time`` (v2-v4) is ignored:
offsets expire by ``offsets.retention.minutes`` only.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles

NO_LEADER_EPOCH = -1


@handles(ApiKey.OFFSET_COMMIT)
def handle_offset_commit(ctx: RequestContext, request, metadata: MetadataStore,
                         group_coordinator: GroupCoordinator) -> object:
    offsets, errors = requested_offsets(request.topics, metadata)
    committed: Completion[dict[TopicPartition, ErrorCode]] = Completion()
    if offsets:
        group_coordinator.commit_offsets(
            group_id=request.group_id,
            generation_id=request.generation_id_or_member_epoch,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            offsets=offsets,
            respond=committed)
    else:
        committed({})
    return committed.then(lambda commit_errors: commit_response(ctx, request,
                                                                errors | commit_errors))


def requested_offsets(topics, metadata: MetadataStore
                      ) -> tuple[dict[TopicPartition, tuple[int, int, str | None]],
                                 dict[TopicPartition, ErrorCode]]:
    """(offset, leader epoch, metadata) of each partition to commit, and the error of each
    partition of an unknown topic (OffsetCommit's and TxnOffsetCommit's topics)."""
    offsets: dict[TopicPartition, tuple[int, int, str | None]] = {}
    errors: dict[TopicPartition, ErrorCode] = {}
    for topic in topics:
        known = metadata.topic(topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if known is None or not 0 <= p.partition_index < len(known.partitions):
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                offsets[tp] = (p.committed_offset,
                               getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH),
                               p.committed_metadata)
    return offsets, errors


def commit_response(ctx: RequestContext, request,
                    errors: dict[TopicPartition, ErrorCode]) -> object:
    return ctx.respond(topics=[
        {"name": topic.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": errors[TopicPartition(topic.name, p.partition_index)]}
            for p in topic.partitions]}
        for topic in request.topics])
