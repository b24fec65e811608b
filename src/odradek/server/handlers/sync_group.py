"""SyncGroup (key 14): the leader sends the assignment; every member receives its own.

A follower's SyncGroup waits in the coordinator until the leader's arrives and the group's
new generation is written to ``__consumer_offsets``. In a Stable group the current
assignment is answered at once. From v5 the protocol type and name must be the group's
(INCONSISTENT_GROUP_PROTOCOL otherwise). Needs READ on the group: GROUP_AUTHORIZATION_FAILED
otherwise, and no assignment is taken or given.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.group import SyncGroupResult
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles


@handles(ApiKey.SYNC_GROUP)
def handle_sync_group(ctx: RequestContext, request,
                      group_coordinator: GroupCoordinator) -> object:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(ctx, SyncGroupResult(ErrorCode.group_authorization_failed))
    completion: Completion[SyncGroupResult] = Completion()
    group_coordinator.sync_group(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments={a.member_id: a.assignment for a in request.assignments},
        respond=completion)
    return completion.then(lambda result: _response(ctx, result))


def _response(ctx: RequestContext, result: SyncGroupResult) -> object:
    return ctx.respond(error_code=result.error, protocol_type=result.protocol_type,
                       protocol_name=result.protocol_name, assignment=result.assignment)
