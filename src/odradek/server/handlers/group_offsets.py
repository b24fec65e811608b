"""What the APIs that write or delete a group's committed offsets share: OffsetCommit,
TxnOffsetCommit and OffsetDelete. Not a handler module: it registers nothing.

Once the group itself is authorized, each partition of such a request is sorted as Kafka's
``KafkaApis`` sorts it, in this order:

1. a topic the principal may not READ: TOPIC_AUTHORIZATION_FAILED on every partition named,
   whether or not the topic exists, so that a refusal reveals nothing;
2. a topic or a partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION;
3. every other partition goes to the group coordinator, which answers for each.

A partition refused in 1 or 2 changes nothing; the response names every partition of the
request with its error, in the request's order.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from odradek.metadata.store import MetadataStore
from odradek.protocol.topic_partition import TopicPartition
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.request_context import RequestContext

NO_LEADER_EPOCH = -1


def checked_partitions(ctx: RequestContext, topics, metadata: MetadataStore
                       ) -> tuple[dict[TopicPartition, Any], dict[TopicPartition, ErrorCode]]:
    """The request's partition entries that go to the coordinator, by topic partition, and
    the error of each other partition (rules 1 and 2)."""
    readable = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC,
                                    (topic.name for topic in topics))
    accepted: dict[TopicPartition, Any] = {}
    errors: dict[TopicPartition, ErrorCode] = {}
    for topic in topics:
        known = metadata.topic(topic.name) if topic.name in readable else None
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = ErrorCode.topic_authorization_failed
            elif known is None or not 0 <= p.partition_index < len(known.partitions):
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                accepted[tp] = p
    return accepted, errors


def requested_offsets(ctx: RequestContext, topics, metadata: MetadataStore
                      ) -> tuple[dict[TopicPartition, tuple[int, int, str | None]],
                                 dict[TopicPartition, ErrorCode]]:
    """(offset, leader epoch, metadata) of each partition to commit, and the error of each
    partition refused (OffsetCommit's and TxnOffsetCommit's topics)."""
    accepted, errors = checked_partitions(ctx, topics, metadata)
    return {tp: (p.committed_offset, getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH),
                 p.committed_metadata)
            for tp, p in accepted.items()}, errors


def partition_results(topics, errors: dict[TopicPartition, ErrorCode] | ErrorCode
                      ) -> list[dict]:
    """Every partition of the request's ``topics`` with its error: each its own, or one error
    for all (a group or a transactional id refused)."""
    def error(tp: TopicPartition) -> ErrorCode:
        return errors if isinstance(errors, ErrorCode) else errors[tp]

    return [{"name": topic.name, "partitions": [
        {"partition_index": p.partition_index,
         "error_code": error(TopicPartition(topic.name, p.partition_index))}
        for p in topic.partitions]}
        for topic in topics]
