"""DescribeGroups (key 15): a group's state, protocol and members; each member's metadata
and assignment while the group is Stable.

An unknown group is described as Dead with no error before v6, and answered with
GROUP_ID_NOT_FOUND from v6 (KIP-1043), as Kafka 4 does. Authorized operations (v3+) are
not computed: there is no authorizer.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.state import GroupState
from odradek.protocol.api import ApiKey
from odradek.server.handlers import RequestContext, handles

GROUP_ID_NOT_FOUND_MIN_VERSION = 6  # KIP-1043
# -2^31: authorized operations not requested or not known (KIP-430).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@handles(ApiKey.DESCRIBE_GROUPS)
def handle_describe_groups(ctx: RequestContext, request,
                           group_coordinator: GroupCoordinator) -> object:
    return ctx.respond(groups=[_describe(ctx, group_coordinator, group_id)
                               for group_id in request.groups])


def _describe(ctx: RequestContext, group_coordinator: GroupCoordinator, group_id: str) -> dict:
    error, group = group_coordinator.describe_group(group_id)
    if group is None:
        message = None
        state = GroupState.DEAD
        if error is ErrorCode.none and ctx.api_version >= GROUP_ID_NOT_FOUND_MIN_VERSION:
            error, message = ErrorCode.group_id_not_found, f"Group {group_id} not found."
        return {"error_code": error, "error_message": message, "group_id": group_id,
                "group_state": str(state), "protocol_type": "", "protocol_data": "",
                "members": [], "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
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
