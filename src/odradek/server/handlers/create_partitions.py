"""CreatePartitions (key 37): raise a topic's partition count, never lower it.

Checked as Kafka 3.9's ZooKeeper-mode broker does (KafkaApis.handleCreatePartitionsRequest,
ZkAdminManager.createPartitions, AdminZkClient.createNewPartitionsAssignment), with its
messages: a topic named twice, a topic the client may not ALTER (TOPIC_AUTHORIZATION_FAILED,
whether or not it exists), an unknown topic, a count that is not an increase, then an
explicit assignment for the new partitions (known brokers, one list per new partition, no
empty or duplicate lists, the replication factor of partition 0). ``validate_only`` checks
and changes nothing. The metadata store's event makes the broker create the new logs.
"""

from __future__ import annotations

from collections import Counter

from kio.schema.errors import ErrorCode

from odradek.metadata.model import TopicMetadata
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.protocol.messages import millis
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.api_error import ApiError, check_new_partitions, completion_error


@handles(ApiKey.CREATE_PARTITIONS)
async def handle_create_partitions(ctx: RequestContext, request,
                                   metadata: MetadataStore) -> object:
    timeout_ms = millis(request.timeout)
    occurrences = Counter(topic.name for topic in request.topics)
    alterable = ctx.authorized_names(AclOperation.ALTER, ResourceType.TOPIC, occurrences)
    results = {}
    for topic in request.topics:
        if topic.name in results:
            continue
        try:
            if occurrences[topic.name] > 1:
                raise ApiError(ErrorCode.invalid_request, "Duplicate topic in request.")
            if topic.name not in alterable:
                raise ApiError(ErrorCode.topic_authorization_failed,
                               "The topic authorization is failed.")
            error = await _create_partitions(metadata, topic, request.validate_only, timeout_ms)
            results[topic.name] = {"name": topic.name, "error_code": error, "error_message": None}
        except ApiError as exc:
            results[topic.name] = {"name": topic.name, "error_code": exc.error_code,
                                   "error_message": exc.message}
    return ctx.respond(results=list(results.values()))


async def _create_partitions(store: MetadataStore, wanted, validate_only: bool,
                             timeout_ms: int) -> ErrorCode:
    topic = store.topic(wanted.name)
    if topic is None:
        raise ApiError(ErrorCode.unknown_topic_or_partition,
                       f"The topic '{wanted.name}' does not exist.")
    current = len(topic.partitions)
    increment = wanted.count - current
    if increment < 0:
        raise ApiError(ErrorCode.invalid_partitions,
                       f"Topic currently has {current} partitions, which is higher than the "
                       f"requested {wanted.count}.")
    if increment == 0:
        raise ApiError(ErrorCode.invalid_partitions, f"Topic already has {current} partitions.")
    check_new_partitions(increment)
    if wanted.assignments is not None:
        _validate_assignments(topic, [list(a.broker_ids) for a in wanted.assignments],
                              increment, [b.node_id for b in store.brokers()])
    if validate_only:
        return ErrorCode.none
    await store.create_partitions(
        wanted.name, wanted.count,
        assignments=None if wanted.assignments is None
        else [tuple(a.broker_ids) for a in wanted.assignments])
    return completion_error(timeout_ms)


def _validate_assignments(topic: TopicMetadata, assignments: list[list[int]], increment: int,
                          live_brokers: list[int]) -> None:
    unknown = sorted({b for replicas in assignments for b in replicas} - set(live_brokers))
    if unknown:
        raise ApiError(ErrorCode.invalid_replica_assignment,
                       f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
    if len(assignments) != increment:
        raise ApiError(ErrorCode.invalid_replica_assignment,
                       f"Increasing the number of partitions by {increment} but "
                       f"{len(assignments)} assignments provided.")
    first_new = len(topic.partitions)
    for partition, replicas in enumerate(assignments, start=first_new):
        if not replicas:
            raise ApiError(ErrorCode.invalid_replica_assignment,
                           f"Cannot have replication factor of 0 for partition id {partition}.")
        if len(replicas) != len(set(replicas)):
            raise ApiError(ErrorCode.invalid_replica_assignment,
                           "Duplicate brokers not allowed in replica assignment: "
                           f"{', '.join(map(str, replicas))} for partition id {partition}.")
    expected = topic.replication_factor
    bad = [(p, len(r)) for p, r in enumerate(assignments, start=first_new) if len(r) != expected]
    if bad:
        raise ApiError(ErrorCode.invalid_replica_assignment,
                       "Inconsistent replication factor between partitions, partition 0 has "
                       f"{expected} while partitions [{', '.join(str(p) for p, _ in bad)}] have "
                       f"replication factors [{', '.join(str(n) for _, n in bad)}], "
                       "respectively.")
