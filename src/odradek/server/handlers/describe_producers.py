"""DescribeProducers (key 61): the producers a partition's leader knows (KIP-664), for
``odradek transactions`` and Kafka's ``kafka-transactions.sh describe-producers``.

Each active producer with its epoch, last sequence and timestamp, the coordinator epoch of
its last marker, and where its ongoing transaction starts (-1 for none): a transaction
left hanging shows here, and its start offset holds back the partition's last stable
offset.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.partition import PartitionError
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.handlers import RequestContext, handles


@handles(ApiKey.DESCRIBE_PRODUCERS)
def handle_describe_producers(ctx: RequestContext, request,
                              replica_manager: ReplicaManager) -> object:
    return ctx.respond(topics=[
        {"name": topic.name,
         "partitions": [_partition(replica_manager, TopicPartition(topic.name, index))
                        for index in topic.partition_indexes]}
        for topic in request.topics])


def _partition(replica_manager: ReplicaManager, tp: TopicPartition) -> dict:
    try:
        producers = replica_manager.active_producers(tp)
    except PartitionError as exc:
        return {"partition_index": tp.partition, "error_code": exc.error_code,
                "error_message": None, "active_producers": []}
    return {"partition_index": tp.partition, "error_code": ErrorCode.none,
            "error_message": None, "active_producers": [
                {"producer_id": entry.producer_id, "producer_epoch": entry.producer_epoch,
                 "last_sequence": entry.last_seq, "last_timestamp": entry.last_timestamp,
                 "coordinator_epoch": entry.coordinator_epoch,
                 "current_txn_start_offset": (-1 if entry.current_txn_first_offset is None
                                              else entry.current_txn_first_offset)}
                for entry in producers]}
