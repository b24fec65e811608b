"""DescribeTransactions (key 65): the state of transactional ids this broker coordinates
(KIP-664), for ``odradek transactions describe`` and Kafka's ``kafka-transactions.sh``.

Each id gets its state as Kafka's tools name it ("Ongoing", "PrepareCommit", ...), producer
id and epoch, timeout, when its transaction started and the partitions in it; an id
coordinated elsewhere gets NOT_COORDINATOR, an unknown one TRANSACTIONAL_ID_NOT_FOUND.
As Kafka's ``KafkaApis.handleDescribeTransactionsRequest`` does, an id the principal may not
DESCRIBE gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing of its state, and the
partitions of topics it may not DESCRIBE are left out of a transaction's.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.transaction import TransactionCoordinator
from odradek.coordinator.transaction.coordinator import TransactionDescription
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import partitions_by_topic
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles


@handles(ApiKey.DESCRIBE_TRANSACTIONS)
def handle_describe_transactions(ctx: RequestContext, request,
                                 transaction_coordinator: TransactionCoordinator) -> object:
    ids = list(request.transactional_ids)
    describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                       ids)
    described = {d.transactional_id: d for d in transaction_coordinator.describe_transactions(
        [tid for tid in ids if tid in describable])}
    return ctx.respond(transaction_states=[
        _state(ctx, described[tid] if tid in describable else TransactionDescription(
            tid, ErrorCode.transactional_id_authorization_failed))
        for tid in ids])


def _state(ctx: RequestContext, d: TransactionDescription) -> dict:
    if d.error is not ErrorCode.none:
        # Kafka leaves every other field at its default (0) in an error entry.
        return {"error_code": d.error, "transactional_id": d.transactional_id,
                "transaction_state": "", "transaction_timeout": 0, "transaction_start_time": 0,
                "producer_id": 0, "producer_epoch": 0, "topics": []}
    topics = partitions_by_topic(d.topic_partitions)
    describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, topics)
    return {"error_code": d.error, "transactional_id": d.transactional_id,
            "transaction_state": d.state, "transaction_timeout": d.transaction_timeout_ms,
            "transaction_start_time": d.transaction_start_time_ms,
            "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
            "topics": [{"topic": topic, "partitions": partitions}
                       for topic, partitions in topics.items() if topic in describable]}
