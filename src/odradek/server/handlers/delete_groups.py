"""DeleteGroups (key 42): removes Empty groups and their committed offsets (tombstones in
``__consumer_offsets``). A group with members is NON_EMPTY_GROUP; an unknown one
GROUP_ID_NOT_FOUND. Each group needs DELETE on it: GROUP_AUTHORIZATION_FAILED otherwise,
whether or not it exists, and it is left as it is. Groups named twice are answered once, as
from Kafka."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles


@handles(ApiKey.DELETE_GROUPS)
def handle_delete_groups(ctx: RequestContext, request,
                         group_coordinator: GroupCoordinator) -> object:
    group_ids = list(dict.fromkeys(request.groups_names))
    deletable = ctx.authorized_names(AclOperation.DELETE, ResourceType.GROUP, group_ids)
    refused = {group_id: ErrorCode.group_authorization_failed
               for group_id in group_ids if group_id not in deletable}
    deleted: Completion[dict[str, ErrorCode]] = Completion()
    group_coordinator.delete_groups([g for g in group_ids if g in deletable], deleted)
    return deleted.then(lambda results: ctx.respond(results=[
        {"group_id": group_id, "error_code": error}
        for group_id, error in (results | refused).items()]))
