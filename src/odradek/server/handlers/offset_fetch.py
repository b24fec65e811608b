"""OffsetFetch (key 9): a group's committed offsets, -1 where none is committed.

v1-v7 ask for one group, v8+ for a batch (KIP-709). A null topic list (v2+) asks for every
committed offset of the group. ``require_stable`` (v7+, KIP-447) asks to wait out pending
transactional commits: a partition whose offset a transaction not yet ended has committed
gets UNSTABLE_OFFSET_COMMIT (retriable), so a read_committed consumer starting after a
crash resumes from the offsets the transaction decides, not from older ones.
Before v2 a group-level error is given on every partition, which is where those versions
carry errors.
"""

from __future__ import annotations

from itertools import groupby

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.offsets_topic import OffsetAndMetadata
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
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
                      request.require_stable)}
            for group in request.groups])
    return ctx.respond(**_fetch(ctx, group_coordinator, request.group_id, request.topics,
                                getattr(request, "require_stable", False)))


def _fetch(ctx: RequestContext, group_coordinator: GroupCoordinator, group_id: str,
           topics, require_stable: bool) -> dict:
    wanted = None if topics is None else [
        TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]
    error, offsets = group_coordinator.fetch_offsets(group_id, wanted)
    if error is not ErrorCode.none:
        if ctx.api_version >= TOP_LEVEL_ERROR_MIN_VERSION:
            return {"error_code": error, "topics": []}
        offsets = {tp: None for tp in wanted or ()}
    partition_error = ErrorCode.none if ctx.api_version >= TOP_LEVEL_ERROR_MIN_VERSION else error
    unstable = group_coordinator.unstable_partitions(group_id) if require_stable else set()
    by_topic = groupby(sorted(offsets.items()) if wanted is None else offsets.items(),
                       key=lambda item: item[0].topic)
    return {"error_code": error, "topics": [
        {"name": name, "partitions": [
            _partition(tp, None, ErrorCode.unstable_offset_commit) if tp in unstable
            else _partition(tp, offset, partition_error) for tp, offset in items]}
        for name, items in by_topic]}


def _partition(tp: TopicPartition, offset: OffsetAndMetadata | None, error: ErrorCode) -> dict:
    if offset is None:
        return {"partition_index": tp.partition, "committed_offset": NO_OFFSET,
                "committed_leader_epoch": -1, "metadata": "", "error_code": error}
    return {"partition_index": tp.partition, "committed_offset": offset.offset,
            "committed_leader_epoch": offset.leader_epoch, "metadata": offset.metadata,
            "error_code": error}
