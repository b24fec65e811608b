"""WriteTxnMarkers (key 27): a transaction coordinator on another broker ends a transaction
in the partitions this broker leads (KIP-98).

Each marker is appended as a control batch with acks=-1 (see
:func:`~odradek.coordinator.transaction.marker_channel.write_markers_locally`); a partition
not led here answers NOT_LEADER_OR_FOLLOWER, so the coordinator looks for its leader again.
The response lists every marker's partitions with their errors, once all are written.

Only brokers and administrators may write markers: the principal needs ALTER on the cluster
(KIP-1037, so that an administrator can abort a hanging transaction) or CLUSTER_ACTION on
it; otherwise every partition of every marker gets CLUSTER_AUTHORIZATION_FAILED and nothing
is written (Kafka's ``KafkaApis.handleWriteTxnMarkersRequest``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.transaction.marker_channel import (
    MarkerResults,
    TxnMarker,
    write_markers_locally,
)
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.replica_manager import ReplicaManager
from odradek.security.acl import AclOperation
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import authorize_cluster


@handles(ApiKey.WRITE_TXN_MARKERS)
def handle_write_txn_markers(ctx: RequestContext, request, replica_manager: ReplicaManager,
                             group_coordinator: GroupCoordinator) -> object:
    markers = [TxnMarker(m.producer_id, m.producer_epoch, m.transaction_result,
                         m.coordinator_epoch,
                         tuple(TopicPartition(t.name, p) for t in m.topics
                               for p in t.partition_indexes))
               for m in request.markers]
    if not (authorize_cluster(ctx, AclOperation.ALTER)
            or authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)):
        return _response(ctx, markers, [
            dict.fromkeys(marker.partitions, ErrorCode.cluster_authorization_failed)
            for marker in markers])
    results: list[MarkerResults | None] = [None] * len(markers)
    completion: Completion[list[MarkerResults]] = Completion()

    def written(i: int, errors: MarkerResults) -> None:
        results[i] = errors
        if all(r is not None for r in results):
            completion(results)

    if not markers:
        completion([])
    for i, marker in enumerate(markers):
        if marker.partitions:
            write_markers_locally(replica_manager, group_coordinator, marker,
                                  lambda errors, i=i: written(i, errors))
        else:
            written(i, {})
    return completion.then(lambda all_results: _response(ctx, markers, all_results))


def _response(ctx: RequestContext, markers: list[TxnMarker],
              results: list[MarkerResults]) -> object:
    return ctx.respond(markers=[{"producer_id": marker.producer_id, "topics": _topics(errors)}
                                for marker, errors in zip(markers, results)])


def _topics(errors: MarkerResults) -> list[dict]:
    by_topic: dict[str, list[dict]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": error or ErrorCode.none})
    return [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]
