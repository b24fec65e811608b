"""DescribeProducers (key 61): the producers a partition's leader knows (KIP-664), for
``odradek transactions`` and Kafka's ``kafka-transactions.sh describe-producers``.

Each active producer with its epoch, last sequence and timestamp, the coordinator epoch of
its last marker, and where its ongoing transaction starts (-1 for none): a transaction
left hanging shows here, and its start offset holds back the partition's last stable
offset.

Each topic is checked first, as Kafka's ``KafkaApis.handleDescribeProducersRequest``: an
invalid name is INVALID_TOPIC_EXCEPTION, then READ on the topic is needed, else every
partition asked for is answered TOPIC_AUTHORIZATION_FAILED whether or not it exists.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.metadata.model import InvalidTopicError, validate_topic_name
from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.partition import PartitionError
from odradek.replication.replica_manager import ReplicaManager
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import AUTHORIZATION_FAILED_MESSAGES


@handles(ApiKey.DESCRIBE_PRODUCERS)
def handle_describe_producers(ctx: RequestContext, request,
                              replica_manager: ReplicaManager) -> object:
    topics = []
    for topic in request.topics:
        refused = _topic_error(ctx, topic.name)
        topics.append({"name": topic.name, "partitions": [
            _partition(replica_manager, TopicPartition(topic.name, index)) if refused is None
            else _partition_error(index, *refused)
            for index in topic.partition_indexes]})
    return ctx.respond(topics=topics)


def _topic_error(ctx: RequestContext, name: str) -> tuple[ErrorCode, str] | None:
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        return ErrorCode.invalid_topic_exception, str(exc)
    if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
        error = ErrorCode.topic_authorization_failed
        return error, AUTHORIZATION_FAILED_MESSAGES[error]
    return None


def _partition_error(index: int, error: ErrorCode, message: str | None) -> dict:
    return {"partition_index": index, "error_code": error, "error_message": message,
            "active_producers": []}


def _partition(replica_manager: ReplicaManager, tp: TopicPartition) -> dict:
    try:
        producers = replica_manager.active_producers(tp)
    except PartitionError as exc:
        return _partition_error(tp.partition, exc.error_code, None)
    return {"partition_index": tp.partition, "error_code": ErrorCode.none,
            "error_message": None, "active_producers": [
                {"producer_id": entry.producer_id, "producer_epoch": entry.producer_epoch,
                 "last_sequence": entry.last_seq, "last_timestamp": entry.last_timestamp,
                 "coordinator_epoch": entry.coordinator_epoch,
                 "current_txn_start_offset": (-1 if entry.current_txn_first_offset is None
                                              else entry.current_txn_first_offset)}
                for entry in producers]}
