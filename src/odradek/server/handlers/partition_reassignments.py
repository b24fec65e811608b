"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), KIP-455.

Both go to the controller, which carries reassignments out (``controller.reassignment``);
another broker answers NOT_CONTROLLER and the client finds the controller from Metadata.
Alter starts a reassignment per partition (a null replica list cancels one) and answers
once it has started, per partition: INVALID_REPLICA_ASSIGNMENT for an empty or duplicated
list or a broker that is not alive, NO_REASSIGNMENT_IN_PROGRESS for a cancel with nothing
to cancel, UNKNOWN_TOPIC_OR_PARTITION. List answers the reassignments in progress with their
replicas and the replicas being added and removed.

A single broker has nothing to reassign to: it accepts its own replica list as the target
(nothing moves) and refuses any other.

Alter needs ALTER on the cluster, List DESCRIBE, checked first
(``AuthHelper.authorizeClusterOperation``): without it the request fails with
CLUSTER_AUTHORIZATION_FAILED, Alter's every partition with it too (the request's error
response).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.controller.controller import Controller, NotController
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import authorize_cluster, cluster_refusal_message


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
async def handle_alter_partition_reassignments(ctx: RequestContext, request,
                                               metadata: MetadataStore,
                                               controller: Controller | None) -> object:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        error, message = ErrorCode.cluster_authorization_failed, cluster_refusal_message(ctx)
        return ctx.respond(error_code=error, error_message=message, responses=[
            {"name": topic.name, "partitions": [
                {"partition_index": partition.partition_index, "error_code": error,
                 "error_message": message} for partition in topic.partitions]}
            for topic in request.topics])
    targets = {(topic.name, partition.partition_index):
               None if partition.replicas is None else tuple(partition.replicas)
               for topic in request.topics for partition in topic.partitions}
    if controller is None:
        results = {tp: _on_one_broker(metadata, tp, target) for tp, target in targets.items()}
    else:
        try:
            results = await controller.alter_reassignments(targets)
        except NotController:
            return ctx.respond(error_code=ErrorCode.not_controller,
                               error_message="This broker is not the controller",
                               responses=[])
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), (error, message) in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "error_code": error, "error_message": message})
    return ctx.respond(error_code=ErrorCode.none, error_message=None, responses=[
        {"name": topic, "partitions": partitions} for topic, partitions in by_topic.items()])


def _on_one_broker(metadata: MetadataStore, tp: tuple[str, int],
                   target: tuple[int, ...] | None) -> tuple[ErrorCode, str | None]:
    topic = metadata.topic(tp[0])
    if topic is None or not 0 <= tp[1] < len(topic.partitions):
        return ErrorCode.unknown_topic_or_partition, None
    if target is None:
        return ErrorCode.no_reassignment_in_progress, "There is no ongoing reassignment"
    if target != topic.partitions[tp[1]].replicas:
        return (ErrorCode.invalid_replica_assignment,
                f"Replica assignment has brokers that are not alive: {list(target)}")
    return ErrorCode.none, None


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS)
def handle_list_partition_reassignments(ctx: RequestContext, request,
                                        controller: Controller | None) -> object:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return ctx.respond(error_code=ErrorCode.cluster_authorization_failed,
                           error_message=cluster_refusal_message(ctx), topics=[
                               {"name": topic.name, "partitions": [
                                   {"partition_index": index, "replicas": (),
                                    "adding_replicas": (), "removing_replicas": ()}
                                   for index in topic.partition_indexes]}
                               for topic in request.topics or ()])
    wanted = None if request.topics is None else {
        topic.name: set(topic.partition_indexes) for topic in request.topics}
    if controller is None:
        ongoing = {}
    else:
        try:
            ongoing = controller.list_reassignments(None if wanted is None else list(wanted))
        except NotController:
            return ctx.respond(error_code=ErrorCode.not_controller,
                               error_message="This broker is not the controller", topics=[])
    topics = []
    for name, partitions in ongoing.items():
        listed = [{"partition_index": p, "replicas": replicas, "adding_replicas": adding,
                   "removing_replicas": removing}
                  for p, (replicas, adding, removing) in partitions.items()
                  if wanted is None or p in wanted[name]]
        if listed:
            topics.append({"name": name, "partitions": listed})
    return ctx.respond(error_code=ErrorCode.none, error_message=None, topics=topics)
