"""``ReplicaTopicStore``: a coordinator's internal topic through the replica manager:
``__consumer_offsets`` for the
:class:`~odradek.coordinator.group.metadata_manager.GroupMetadataManager`,
``__transaction_state`` for the transaction coordinator's state manager.

Appends go through ``ReplicaManager.append_records`` with acks=-1, the path of a produced
batch, so the records are on every in-sync replica before the coordinator answers: an
acknowledged commit is as durable as an acks=all record. The append's callback is called
with its outcome, at once on a single node or when the replicas have it, or with
REQUEST_TIMED_OUT after the timeout (``offsets.commit.timeout.ms`` for groups). Reads replay a partition led here
from its log start offset to its log end offset, batch by batch, telling records written
in a transaction (TxnOffsetCommit) and the transactions' markers apart. The log end, not
the high watermark: a leader just elected holds every record the old leader acknowledged
(it was in the ISR), but its high watermark moves past them only once its followers fetch
again, and a coordinator that loaded less would answer from a state older than what its
clients were told (Kafka's coordinator loader reads to the log end too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from odradek.coordinator.group.metadata_manager import (
    AppendCallback,
    KeyValue,
    StoredRecord,
    TransactionalProducer,
    TransactionalRecord,
    TransactionEnd,
)
from odradek.coordinator.group.offsets_topic import OFFSETS_TOPIC
from odradek.log.validator import AppendOrigin
from odradek.metadata.model import TopicMetadata
from odradek.protocol.control_records import read_end_txn_marker
from odradek.protocol.records import Record, build_batch, iter_batches
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.delayed_fetch import IsolationLevel
from odradek.replication.partition import Partition
from odradek.replication.replica_manager import ReplicaManager

# Bytes read at a time while loading a partition (whole batches; a larger one is read whole).
LOAD_READ_BYTES = 1024 * 1024


class ReplicaTopicStore:
    def __init__(self, replica_manager: ReplicaManager,
                 topic: Callable[[str], TopicMetadata | None],
                 append_timeout_ms: Callable[[], int], *, topic_name: str = OFFSETS_TOPIC
                 ) -> None:
        """``topic`` looks a topic up in the metadata store; ``append_timeout_ms`` gives how
        long an append may wait for the in-sync replicas."""
        self._replica_manager = replica_manager
        self._topic = topic
        self._append_timeout_ms = append_timeout_ms
        self.topic_name = topic_name

    def partition_count(self) -> int | None:
        topic = self._topic(self.topic_name)
        return len(topic.partitions) if topic is not None else None

    def hosted_partitions(self) -> list[int]:
        return [p.topic_partition.partition for p in self._replica_manager.partitions()
                if p.topic_partition.topic == self.topic_name and p.is_leader]

    def _partition(self, partition: int) -> Partition | None:
        return self._replica_manager.get_partition(TopicPartition(self.topic_name, partition))

    def read(self, partition: int) -> Iterator[StoredRecord]:
        replica = self._partition(partition)
        if replica is None:
            return
        offset = replica.log_start_offset
        while offset < replica.log_end_offset:
            info = replica.read_records(offset, LOAD_READ_BYTES,
                                        isolation_level=IsolationLevel.READ_UNCOMMITTED,
                                        from_follower=True, min_one_batch=True)
            batches = list(iter_batches(info.records))
            if not batches:
                return
            for batch in batches:
                if batch.next_offset <= offset:
                    continue
                if batch.is_control_batch:
                    marker = read_end_txn_marker(batch)
                    if marker is not None:
                        yield TransactionEnd(batch.producer_id, marker.commit)
                    continue
                for record in batch.records():
                    if record.offset < offset:
                        continue
                    if batch.is_transactional:
                        yield TransactionalRecord(batch.producer_id, record.key, record.value)
                    else:
                        yield record.key, record.value
            offset = batches[-1].next_offset

    def append(self, partition: int, records: Sequence[KeyValue],
               callback: AppendCallback, producer: TransactionalProducer | None = None
               ) -> None:
        tp = TopicPartition(self.topic_name, partition)
        now_ms = self._replica_manager.clock()
        batch = build_batch(
            [Record(i, now_ms, key, value) for i, (key, value) in enumerate(records)],
            **({} if producer is None else {
                "producer_id": producer.producer_id, "producer_epoch": producer.producer_epoch,
                "is_transactional": True}))
        self._replica_manager.append_records(
            {tp: bytearray(batch)}, acks=-1,
            timeout_ms=self._append_timeout_ms(),
            origin=AppendOrigin.COORDINATOR,
            respond=lambda results: callback(results[tp].error),
            transactional_id=None if producer is None else producer.transactional_id,
            add_to_transaction=producer is not None and producer.add)
