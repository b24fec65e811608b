"""OffsetDelete (key 47, KIP-496): removes a group's committed offsets of some partitions.

Allowed for any partition of an Empty group; in a consumer group with members, only for
topics no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise). Partitions of
unknown topics get UNKNOWN_TOPIC_OR_PARTITION; a group-level error leaves the topics out.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.replication.partition import TopicPartition
from odradek.server.handlers import RequestContext, handles


@handles(ApiKey.OFFSET_DELETE)
def handle_offset_delete(ctx: RequestContext, request) -> object:
    store = ctx.broker.metadata
    errors: dict[TopicPartition, ErrorCode] = {}
    known = []
    for topic in request.topics:
        metadata = store.topic(topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if metadata is None or not 0 <= p.partition_index < len(metadata.partitions):
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                known.append(tp)
    error, deleted = ctx.broker.group_coordinator.delete_offsets(request.group_id, known)
    if error is not ErrorCode.none:
        return ctx.respond(error_code=error, throttle_time=0, topics=[])
    errors |= deleted
    return ctx.respond(error_code=ErrorCode.none, throttle_time=0, topics=[
        {"name": topic.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": errors[TopicPartition(topic.name, p.partition_index)]}
            for p in topic.partitions]}
        for topic in request.topics])
