"""DeleteGroups (key 42): removes Empty groups and their committed offsets (tombstones in
``__consumer_offsets``). A group with members is NON_EMPTY_GROUP; an unknown one
GROUP_ID_NOT_FOUND."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.protocol.api import ApiKey
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles


@handles(ApiKey.DELETE_GROUPS)
def handle_delete_groups(ctx: RequestContext, request,
                         group_coordinator: GroupCoordinator) -> object:
    deleted: Completion[dict[str, ErrorCode]] = Completion()
    group_coordinator.delete_groups(list(request.groups_names), deleted)
    return deleted.then(lambda results: ctx.respond(results=[
        {"group_id": group_id, "error_code": error} for group_id, error in results.items()]))
