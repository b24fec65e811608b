"""DescribeTopicPartitions (key 75, KIP-966): topics and their partitions, a page at a time.

As Kafka 3.9 (DescribeTopicPartitionsRequestHandler, KRaftMetadataCache): the topics asked
for, or every topic when none are named, are taken in name order from the cursor's topic on
(and from the cursor's partition within it). At most ``response_partition_limit`` partitions
are returned (capped at Kafka's ``max.request.partition.size.limit``); when the limit stops a
topic midway, or a further topic is left out, ``next_cursor`` says where to go on. A named
topic that does not exist is answered with its error while room remains; unnamed requests
list existing topics only. A cursor outside the named topics, or with a negative partition,
fails every topic of the request with INVALID_REQUEST.

Partitions are described as Metadata describes them; odradek has no eligible leader
replicas (KIP-966's ELR), so both ELR lists are empty.

Authorization, as Kafka's handler: a topic the client may not DESCRIBE is passed over as if
it were not there (it never takes room in the page nor becomes the cursor); when it was
named, it is answered TOPIC_AUTHORIZATION_FAILED after the topics described, whether or not
it exists. Every topic described carries its authorized operations (KIP-430).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.metadata.model import INTERNAL_TOPICS, InvalidTopicError, validate_topic_name
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    authorized_operations,
)
from odradek.server.handlers.metadata import describe_topic

# Kafka's max.request.partition.size.limit default: the most partitions one response holds.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
NO_ELR = {"eligible_leader_replicas": (), "last_known_elr": ()}


@handles(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
def handle_describe_topic_partitions(ctx: RequestContext, request,
                                     metadata: MetadataStore) -> object:
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    every_topic = not request.topics
    named = metadata.topics() if every_topic else {t.name for t in request.topics}
    names = sorted(n for n in named if n >= cursor_topic)
    if cursor is not None and (
        (not every_topic and cursor_topic not in names) or cursor.partition_index < 0
    ):
        return ctx.respond(next_cursor=None, topics=[
            _topic_error(t.name, ErrorCode.invalid_request, is_internal=False)
            for t in request.topics
        ])
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit), 1)
    topics = []
    refused = []
    next_cursor = None
    for name in names:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            if not every_topic:
                refused.append(_topic_error(name, ErrorCode.topic_authorization_failed,
                                            is_internal=False))
            continue
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic = metadata.topic(name)
        operations = authorized_operations(ctx, ResourceType.TOPIC, name)
        if topic is None:
            if not every_topic:
                topics.append(_topic_error(name, _missing_topic_error(name),
                                           is_internal=name in INTERNAL_TOPICS,
                                           authorized_operations=operations))
            continue
        start = cursor.partition_index if name == cursor_topic and cursor is not None else 0
        end = min(len(topic.partitions), start + remaining)
        described = describe_topic(topic, operations)
        described["partitions"] = [p | NO_ELR for p in described["partitions"][start:end]]
        topics.append(described)
        if end < len(topic.partitions):
            next_cursor = {"topic_name": name, "partition_index": end}
            break
        remaining -= len(described["partitions"])
    return ctx.respond(topics=topics + refused, next_cursor=next_cursor)


def _missing_topic_error(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.unknown_topic_or_partition


def _topic_error(name: str, error: ErrorCode, *, is_internal: bool,
                 authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED) -> dict:
    return {"error_code": error, "name": name, "topic_id": None,
            "is_internal": is_internal, "partitions": [],
            "topic_authorized_operations": authorized_operations}
