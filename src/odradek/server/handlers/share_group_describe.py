"""ShareGroupDescribe (key 77): a share group's state, epochs and members with their
subscriptions and assignments. A group of another kind, or none, is GROUP_ID_NOT_FOUND.
Each group needs DESCRIBE on it (GROUP_AUTHORIZATION_FAILED otherwise)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    authorized_operations,
)
from odradek.server.handlers.consumer_group_describe import (
    described_assignment,
    described_error,
)

SHARE_ASSIGNOR = "simple"


@handles(ApiKey.SHARE_GROUP_DESCRIBE)
def handle_share_group_describe(ctx: RequestContext, request,
                                group_coordinator: GroupCoordinator,
                                metadata: MetadataStore) -> object:
    return ctx.respond(groups=[
        _describe(ctx, group_coordinator, metadata, group_id,
                  request.include_authorized_operations)
        for group_id in request.group_ids])


def _describe(ctx: RequestContext, group_coordinator: GroupCoordinator,
              metadata: MetadataStore, group_id: str, operations_requested: bool) -> dict:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return described_error(group_id, ErrorCode.group_authorization_failed, None)
    error, group = group_coordinator.describe_share_group(group_id)
    if group is None:
        message = (f"Group {group_id} is not a share group."
                   if error is ErrorCode.group_id_not_found else None)
        return described_error(group_id, error, message)
    return {
        "error_code": ErrorCode.none, "error_message": None, "group_id": group_id,
        "group_state": str(group.state), "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch, "assignor_name": SHARE_ASSIGNOR,
        "members": [{
            "member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
            "client_id": m.client_id, "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "assignment": described_assignment(m.assigned, metadata)}
            for m in group.members.values()],
        "authorized_operations": (
            authorized_operations(ctx, ResourceType.GROUP, group_id) if operations_requested
            else AUTHORIZED_OPERATIONS_OMITTED),
    }
