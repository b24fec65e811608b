"""DescribeGroups (key 15): a group's state, protocol and members; each member's metadata
and assignment while the group is Stable.

An unknown group is described as Dead with no error before v6, and answered with
GROUP_ID_NOT_FOUND from v6 (KIP-1043), as Kafka 4 does. Each group needs DESCRIBE on it:
GROUP_AUTHORIZATION_FAILED otherwise, with no state, protocol or member, whether or not the
group exists. From v3 a client may ask what it may do on each group it can describe
(KIP-430's authorized operations, see ``authorization``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.state import GroupState
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    authorized_operations,
)

GROUP_ID_NOT_FOUND_MIN_VERSION = 6  # KIP-1043


@handles(ApiKey.DESCRIBE_GROUPS)
def handle_describe_groups(ctx: RequestContext, request,
                           group_coordinator: GroupCoordinator) -> object:
    operations_requested = getattr(request, "include_authorized_operations", False)
    return ctx.respond(groups=[_describe(ctx, group_coordinator, group_id, operations_requested)
                               for group_id in request.groups])


def _describe(ctx: RequestContext, group_coordinator: GroupCoordinator, group_id: str,
              operations_requested: bool) -> dict:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        # Kafka's DescribeGroupsResponse.groupError: every field but the id left unknown ("").
        return _group_error(group_id, ErrorCode.group_authorization_failed, None, state="")
    described = _group(ctx, group_coordinator, group_id)
    # As from Kafka, for every group described without an error (an unknown one before v6).
    if operations_requested and described["error_code"] is ErrorCode.none:
        described["authorized_operations"] = authorized_operations(ctx, ResourceType.GROUP,
                                                                   group_id)
    return described


def _group(ctx: RequestContext, group_coordinator: GroupCoordinator, group_id: str) -> dict:
    error, group = group_coordinator.describe_group(group_id)
    if group is None:
        message = None
        if error is ErrorCode.none and ctx.api_version >= GROUP_ID_NOT_FOUND_MIN_VERSION:
            error, message = ErrorCode.group_id_not_found, f"Group {group_id} not found."
        return _group_error(group_id, error, message, state=str(GroupState.DEAD))
    return {
        "error_code": ErrorCode.none, "error_message": None, "group_id": group.group_id,
        "group_state": str(group.state), "protocol_type": group.protocol_type,
        "protocol_data": group.protocol_data,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
             "client_id": m.client_id, "client_host": m.client_host,
             "member_metadata": m.metadata, "member_assignment": m.assignment}
            for m in group.members],
        "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _group_error(group_id: str, error: ErrorCode, message: str | None, *, state: str) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id,
            "group_state": state, "protocol_type": "", "protocol_data": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
