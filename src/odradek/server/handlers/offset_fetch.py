"""OffsetFetch (key 9): a group's committed offsets, -1 where none is committed.

v1-v7 ask for one group, v8+ for a batch (KIP-709). A null topic list (v2+) asks for every
committed offset of the group. ``require_stable`` (v7+, KIP-447) asks to wait out pending
transactional commits: a partition whose offset a transaction not yet ended has committed
gets UNSTABLE_OFFSET_COMMIT (retriable), so a read_committed consumer starting after a
crash resumes from the offsets the transaction decides, not from older ones.
Before v2 a group-level error is given on every partition, which is where those versions
carry errors.

As Kafka's ``KafkaApis.handleOffsetFetchRequestFromCoordinator`` authorizes it, each group
needs DESCRIBE on it (GROUP_AUTHORIZATION_FAILED otherwise, and no offset of it is shown),
and offsets are shown only for topics the principal may DESCRIBE: a topic named in the
request gets TOPIC_AUTHORIZATION_FAILED (listed after the others, as from Kafka); when all
offsets are asked for, the others are left out, so that a refusal reveals no topic name.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.offsets_topic import OffsetAndMetadata
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles

BATCHED_GROUPS_MIN_VERSION = 8  # KIP-709
TOP_LEVEL_ERROR_MIN_VERSION = 2
NO_OFFSET = -1


@handles(ApiKey.OFFSET_FETCH)
def handle_offset_fetch(ctx: RequestContext, request,
                        group_coordinator: GroupCoordinator) -> object:
    if ctx.api_version >= BATCHED_GROUPS_MIN_VERSION:
        return ctx.respond(groups=[
            {"group_id": group.group_id,
             **_fetch(ctx, group_coordinator, group.group_id, group.topics,
                      request.require_stable, getattr(group, "member_id", None),
                      getattr(group, "member_epoch", -1))}
            for group in request.groups])
    return ctx.respond(**_fetch(ctx, group_coordinator, request.group_id, request.topics,
                                getattr(request, "require_stable", False)))


def _fetch(ctx: RequestContext, group_coordinator: GroupCoordinator, group_id: str,
           topics, require_stable: bool, member_id: str | None = None,
           member_epoch: int = -1) -> dict:
    """One group's offsets; from v9 a consumer-protocol member names itself and its epoch,
    and is answered UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH if it is not current."""
    requested = None if topics is None else [
        TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return _group_error(ctx, requested, ErrorCode.group_authorization_failed)
    if requested is None:
        error, offsets = group_coordinator.fetch_offsets(group_id, None, member_id,
                                                         member_epoch)
        describable = _describable(ctx, offsets)
        offsets = dict(sorted(offsets.items()))
    else:
        describable = _describable(ctx, requested)
        error, offsets = group_coordinator.fetch_offsets(
            group_id, [tp for tp in requested if tp.topic in describable], member_id,
            member_epoch)
    if error is not ErrorCode.none:
        return _group_error(ctx, requested, error)
    unstable = group_coordinator.unstable_partitions(group_id) if require_stable else set()
    shown = [(tp, offset) for tp, offset in offsets.items() if tp.topic in describable]
    partitions = [
        _partition(tp, None, ErrorCode.unstable_offset_commit) if tp in unstable
        else _partition(tp, offset, ErrorCode.none) for tp, offset in shown]
    partitions += [_partition(tp, None, ErrorCode.topic_authorization_failed)
                   for tp in requested or () if tp.topic not in describable]
    return {"error_code": ErrorCode.none, "topics": _topics(partitions)}


def _describable(ctx: RequestContext, partitions: Iterable[TopicPartition]) -> set[str]:
    return ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                {tp.topic for tp in partitions})


def _group_error(ctx: RequestContext, requested: list[TopicPartition] | None,
                 error: ErrorCode) -> dict:
    if ctx.api_version >= TOP_LEVEL_ERROR_MIN_VERSION:
        return {"error_code": error, "topics": []}
    return {"error_code": error,
            "topics": _topics([_partition(tp, None, error) for tp in requested or ()])}


def _topics(partitions: list[tuple[TopicPartition, dict]]) -> list[dict]:
    return [{"name": name, "partitions": [partition for _, partition in entries]}
            for name, entries in groupby(partitions, key=lambda entry: entry[0].topic)]


def _partition(tp: TopicPartition, offset: OffsetAndMetadata | None,
               error: ErrorCode) -> tuple[TopicPartition, dict]:
    if offset is None:
        return tp, {"partition_index": tp.partition, "committed_offset": NO_OFFSET,
                    "committed_leader_epoch": -1, "metadata": "", "error_code": error}
    return tp, {"partition_index": tp.partition, "committed_offset": offset.offset,
                "committed_leader_epoch": offset.leader_epoch, "metadata": offset.metadata,
                "error_code": error}
