"""OffsetDelete (key 47, KIP-496): removes a group's committed offsets of some partitions.

Needs DELETE on the group (GROUP_AUTHORIZATION_FAILED, nothing deleted), then READ on each
topic: see ``group_offsets`` for how the partitions are sorted, unknown topics included.
Allowed for any partition of an Empty group; in a consumer group with members, only for
topics no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise). A group-level error
leaves the topics out.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.coordinator import OffsetDeleteResult
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.group_offsets import checked_partitions, partition_results


@handles(ApiKey.OFFSET_DELETE)
def handle_offset_delete(ctx: RequestContext, request, metadata: MetadataStore,
                         group_coordinator: GroupCoordinator) -> object:
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return ctx.respond(error_code=ErrorCode.group_authorization_failed, topics=[])
    accepted, errors = checked_partitions(ctx, request.topics, metadata)
    deleted: Completion[OffsetDeleteResult] = Completion()
    # Asked even with no partition left: the group's own error is the answer then.
    group_coordinator.delete_offsets(request.group_id, list(accepted), deleted)
    return deleted.then(lambda result: _response(ctx, request, errors, *result))


def _response(ctx: RequestContext, request, errors: dict[TopicPartition, ErrorCode],
              error: ErrorCode, deleted: dict[TopicPartition, ErrorCode]) -> object:
    if error is not ErrorCode.none:
        return ctx.respond(error_code=error, topics=[])
    return ctx.respond(error_code=ErrorCode.none,
                       topics=partition_results(request.topics, errors | deleted))
