"""TxnOffsetCommit (key 28): offsets a transactional producer commits for a consumer group
(KIP-98, ``send_offsets_to_transaction``).

Needs WRITE on the transactional id, then READ on the group (see ``txn_requests``; either
refused answers its error on every partition and writes nothing), then READ on each topic
(see ``group_offsets``, which also answers unknown topics). The offsets are written to the
group's partition of ``__consumer_offsets`` inside the producer's transaction, and take
effect only when its COMMIT marker is written there; an abort drops them. The group's
partition must be in the transaction (AddOffsetsToTxn put it there; the write is verified
with the transaction coordinator, KIP-890), or, from v5 (transactions v2), the write adds
it. From v3 the producer passes the consumer's group metadata, and a member of an older
generation is fenced as OffsetCommit fences it (KIP-447: ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.membership import UNKNOWN_MEMBER_ID
from odradek.coordinator.group.metadata_manager import TransactionalProducer
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.group_offsets import partition_results, requested_offsets
from odradek.server.handlers.txn_requests import producer_error

NO_GENERATION = -1
IMPLICIT_ADD_MIN_VERSION = 5  # transactions v2


@handles(ApiKey.TXN_OFFSET_COMMIT)
def handle_txn_offset_commit(ctx: RequestContext, request, metadata: MetadataStore,
                             group_coordinator: GroupCoordinator) -> object:
    refused = producer_error(ctx, request.transactional_id, request.group_id)
    if refused is not ErrorCode.none:
        return ctx.respond(topics=partition_results(request.topics, refused))
    offsets, errors = requested_offsets(ctx, request.topics, metadata)
    committed: Completion[dict[TopicPartition, ErrorCode]] = Completion()
    if offsets:
        group_coordinator.commit_transactional_offsets(
            group_id=request.group_id,
            producer=TransactionalProducer(
                request.transactional_id, request.producer_id, request.producer_epoch,
                add=ctx.api_version >= IMPLICIT_ADD_MIN_VERSION),
            generation_id=getattr(request, "generation_id", NO_GENERATION),
            member_id=getattr(request, "member_id", UNKNOWN_MEMBER_ID),
            group_instance_id=getattr(request, "group_instance_id", None),
            offsets=offsets,
            respond=committed)
    else:
        committed({})
    return committed.then(lambda commit_errors: ctx.respond(
        topics=partition_results(request.topics, errors | commit_errors)))
