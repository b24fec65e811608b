"""OffsetCommit (key 8): a group's consumed positions, written to ``__consumer_offsets``.

Needs READ on the group (GROUP_AUTHORIZATION_FAILED on every partition otherwise, nothing
written), then READ on each topic: see ``group_offsets`` for how the partitions are sorted,
unknown topics included. A member commits with its generation and member id, and is fenced
if they are stale (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) or if its
group is between JoinGroup and SyncGroup (REBALANCE_IN_PROGRESS). Generation -1 without a
member id is a simple commit (a consumer using assign(), an admin client), allowed while the
group has no members. The answer is sent once the commit is in the log. ``retention_time``
(v2-v4) is ignored: offsets expire by ``offsets.retention.minutes`` only.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.group_offsets import partition_results, requested_offsets


@handles(ApiKey.OFFSET_COMMIT)
def handle_offset_commit(ctx: RequestContext, request, metadata: MetadataStore,
                         group_coordinator: GroupCoordinator) -> object:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ctx.respond(topics=partition_results(request.topics,
                                                    ErrorCode.group_authorization_failed))
    offsets, errors = requested_offsets(ctx, request.topics, metadata)
    committed: Completion[dict[TopicPartition, ErrorCode]] = Completion()
    if offsets:
        group_coordinator.commit_offsets(
            group_id=request.group_id,
            generation_id=request.generation_id_or_member_epoch,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            offsets=offsets,
            respond=committed,
            api_version=ctx.api_version)
    else:
        committed({})
    return committed.then(lambda commit_errors: ctx.respond(
        topics=partition_results(request.topics, errors | commit_errors)))
