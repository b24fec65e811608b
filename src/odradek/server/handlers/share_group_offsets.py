"""DescribeShareGroupOffsets (key 90), AlterShareGroupOffsets (key 91) and
DeleteShareGroupOffsets (key 92): where a share group is in each partition — its
share-partition start offset, and from v1 its lag — and resetting or forgetting it, as
``kafka-share-groups.sh`` does.

The state is the share coordinators' (``__share_group_state``), reached through the
``SharePersister``: a group's partitions are found by asking about every partition, since
each coordinator knows only its own keys. A start offset is altered,
or a topic's state deleted, only while the group has no member (NON_EMPTY_GROUP otherwise):
a member would be handed records from the old position. Altering writes the new start with
nothing in flight and a new state epoch; the share-partitions led here read it again at
their next fetch. A partition with no state is described with start offset -1.

Authorization: DESCRIBE on the group to describe, READ on it to alter or delete, and
DESCRIBE (describe) or READ (alter, delete) on each topic, as Kafka's ``KafkaApis``.
"""

from __future__ import annotations


from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.share.manager import SharePartitionManager
from odradek.coordinator.share.persister import SharePersister
from odradek.coordinator.share.state_records import (
    RecordState,
    ShareState,
    ShareStateKey,
)
from odradek.metadata.model import TopicMetadata
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.replica_manager import ReplicaManager
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles

LAG_MIN_VERSION = 1
_SETTLED = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@handles(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
async def handle_describe_share_group_offsets(ctx: RequestContext, request,
                                              metadata: MetadataStore,
                                              share_partitions: SharePartitionManager,
                                              replica_manager: ReplicaManager) -> object:
    return ctx.respond(groups=[
        await _describe(ctx, group, metadata, share_partitions.persister, replica_manager)
        for group in request.groups])


async def _describe(ctx: RequestContext, group, metadata: MetadataStore,
                    persister: SharePersister, replica_manager: ReplicaManager) -> dict:
    group_id = group.group_id
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return {"group_id": group_id, "topics": [],
                "error_code": ErrorCode.group_authorization_failed}
    if group.topics is None:  # every partition the group has state for
        states = {key: found for key, found in
                  (await persister.read_many(every_key(metadata, group_id))).items()
                  if found[1] is not None}
        wanted: dict[str, list[int]] = {}
        for key in states:
            topic = metadata.topic_by_id(key.topic_id)
            wanted.setdefault(topic.name, []).append(key.partition)
    else:
        wanted = {t.topic_name: list(t.partitions) for t in group.topics}
        states = await persister.read_many([
            ShareStateKey(group_id, topic.topic_id, index)
            for name, partitions in wanted.items() if (topic := metadata.topic(name))
            for index in partitions if index < len(topic.partitions)])
    describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, wanted)
    topics = []
    for name, partitions in sorted(wanted.items()):
        topic = metadata.topic(name)
        rows = []
        for index in sorted(set(partitions)):
            if name not in describable:
                rows.append(_offset(index, -1, ErrorCode.topic_authorization_failed))
            elif topic is None or index >= len(topic.partitions):
                rows.append(_offset(index, -1, ErrorCode.unknown_topic_or_partition))
            else:
                error, state = states[ShareStateKey(group_id, topic.topic_id, index)]
                rows.append(_offset(index, state.start_offset if state else -1, error,
                                    _lag(state, replica_manager.get_partition(
                                        TopicPartition(name, index)))))
        topics.append({"topic_name": name,
                       "topic_id": topic.topic_id if topic is not None else None,
                       "partitions": rows})
    return {"group_id": group_id, "topics": topics, "error_code": ErrorCode.none}


def every_key(metadata: MetadataStore, group_id: str) -> list[ShareStateKey]:
    """The keys of every partition the group may have state for: its state is kept by the
    share coordinators, each of which knows only its own keys."""
    return [ShareStateKey(group_id, topic.topic_id, state.partition)
            for topic in metadata.topics().values() if not topic.is_internal
            for state in topic.partitions]


