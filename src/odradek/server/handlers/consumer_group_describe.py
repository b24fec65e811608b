"""ConsumerGroupDescribe (key 69): a KIP-848 consumer group's state, epochs, assignor and
members — each with its subscription, member epoch, current assignment and target
assignment. A classic group, or none, is GROUP_ID_NOT_FOUND (clients then fall back to
DescribeGroups). Each group needs DESCRIBE on it: GROUP_AUTHORIZATION_FAILED otherwise; KIP-430
operations are filled in when asked for.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.consumer_group import ConsumerGroup
from odradek.coordinator.group.consumer_records import Partitions, topic_partitions
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    authorized_operations,
)


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE)
def handle_consumer_group_describe(ctx: RequestContext, request,
                                   group_coordinator: GroupCoordinator,
                                   metadata: MetadataStore) -> object:
    return ctx.respond(groups=[
        _describe(ctx, group_coordinator, metadata, group_id,
                  request.include_authorized_operations)
        for group_id in request.group_ids])


def _describe(ctx: RequestContext, group_coordinator: GroupCoordinator,
              metadata: MetadataStore, group_id: str, operations_requested: bool) -> dict:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return described_error(group_id, ErrorCode.group_authorization_failed, None)
    error, group = group_coordinator.describe_consumer_group(group_id)
    if group is None:
        message = (f"Group {group_id} is not a consumer group."
                   if error is ErrorCode.group_id_not_found else None)
        return described_error(group_id, error, message)
    default_assignor = group_coordinator.consumer_protocol.assignor_names()[0]
    return {
        "error_code": ErrorCode.none, "error_message": None, "group_id": group_id,
        "group_state": str(group.state), "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.preferred_assignor(default_assignor),
        "members": [_member(group, m, metadata) for m in group.members.values()],
        "authorized_operations": (
            authorized_operations(ctx, ResourceType.GROUP, group_id) if operations_requested
            else AUTHORIZED_OPERATIONS_OMITTED),
    }


def _member(group: ConsumerGroup, member, metadata: MetadataStore) -> dict:
    return {
        "member_id": member.member_id, "instance_id": member.instance_id,
        "rack_id": member.rack_id, "member_epoch": member.member_epoch,
        "client_id": member.client_id, "client_host": member.client_host,
        "subscribed_topic_names": list(member.subscribed_topic_names),
        "subscribed_topic_regex": member.subscribed_topic_regex,
        "assignment": described_assignment(member.assigned, metadata),
        "target_assignment": described_assignment(group.target.get(member.member_id, {}),
                                                  metadata),
        "member_type": 1,  # the consumer protocol (0 would be a classic member)
    }


def described_assignment(partitions: Partitions, metadata: MetadataStore) -> dict:
    """An assignment as ConsumerGroupDescribe and ShareGroupDescribe list it, with names."""
    listed = []
    for entry in topic_partitions(partitions):
        topic = metadata.topic_by_id(entry.topic_id)
        if topic is not None:  # a topic deleted since: not described
            listed.append({"topic_id": entry.topic_id, "topic_name": topic.name,
                           "partitions": entry.partitions})
    return {"topic_partitions": listed}


def described_error(group_id: str, error: ErrorCode, message: str | None) -> dict:
    """A group ConsumerGroupDescribe or ShareGroupDescribe cannot describe."""
    return {"error_code": error, "error_message": message, "group_id": group_id,
            "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
            "members": [], "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
