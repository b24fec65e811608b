"""ShareGroupHeartbeat (key 76): a member of a share group (KIP-932) joins (epoch 0, with
the member id it chose), heartbeats, or leaves (epoch -1); the answer carries its epoch and,
when it changed, its assignment, once what it changed is written to ``__consumer_offsets``.
Needs READ on the group, and DESCRIBE on each topic it subscribes to
(TOPIC_AUTHORIZATION_FAILED otherwise). The logic is in ``coordinator.group.share_group``."""

from __future__ import annotations

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.heartbeats import HeartbeatResult
from odradek.coordinator.group.share_group import ShareHeartbeatRequest
from odradek.protocol.api import ApiKey
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.consumer_group_heartbeat import (
    refused_heartbeat,
    respond_heartbeat,
)
from odradek.server.handlers.join_group import client_host


@handles(ApiKey.SHARE_GROUP_HEARTBEAT)
def handle_share_group_heartbeat(ctx: RequestContext, request,
                                 group_coordinator: GroupCoordinator) -> object:
    names = request.subscribed_topic_names
    refused = refused_heartbeat(ctx, request.group_id, names)
    if refused is not None:
        return respond_heartbeat(ctx, refused)
    answered: Completion[HeartbeatResult] = Completion()
    group_coordinator.share_group_heartbeat(ShareHeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch, rack_id=request.rack_id,
        subscribed_topic_names=None if names is None else tuple(names),
        client_id=ctx.client_id or "", client_host=client_host(ctx)), answered)
    return answered.then(lambda result: respond_heartbeat(ctx, result))
