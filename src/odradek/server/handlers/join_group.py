"""JoinGroup (key 11): a member joins its group, then waits for the rebalance to complete.

The response waits in the coordinator until the join phase ends (every member rejoined, or
the rebalance timeout passed); the leader's lists every member with its metadata, so that
the client's assignor can run. From v4 a member joining without an id first gets one with
MEMBER_ID_REQUIRED (KIP-394); from v5 it may be static (``group.instance.id``, KIP-345);
v9 tells a static leader rejoining a Stable group to skip the assignment (KIP-814).
v0 has no rebalance timeout: the session timeout is used for both, as in Kafka.
Needs READ on the group: GROUP_AUTHORIZATION_FAILED otherwise, before the coordinator sees
the member.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.group import JoinGroupResult, JoinRequest
from odradek.coordinator.group.membership import UNKNOWN_MEMBER_ID
from odradek.protocol.api import ApiKey
from odradek.protocol.messages import millis
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles

KNOWN_MEMBER_ID_MIN_VERSION = 4  # KIP-394
SKIP_ASSIGNMENT_MIN_VERSION = 9  # KIP-814
NULLABLE_PROTOCOL_NAME_MIN_VERSION = 7


@handles(ApiKey.JOIN_GROUP)
def handle_join_group(ctx: RequestContext, request,
                      group_coordinator: GroupCoordinator) -> object:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(ctx, JoinGroupResult(ErrorCode.group_authorization_failed,
                                               UNKNOWN_MEMBER_ID))
    version = ctx.api_version
    session_timeout_ms = millis(request.session_timeout)
    completion: Completion[JoinGroupResult] = Completion()
    group_coordinator.join_group(request.group_id, JoinRequest(
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=(millis(request.rebalance_timeout) if version >= 1
                              else session_timeout_ms),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        require_known_member_id=version >= KNOWN_MEMBER_ID_MIN_VERSION,
        supports_skip_assignment=version >= SKIP_ASSIGNMENT_MIN_VERSION,
        respond=completion))
    return completion.then(lambda result: _response(ctx, result))


def _response(ctx: RequestContext, result: JoinGroupResult) -> object:
    protocol_name = result.protocol_name
    if protocol_name is None and ctx.api_version < NULLABLE_PROTOCOL_NAME_MIN_VERSION:
        protocol_name = ""
    return ctx.respond(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                  "metadata": m.metadata} for m in result.members],
    )


def client_host(ctx: RequestContext) -> str:
    """The client's address as Kafka shows it (``InetAddress.toString``: "/127.0.0.1")."""
    address = ctx.client_address
    return f"/{address[0]}" if address else ""
