"""ConsumerGroupHeartbeat (key 68): a member of a KIP-848 consumer group joins (epoch 0),
heartbeats, or leaves (epoch -1; -2 for a static member that will come back); the answer
carries its member epoch and, when it changed, its assignment. v0 lets the coordinator pick
the member id; from v1 the client picks it. Needs READ on the group, and DESCRIBE on each
topic it subscribes to by name (TOPIC_AUTHORIZATION_FAILED otherwise), as Kafka 4 checks.
The group logic is in ``coordinator.group.consumer_protocol``.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.consumer_protocol import HeartbeatRequest
from odradek.coordinator.group.heartbeats import HeartbeatResult
from odradek.coordinator.group.consumer_records import partitions_of, topic_partitions
from odradek.protocol.api import ApiKey
from odradek.protocol.messages import millis
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.join_group import client_host


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT)
def handle_consumer_group_heartbeat(ctx: RequestContext, request,
                                    group_coordinator: GroupCoordinator) -> object:
    refused = refused_heartbeat(ctx, request.group_id, request.subscribed_topic_names)
    if refused is not None:
        return respond_heartbeat(ctx, refused)
    names = request.subscribed_topic_names
    answered: Completion[HeartbeatResult] = Completion()
    group_coordinator.consumer_group_heartbeat(HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=millis(request.rebalance_timeout),
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=None if request.topic_partitions is None else partitions_of(
            request.topic_partitions),
        client_id=ctx.client_id or "", client_host=client_host(ctx)), answered)
    return answered.then(lambda result: respond_heartbeat(ctx, result))


def refused_heartbeat(ctx: RequestContext, group_id: str, names: tuple[str, ...] | None
                      ) -> HeartbeatResult | None:
    """The answer of a heartbeat of either protocol its principal may not send: READ on the
    group, DESCRIBE on each topic subscribed to by name; None when it may."""
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return HeartbeatResult(ErrorCode.group_authorization_failed)
    if names:
        refused = set(names) - ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                    set(names))
        if refused:
            return HeartbeatResult(ErrorCode.topic_authorization_failed,
                                   f"Unauthorized topics: {', '.join(sorted(refused))}.")
    return None


def respond_heartbeat(ctx: RequestContext, result: HeartbeatResult) -> object:
    """ConsumerGroupHeartbeat's or ShareGroupHeartbeat's response: the same fields."""
    assignment = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [
            {"topic_id": t.topic_id, "partitions": t.partitions}
            for t in topic_partitions(result.assignment)]}
    return ctx.respond(
        error_code=result.error, error_message=result.message, member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms,
        assignment=assignment)
