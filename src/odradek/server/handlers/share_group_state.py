"""ReadShareGroupState (key 84), WriteShareGroupState (key 85) and DeleteShareGroupState
(key 86): a broker asks the share coordinator of a share-partition for its durable state,
writes it, or deletes it (the far half of ``coordinator.share.persister``). Brokers send them to each other; they need
CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise). A share-partition
without state is answered with start offset -1."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.share.coordinator import ShareCoordinator
from odradek.coordinator.share.persister import NO_START_OFFSET, state_batches, wire_batches
from odradek.coordinator.share.state_records import ShareState, ShareStateKey
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import authorize_cluster


@handles(ApiKey.READ_SHARE_GROUP_STATE)
def handle_read_share_group_state(ctx: RequestContext, request,
                                  share_coordinator: ShareCoordinator) -> object:
    allowed = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    results = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            error, state = (ErrorCode.cluster_authorization_failed, None)
            if allowed:
                error, state = share_coordinator.read(
                    ShareStateKey(request.group_id, topic.topic_id, partition.partition))
            partitions.append({
                "partition": partition.partition, "error_code": error,
                "state_epoch": state.state_epoch if state else 0,
                "start_offset": state.start_offset if state else NO_START_OFFSET,
                "state_batches": wire_batches(state.batches) if state else []})
        results.append({"topic_id": topic.topic_id, "partitions": partitions})
    return ctx.respond(results=results)


@handles(ApiKey.WRITE_SHARE_GROUP_STATE)
async def handle_write_share_group_state(ctx: RequestContext, request,
                                         share_coordinator: ShareCoordinator) -> object:
    allowed = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    results = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            error = ErrorCode.cluster_authorization_failed
            if allowed:
                written: Completion[ErrorCode] = Completion()
                share_coordinator.write(
                    ShareStateKey(request.group_id, topic.topic_id, partition.partition),
                    ShareState(partition.state_epoch, partition.start_offset,
                               state_batches(partition.state_batches)),
                    partition.leader_epoch, written)
                error = await written.wait()
            partitions.append({"partition": partition.partition, "error_code": error})
        results.append({"topic_id": topic.topic_id, "partitions": partitions})
    return ctx.respond(results=results)


@handles(ApiKey.DELETE_SHARE_GROUP_STATE)
async def handle_delete_share_group_state(ctx: RequestContext, request,
                                          share_coordinator: ShareCoordinator) -> object:
    allowed = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    error = ErrorCode.cluster_authorization_failed
    if allowed:
        deleted: Completion[ErrorCode] = Completion()
        share_coordinator.delete([ShareStateKey(request.group_id, topic.topic_id, p.partition)
                                  for topic in request.topics for p in topic.partitions],
                                 deleted)
        error = await deleted.wait()
    return ctx.respond(results=[
        {"topic_id": topic.topic_id, "partitions": [
            {"partition": p.partition, "error_code": error} for p in topic.partitions]}
        for topic in request.topics])
