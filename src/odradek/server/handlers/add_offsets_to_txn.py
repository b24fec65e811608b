"""AddOffsetsToTxn (key 25): a consumer group's offsets join a producer's transaction.

The group's partition of ``__consumer_offsets`` is added to the transaction like any other
partition (its marker will make the offsets TxnOffsetCommit writes take effect), so the
answer is AddPartitionsToTxn's for that one partition. ``__consumer_offsets`` is created
here if no group has needed it yet, as FindCoordinator would. Needs WRITE on the
transactional id, then READ on the group (see ``txn_requests``): refused, nothing is added
and no topic created.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.offsets_topic import OFFSETS_TOPIC, partition_for
from odradek.coordinator.transaction import TransactionCoordinator
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.server.auto_topic_creation import AutoTopicCreationManager
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.producer_fenced import fenced_as_known
from odradek.server.handlers.txn_requests import producer_error

PRODUCER_FENCED_MIN_VERSION = 2  # KIP-588


@handles(ApiKey.ADD_OFFSETS_TO_TXN)
async def handle_add_offsets_to_txn(ctx: RequestContext, request,
                                    transaction_coordinator: TransactionCoordinator,
                                    auto_topic_creation: AutoTopicCreationManager) -> object:
    refused = producer_error(ctx, request.transactional_id, request.group_id)
    if refused is not ErrorCode.none:
        return ctx.respond(error_code=refused)
    topic = await auto_topic_creation.offsets_topic()
    if topic is None or not topic.partitions:
        return ctx.respond(error_code=ErrorCode.coordinator_not_available)
    tp = TopicPartition(OFFSETS_TOPIC, partition_for(request.group_id, len(topic.partitions)))
    completion: Completion[dict[TopicPartition, ErrorCode]] = Completion()
    transaction_coordinator.add_partitions(request.transactional_id, request.producer_id,
                                           request.producer_epoch, {tp}, completion)
    errors = await completion.wait()
    return ctx.respond(error_code=fenced_as_known(errors[tp], ctx.api_version,
                                                  PRODUCER_FENCED_MIN_VERSION))
