"""ShareFetch (key 78) and ShareAcknowledge (key 79): a share consumer's records, each
acquired for it alone for a while, and its acknowledgements of them — carried by a fetch or
sent alone (KIP-932). The logic is the ``SharePartitionManager``'s; here the request is
mapped to it: topic ids to names, the share session's epoch, the acknowledgement batches.

Authorization as Kafka's ``KafkaApis``: READ on the group (else GROUP_AUTHORIZATION_FAILED
for the whole request) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its
partitions, which are neither read nor acknowledged). An unknown topic id is
UNKNOWN_TOPIC_ID. A session epoch out of step is INVALID_SHARE_SESSION_EPOCH, a session that
does not exist SHARE_SESSION_NOT_FOUND; epoch -1 closes the session, and the records the
member still holds become available to the others.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from odradek.coordinator.share.manager import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    PartitionFetch,
    SharePartitionManager,
)
from odradek.coordinator.share.partition import AcknowledgementBatch
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.protocol.messages import millis
from odradek.protocol.topic_partition import TopicPartition
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.config import BrokerConfig
from odradek.server.handlers import RequestContext, handles

# (topic id, partition) -> the partition's answer, in the order of the request.
Answers = dict[tuple[uuid.UUID, int], dict]


@handles(ApiKey.SHARE_FETCH)
async def handle_share_fetch(ctx: RequestContext, request, metadata: MetadataStore,
                             share_partitions: SharePartitionManager,
                             config: BrokerConfig) -> object:
    lock_ms = config.get("group.share.record.lock.duration.ms")
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id or ""):
        return ctx.respond(error_code=ErrorCode.group_authorization_failed, responses=[],
                           node_endpoints=[], acquisition_lock_timeout=lock_ms)
    named = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    answers, readable = _resolve(ctx, metadata, named)
    forgotten = set(_resolve(ctx, metadata, [(t.topic_id, p) for t in
                                             request.forgotten_topics_data
                                             for p in t.partitions])[1].values())
    error, session = share_partitions.session(
        request.group_id, request.member_id, request.share_session_epoch,
        {tp: topic_id for (topic_id, _), tp in readable.items()}, forgotten)
    if error is not ErrorCode.none:
        return ctx.respond(error_code=error, responses=[], node_endpoints=[],
                           acquisition_lock_timeout=lock_ms)
    acknowledged = await _acknowledge(share_partitions, request, readable, answers)
    if request.share_session_epoch == FINAL_EPOCH:
        share_partitions.release_member(request.group_id, request.member_id)
    else:
        fetched = await share_partitions.fetch(
            request.group_id, request.member_id, session.partitions,
            max_wait_ms=millis(request.max_wait), max_bytes=request.max_bytes,
            max_records=max(request.max_records, 1))
        by_key = {(session.partitions[tp], tp.partition): result
                  for tp, result in fetched.items()}
        for key, result in by_key.items():
            answers[key] = _fetched(key[1], result, acknowledged.get(key))
    for key, ack_error in acknowledged.items():  # acknowledged, not fetched
        answers.setdefault(key, _error(key[1], ErrorCode.none, ack_error))
    return ctx.respond(error_code=ErrorCode.none, responses=_topics(answers),
                       node_endpoints=[], acquisition_lock_timeout=lock_ms)


@handles(ApiKey.SHARE_ACKNOWLEDGE)
async def handle_share_acknowledge(ctx: RequestContext, request, metadata: MetadataStore,
                                   share_partitions: SharePartitionManager) -> object:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id or ""):
        return ctx.respond(error_code=ErrorCode.group_authorization_failed, responses=[],
                           node_endpoints=[])
    named = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    answers, readable = _resolve(ctx, metadata, named)
    epoch = request.share_session_epoch
    error = ErrorCode.invalid_share_session_epoch if epoch == INITIAL_EPOCH else \
        share_partitions.session(request.group_id, request.member_id, epoch, {}, set())[0]
    if error is not ErrorCode.none:
        return ctx.respond(error_code=error, responses=[], node_endpoints=[])
    acknowledged = await _acknowledge(share_partitions, request, readable, answers)
    for key, ack_error in acknowledged.items():
        answers[key] = {"partition_index": key[1], "error_code": ack_error,
                        "current_leader": {"leader_id": -1, "leader_epoch": -1}}
    if epoch == FINAL_EPOCH:
        share_partitions.release_member(request.group_id, request.member_id)
    return ctx.respond(error_code=ErrorCode.none, responses=_topics(answers), node_endpoints=[])


def _resolve(ctx: RequestContext, metadata: MetadataStore,
             named: Iterable[tuple[uuid.UUID, int]]
             ) -> tuple[Answers, dict[tuple[uuid.UUID, int], TopicPartition]]:
    """(answers of the partitions refused, the partitions that may be read by topic id)."""
    answers: Answers = {}
    readable: dict[tuple[uuid.UUID, int], TopicPartition] = {}
    names = {}
    for topic_id, index in named:
        topic = metadata.topic_by_id(topic_id)
        if topic is None or index >= len(topic.partitions):
            answers[(topic_id, index)] = _error(index, ErrorCode.unknown_topic_id
                                                if topic is None
                                                else ErrorCode.unknown_topic_or_partition)
        else:
            names[(topic_id, index)] = topic.name
    allowed = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC, set(names.values()))
    for key, name in names.items():
        if name in allowed:
            readable[key] = TopicPartition(name, key[1])
        else:
            answers[key] = _error(key[1], ErrorCode.topic_authorization_failed)
    return answers, readable


async def _acknowledge(share_partitions: SharePartitionManager, request,
                       readable: dict[tuple[uuid.UUID, int], TopicPartition],
                       answers: Answers) -> dict[tuple[uuid.UUID, int], ErrorCode]:
    acknowledgements = {}
    for topic in request.topics:
        for partition in topic.partitions:
            key = (topic.topic_id, partition.partition_index)
            if key in readable and partition.acknowledgement_batches:
                acknowledgements[readable[key]] = (topic.topic_id, [
                    AcknowledgementBatch(b.first_offset, b.last_offset,
                                         tuple(b.acknowledge_types))
                    for b in partition.acknowledgement_batches])
    if not acknowledgements:
        return {}
    errors = await share_partitions.acknowledge(request.group_id, request.member_id,
                                                acknowledgements)
    return {(acknowledgements[tp][0], tp.partition): error for tp, error in errors.items()}


def _fetched(index: int, result: PartitionFetch, ack_error: ErrorCode | None) -> dict:
    return {
        "partition_index": index, "error_code": result.error,
        "acknowledge_error_code": ack_error or ErrorCode.none,
        "current_leader": {"leader_id": -1, "leader_epoch": result.leader_epoch},
        "records": result.records,
        "acquired_records": [{"first_offset": a.first_offset, "last_offset": a.last_offset,
                              "delivery_count": a.delivery_count} for a in result.acquired],
    }


def _error(index: int, error: ErrorCode, ack_error: ErrorCode = ErrorCode.none) -> dict:
    return {"partition_index": index, "error_code": error,
            "acknowledge_error_code": ack_error,
            "current_leader": {"leader_id": -1, "leader_epoch": -1}, "records": b"",
            "acquired_records": []}


def _topics(answers: Answers) -> list[dict]:
    topics: dict[uuid.UUID, list[dict]] = {}
    for (topic_id, _), answer in answers.items():
        topics.setdefault(topic_id, []).append(answer)
    return [{"topic_id": topic_id, "partitions": partitions}
            for topic_id, partitions in topics.items()]
