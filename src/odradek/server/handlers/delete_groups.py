"""DeleteGroups (key 42): removes Empty groups and their committed offsets (tombstones in
``__consumer_offsets``), and Empty share groups with their share-partition state (tombstones
in ``__share_group_state``), then their own records (tombstones in ``__consumer_offsets``).
A group with members is NON_EMPTY_GROUP; an unknown one GROUP_ID_NOT_FOUND. Each group needs
DELETE on it: GROUP_AUTHORIZATION_FAILED otherwise, whether or not it exists, and it is left
as it is. Groups named twice are answered once, as from Kafka."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.metadata.store import MetadataStore
from odradek.coordinator.share.manager import SharePartitionManager
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.share_group_offsets import keys_with_state


@handles(ApiKey.DELETE_GROUPS)
async def handle_delete_groups(ctx: RequestContext, request,
                               group_coordinator: GroupCoordinator, metadata: MetadataStore,
                               share_partitions: SharePartitionManager) -> object:
    group_ids = list(dict.fromkeys(request.groups_names))
    deletable = ctx.authorized_names(AclOperation.DELETE, ResourceType.GROUP, group_ids)
    results = {group_id: ErrorCode.group_authorization_failed
               for group_id in group_ids if group_id not in deletable}
    persister = share_partitions.persister
    share_groups = {}
    for group_id in group_ids:
        if group_id in deletable and group_id not in group_coordinator.manager.groups:
            keys = await keys_with_state(persister, metadata, group_id)
            if keys or group_id in group_coordinator.share_protocol.groups:
                share_groups[group_id] = keys
    for group_id, keys in share_groups.items():
        group = group_coordinator.share_protocol.groups.get(group_id)
        if group is not None and group.members:
            results[group_id] = ErrorCode.non_empty_group
            continue
        results[group_id] = await persister.delete(keys)
        if results[group_id] is ErrorCode.none and group is not None:
            tombstones: Completion[ErrorCode] = Completion()
            group_coordinator.share_protocol.delete(group_id, tombstones)
            results[group_id] = await tombstones.wait()
        if results[group_id] is ErrorCode.none:
            share_partitions.forget_group(group_id)
    deleted: Completion[dict[str, ErrorCode]] = Completion()
    group_coordinator.delete_groups(
        [g for g in group_ids if g in deletable and g not in share_groups], deleted)
    results |= await deleted.wait()
    return ctx.respond(results=[{"group_id": group_id, "error_code": results[group_id]}
                                for group_id in group_ids])