async def keys_with_state(persister: SharePersister, metadata: MetadataStore,
                          group_id: str) -> list[ShareStateKey]:
    return [key for key, (_, state) in
            (await persister.read_many(every_key(metadata, group_id))).items()
            if state is not None]


def _lag(state: ShareState | None, partition) -> int:
    """Records past the start offset not yet acknowledged or archived (-1: unknown here)."""
    if state is None or partition is None or not partition.is_leader:
        return -1
    settled = sum(b.last_offset - b.first_offset + 1 for b in state.batches
                  if b.delivery_state in _SETTLED)
    return max(0, partition.high_watermark - state.start_offset - settled)


def _offset(index: int, start_offset: int, error: ErrorCode, lag: int = -1) -> dict:
    return {"partition_index": index, "start_offset": start_offset, "leader_epoch": -1,
            "lag": lag, "error_code": error}


@handles(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
async def handle_alter_share_group_offsets(
        ctx: RequestContext, request, metadata: MetadataStore,
        group_coordinator: GroupCoordinator, share_partitions: SharePartitionManager) -> object:
    error = _group_error(ctx, request.group_id, group_coordinator)
    if error is not ErrorCode.none:
        return ctx.respond(error_code=error, responses=[])
    persister = share_partitions.persister
    responses = []
    for wanted, topic, allowed in _topics(ctx, metadata, request.topics):
        rows = []
        for partition in wanted.partitions:
            index = partition.partition_index
            if not allowed:
                result = ErrorCode.topic_authorization_failed
            elif topic is None or index >= len(topic.partitions):
                result = ErrorCode.unknown_topic_or_partition
            else:
                key = ShareStateKey(request.group_id, topic.topic_id, index)
                result, state = await persister.read(key)
                if result is ErrorCode.none:
                    result = await persister.write(key, ShareState(
                        (state.state_epoch + 1) if state else 0, partition.start_offset, ()),
                        -1)
            rows.append({"partition_index": index, "error_code": result})
        responses.append({"topic_name": wanted.topic_name,
                          "topic_id": topic.topic_id if topic is not None else None,
                          "partitions": rows})
    share_partitions.forget_group(request.group_id)
    return ctx.respond(error_code=ErrorCode.none, responses=responses)


@handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
async def handle_delete_share_group_offsets(
        ctx: RequestContext, request, metadata: MetadataStore,
        group_coordinator: GroupCoordinator, share_partitions: SharePartitionManager) -> object:
    error = _group_error(ctx, request.group_id, group_coordinator)
    if error is not ErrorCode.none:
        return ctx.respond(error_code=error, responses=[])
    responses = []
    for wanted, topic, allowed in _topics(ctx, metadata, request.topics):
        if not allowed:
            result = ErrorCode.topic_authorization_failed
        elif topic is None:
            result = ErrorCode.unknown_topic_or_partition
        else:
            result = await share_partitions.persister.delete([
                ShareStateKey(request.group_id, topic.topic_id, state.partition)
                for state in topic.partitions])
        responses.append({"topic_name": wanted.topic_name,
                          "topic_id": topic.topic_id if topic is not None else None,
                          "error_code": result})
    share_partitions.forget_group(request.group_id)
    return ctx.respond(error_code=ErrorCode.none, responses=responses)


def _group_error(ctx: RequestContext, group_id: str, group_coordinator: GroupCoordinator
                 ) -> ErrorCode:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed
    group = group_coordinator.share_protocol.groups.get(group_id)
    if group is not None and group.members:
        return ErrorCode.non_empty_group
    if group_id in group_coordinator.manager.groups:
        return ErrorCode.group_id_not_found  # a group of another kind
    return ErrorCode.none


def _topics(ctx: RequestContext, metadata: MetadataStore, topics
            ) -> list[tuple[object, TopicMetadata | None, bool]]:
    names = {t.topic_name for t in topics}
    allowed = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC, names)
    return [(t, metadata.topic(t.topic_name), t.topic_name in allowed) for t in topics]
