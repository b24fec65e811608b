"""Heartbeat (key 12): a member is alive; REBALANCE_IN_PROGRESS tells it to rejoin. Needs
READ on the group: GROUP_AUTHORIZATION_FAILED otherwise, and the member's session is not
extended."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles


@handles(ApiKey.HEARTBEAT)
def handle_heartbeat(ctx: RequestContext, request, group_coordinator: GroupCoordinator) -> object:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ctx.respond(error_code=ErrorCode.group_authorization_failed)
    error = group_coordinator.heartbeat(
        group_id=request.group_id, generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None))
    return ctx.respond(error_code=error)
