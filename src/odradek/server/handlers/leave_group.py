"""LeaveGroup (key 13): members leave at once instead of waiting for their session to end.

v0-v2 name one member; v3+ a batch, each with its own error, and a static member may be
removed by its ``group.instance.id`` alone (KIP-345). Before v3 the one member's error is
the response's, as Kafka's ``LeaveGroupResponse`` does for old versions. Needs READ on the
group: GROUP_AUTHORIZATION_FAILED otherwise, for the whole request, and no member leaves.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles

BATCHED_MEMBERS_MIN_VERSION = 3


@handles(ApiKey.LEAVE_GROUP)
def handle_leave_group(ctx: RequestContext, request,
                       group_coordinator: GroupCoordinator) -> object:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ctx.respond(error_code=ErrorCode.group_authorization_failed, members=[])
    batched = ctx.api_version >= BATCHED_MEMBERS_MIN_VERSION
    leaving = ([(m.member_id, m.group_instance_id) for m in request.members] if batched
               else [(request.member_id, None)])
    error, member_errors = group_coordinator.leave_group(request.group_id, leaving)
    if not batched and error is ErrorCode.none and member_errors:
        error = member_errors[0]
    return ctx.respond(
        error_code=error,
        members=[{"member_id": member_id, "group_instance_id": instance_id,
                  "error_code": member_error}
                 for (member_id, instance_id), member_error in zip(leaving, member_errors)])
