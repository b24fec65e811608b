"""AddPartitionsToTxn (key 24): partitions join a producer's ongoing transaction (KIP-98).

Up to v3 a producer names the partitions it is about to write to in its transaction; the
transaction coordinator records them in ``__transaction_state`` before answering, so that
the transaction's markers will reach each of them. From v4 the request is the brokers' form
(KIP-890): a batch of transactions, each either added or, with ``verify_only``, checked —
a partition leader asks whether a transactional write belongs to the producer's ongoing
transaction before taking it. Every partition of a transaction gets the same error.

Who may ask (Kafka's ``KafkaApis.handleAddPartitionsToTxnRequest``): the brokers' form needs
CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for the whole request); a
producer (up to v3) needs WRITE on its transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
on every partition, see ``txn_requests``) and WRITE on every topic it names. Internal topics
are never a producer's to add (``__consumer_offsets`` joins through AddOffsetsToTxn). If any
topic is refused, nothing is added: its partitions get TOPIC_AUTHORIZATION_FAILED and the
others OPERATION_NOT_ATTEMPTED.
"""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from odradek.coordinator.transaction import TransactionCoordinator
from odradek.metadata.model import INTERNAL_TOPICS
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import authorize_cluster
from odradek.server.handlers.producer_fenced import fenced_as_known
from odradek.server.handlers.txn_requests import producer_error

BROKER_FORM_MIN_VERSION = 4
PRODUCER_FENCED_MIN_VERSION = 2  # KIP-588
Errors = dict[TopicPartition, ErrorCode]


@handles(ApiKey.ADD_PARTITIONS_TO_TXN)
def handle_add_partitions_to_txn(ctx: RequestContext, request,
                                 transaction_coordinator: TransactionCoordinator) -> object:
    if ctx.api_version < BROKER_FORM_MIN_VERSION:
        partitions = _partitions(request.v3_and_below_topics)
        completion: Completion[Errors] = Completion()
        refused = _producer_refusal(ctx, request.v3_and_below_transactional_id, partitions)
        if refused is not None:
            completion(refused)
        else:
            _add(transaction_coordinator, request.v3_and_below_transactional_id,
                 request.v3_and_below_producer_id, request.v3_and_below_producer_epoch,
                 partitions, False, completion)
        return completion.then(lambda errors: ctx.respond(
            results_by_topic_v3_and_below=_topic_results({
                tp: fenced_as_known(error, ctx.api_version, PRODUCER_FENCED_MIN_VERSION)
                for tp, error in errors.items()})))
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return ctx.respond(error_code=ErrorCode.cluster_authorization_failed,
                           results_by_transaction=[])
    transactions = list(request.transactions)
    results: list[Errors | None] = [None] * len(transactions)
    batch: Completion[list[Errors]] = Completion()

    def done(i: int, errors: Errors) -> None:
        results[i] = errors
        if all(result is not None for result in results):
            batch(results)

    if not transactions:
        batch([])
    for i, txn in enumerate(transactions):
        _add(transaction_coordinator, txn.transactional_id, txn.producer_id,
             txn.producer_epoch, _partitions(txn.topics), txn.verify_only,
             lambda errors, i=i: done(i, errors))
    return batch.then(lambda all_errors: ctx.respond(
        error_code=ErrorCode.none,
        results_by_transaction=[
            {"transactional_id": txn.transactional_id, "topic_results": _topic_results(errors)}
            for txn, errors in zip(transactions, all_errors)]))


def _producer_refusal(ctx: RequestContext, transactional_id: str,
                      partitions: set[TopicPartition]) -> Errors | None:
    """Each partition's error if the producer may not add them all; None if it may."""
    refused = producer_error(ctx, transactional_id)
    if refused is not ErrorCode.none:
        return dict.fromkeys(partitions, refused)
    writable = ctx.authorized_names(AclOperation.WRITE, ResourceType.TOPIC,
                                    {tp.topic for tp in partitions} - INTERNAL_TOPICS)
    if all(tp.topic in writable for tp in partitions):
        return None
    return {tp: ErrorCode.operation_not_attempted if tp.topic in writable
            else ErrorCode.topic_authorization_failed for tp in partitions}


def _partitions(topics) -> set[TopicPartition]:
    return {TopicPartition(topic.name, partition)
            for topic in topics for partition in topic.partitions}


def _add(coordinator: TransactionCoordinator, transactional_id: str, producer_id: int,
         producer_epoch: int, partitions: set[TopicPartition], verify_only: bool,
         respond: Callable[[Errors], None]) -> None:
    if verify_only:
        respond(coordinator.verify_partitions(transactional_id, producer_id, producer_epoch,
                                              partitions))
    else:
        coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                   respond)


def _topic_results(errors: Errors) -> list[dict]:
    by_topic: dict[str, list[dict]] = {}
    for tp, error in sorted(errors.items()):
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "partition_error_code": error})
    return [{"name": name, "results_by_partition": results}
            for name, results in by_topic.items()]
