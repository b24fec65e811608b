"""OffsetDelete (key 47, KIP-496): removes a group's committed offsets of some partitions.

Allowed for any partition of an Empty group; in a consumer group with members, only for
topics no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise). Partitions of
unknown topics get UNKNOWN_TOPIC_OR_PARTITION; a group-level error leaves the topics out.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.coordinator import OffsetDeleteResult
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles


@handles(ApiKey.OFFSET_DELETE)
def handle_offset_delete(ctx: RequestContext, request, metadata: MetadataStore,
                         group_coordinator: GroupCoordinator) -> object:
    errors: dict[TopicPartition, ErrorCode] = {}
    known = []
    for topic in request.topics:
        existing = metadata.topic(topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if existing is None or not 0 <= p.partition_index < len(existing.partitions):
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                known.append(tp)
    deleted: Completion[OffsetDeleteResult] = Completion()
    group_coordinator.delete_offsets(request.group_id, known, deleted)
    return deleted.then(lambda result: _response(ctx, request, errors, *result))


def _response(ctx: RequestContext, request, errors: dict[TopicPartition, ErrorCode],
              error: ErrorCode, deleted: dict[TopicPartition, ErrorCode]) -> object:
    if error is not ErrorCode.none:
        return ctx.respond(error_code=error, topics=[])
    errors = errors | deleted
    return ctx.respond(error_code=ErrorCode.none, topics=[
        {"name": topic.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": errors[TopicPartition(topic.name, p.partition_index)]}
            for p in topic.partitions]}
        for topic in request.topics])
