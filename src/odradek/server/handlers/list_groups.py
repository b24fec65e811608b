"""ListGroups (key 16): the groups this broker coordinates, with their state from v4
(KIP-518, filtered by ``states_filter``) and type from v5 (KIP-848, filtered by
``types_filter``): "classic", "consumer" for groups of the KIP-848 protocol, or "share"
for share groups (KIP-932). Filters
match case-insensitively, as Kafka 4's do.

A principal that may DESCRIBE the cluster sees every group; any other sees only the groups
it may DESCRIBE, the others left out without an error (Kafka's
``KafkaApis.handleListGroupsRequest``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.consumer_group import ConsumerGroup
from odradek.coordinator.group.share_group import ShareGroup
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import authorize_cluster

CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"
SHARE_GROUP_TYPE = "share"


def group_type(group: object) -> str:
    if isinstance(group, ConsumerGroup):
        return CONSUMER_GROUP_TYPE
    return SHARE_GROUP_TYPE if isinstance(group, ShareGroup) else CLASSIC_GROUP_TYPE


@handles(ApiKey.LIST_GROUPS)
def handle_list_groups(ctx: RequestContext, request,
                       group_coordinator: GroupCoordinator) -> object:
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    groups = [g for g in group_coordinator.list_groups()
              if (not states or str(g.state).lower() in states)
              and (not types or group_type(g) in types)]
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.GROUP,
                                           (g.group_id for g in groups))
        groups = [g for g in groups if g.group_id in describable]
    return ctx.respond(error_code=ErrorCode.none, groups=[
        {"group_id": g.group_id, "protocol_type": g.protocol_type or "",
         "group_state": str(g.state), "group_type": group_type(g)}
        for g in groups])
