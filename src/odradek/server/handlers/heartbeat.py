"""Heartbeat (key 12): a member is alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from odradek.coordinator.group import GroupCoordinator
from odradek.protocol.api import ApiKey
from odradek.server.handlers import RequestContext, handles


@handles(ApiKey.HEARTBEAT)
def handle_heartbeat(ctx: RequestContext, request, group_coordinator: GroupCoordinator) -> object:
    error = group_coordinator.heartbeat(
        group_id=request.group_id, generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None))
    return ctx.respond(error_code=error)
