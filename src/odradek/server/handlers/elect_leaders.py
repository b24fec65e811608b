"""ElectLeaders (key 43): preferred or unclean leader elections on demand.

``kafka-leader-election.sh`` and AdminClient's ``electLeaders`` send it to the controller
(a broker that is not the controller answers NOT_CONTROLLER, and the client finds the
controller from Metadata). A preferred election moves leadership back to each partition's
first replica when it is alive and in the ISR; an unclean one gives a partition without a
live leader a live replica outside the ISR. Each partition answers on its own:
ELECTION_NOT_NEEDED when it already has the leader asked for,
PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica qualifies.
All partitions (``topic_partitions`` null) means every partition of the cluster. A single
broker leads everything it hosts: no election is ever needed there.

It needs ALTER on the cluster, checked first (``KafkaApis.handleElectLeaders``): without
it the request and each partition it names fail with CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.controller.controller import Controller, ElectionType, NotController
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import authorize_cluster


@handles(ApiKey.ELECT_LEADERS)
async def handle_elect_leaders(ctx: RequestContext, request, metadata: MetadataStore,
                               controller: Controller | None) -> object:
    election_type = ElectionType(getattr(request, "election_type", ElectionType.PREFERRED))
    if not authorize_cluster(ctx, AclOperation.ALTER):
        refused = ErrorCode.cluster_authorization_failed
        return _respond(ctx, refused, {
            (entry.topic, partition): (refused, None)
            for entry in request.topic_partitions or () for partition in entry.partitions})
    if request.topic_partitions is None:
        wanted = [(topic.name, state.partition) for topic in metadata.topics().values()
                  for state in topic.partitions]
    else:
        wanted = [(entry.topic, partition) for entry in request.topic_partitions
                  for partition in entry.partitions]
    if controller is None:
        results = {tp: (ErrorCode.election_not_needed if _exists(metadata, tp)
                        else ErrorCode.unknown_topic_or_partition, None) for tp in wanted}
    else:
        try:
            results = await controller.elect_leaders(wanted, election_type)
        except NotController:
            return ctx.respond(error_code=ErrorCode.not_controller,
                               replica_election_results=[])
    return _respond(ctx, ErrorCode.none, results)


def _respond(ctx: RequestContext, error: ErrorCode,
             results: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> object:
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), (partition_error, message) in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_id": partition, "error_code": partition_error, "error_message": message})
    return ctx.respond(error_code=error, replica_election_results=[
        {"topic": topic, "partition_result": partitions}
        for topic, partitions in by_topic.items()])


def _exists(metadata: MetadataStore, tp: tuple[str, int]) -> bool:
    topic = metadata.topic(tp[0])
    return topic is not None and 0 <= tp[1] < len(topic.partitions)
