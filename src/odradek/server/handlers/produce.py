"""Produce (key 0): a translation between the request and ``ReplicaManager.append_records``.

Each partition's batch is validated by the log validator (size, CRC32C, header sanity, keys
on compacted topics, record timestamps when the topic bounds them; each refused record is
named, KIP-467), checked against the producer state for idempotent producers (KIP-98) and
appended as received, stamped with its offsets (DESIGN.md decision 3). acks=0 gets no
response; acks=1 is answered once the leader has the batch; acks=-1 once every in-sync
replica has it, or REQUEST_TIMED_OUT at the request's ``timeout_ms``. A transactional
batch that starts its producer's transaction in a partition waits until the transaction
coordinator has confirmed (or, from v12, added) the partition (KIP-890).

Authorization, as Kafka's ``KafkaApis.handleProduceRequest``: transactional records need
WRITE on the request's transactional id, else every partition is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then each partition needs WRITE on its topic, else
it is answered TOPIC_AUTHORIZATION_FAILED (before whether the topic exists is looked at)
and nothing of it is appended.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.protocol.messages import millis
from odradek.protocol.records import starts_transactional
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.delayed_produce import ProducePartitionResult
from odradek.replication.replica_manager import ReplicaManager
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import (
    AUTHORIZATION_FAILED_MESSAGES,
    refused_partitions,
)

# From v12 (transactions v2, KIP-890) a transactional write adds its partition to the
# transaction: the client sends no AddPartitionsToTxn.
IMPLICIT_ADD_PARTITIONS_VERSION = 12

# Kafka lets only its admin tools write to internal topics (ReplicaManager.appendToLocalLog).
ADMIN_CLIENT_ID = "__admin_client"


@handles(ApiKey.PRODUCE)
def handle_produce(ctx: RequestContext, request, replica_manager: ReplicaManager) -> object:
    entries = {TopicPartition(topic.name, data.index): data.records
               for topic in request.topic_data for data in topic.partition_data}
    transactional = any(records is not None and starts_transactional(records)
                        for records in entries.values())
    if transactional and not _may_write_transactions(ctx, request.transactional_id):
        if request.acks == 0:
            return None
        # The request's error response: every partition with the error's message.
        error = ErrorCode.transactional_id_authorization_failed
        return _response(ctx, request, dict.fromkeys(
            entries, _failed(error, AUTHORIZATION_FAILED_MESSAGES[error])))
    refused = {tp: _failed(ErrorCode.topic_authorization_failed)
               for tp in refused_partitions(ctx, AclOperation.WRITE, entries)}
    if refused:
        entries = {tp: records for tp, records in entries.items() if tp not in refused}
    completion: Completion[dict[TopicPartition, ProducePartitionResult]] = Completion()
    replica_manager.append_records(
        entries, acks=request.acks, timeout_ms=millis(request.timeout), respond=completion,
        internal_topics_allowed=ctx.client_id == ADMIN_CLIENT_ID,
        produce_version=ctx.api_version, transactional_id=request.transactional_id,
        add_to_transaction=ctx.api_version >= IMPLICIT_ADD_PARTITIONS_VERSION)
    if request.acks == 0:
        return None  # the log flusher task fsyncs what flush.messages asks for
    if not refused:
        return completion.then(lambda results: _response(ctx, request, results))
    return completion.then(lambda results: _response(ctx, request, refused | results))


def _may_write_transactions(ctx: RequestContext, transactional_id: str | None) -> bool:
    """Transactional records need a transactional id, and WRITE on it."""
    return transactional_id is not None and ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _failed(error: ErrorCode, message: str | None = None) -> ProducePartitionResult:
    result = ProducePartitionResult()
    result.fail(error, message)
    return result


def _response(ctx: RequestContext, request,
              results: dict[TopicPartition, ProducePartitionResult]) -> object:
    return ctx.respond(responses=[
        {"name": topic.name,
         "partition_responses": [
             _partition_response(data.index, results[TopicPartition(topic.name, data.index)])
             for data in topic.partition_data]}
        for topic in request.topic_data])


def _partition_response(index: int, result: ProducePartitionResult) -> dict:
    return {
        "index": index,
        "error_code": result.error,
        "base_offset": result.base_offset,
        "log_append_time": result.log_append_time,
        "log_start_offset": result.log_start_offset,
        "record_errors": [{"batch_index": batch_index, "batch_index_error_message": message}
                          for batch_index, message in result.record_errors],
        "error_message": result.error_message,
    }
