"""``ReplicaOffsetsStore``: ``__consumer_offsets`` through the replica manager, for the
:class:`~odradek.coordinator.group.metadata_manager.GroupMetadataManager`.

Appends go through ``ReplicaManager.append_records`` with acks=-1, the path of a produced
batch, so the records are on every in-sync replica before the coordinator answers: an
acknowledged commit is as durable as an acks=all record. The append's callback is called
with its outcome, at once on a single node or when the replicas have it, or with
REQUEST_TIMED_OUT after ``offsets.commit.timeout.ms``. Reads replay a partition led here
from its log start offset to its high watermark, batch by batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from odradek.coordinator.group.metadata_manager import AppendCallback, KeyValue
from odradek.coordinator.group.offsets_topic import OFFSETS_TOPIC
from odradek.log.validator import AppendOrigin
from odradek.metadata.model import TopicMetadata
from odradek.protocol.records import Record, build_batch, iter_batches
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.delayed_fetch import IsolationLevel
from odradek.replication.partition import Partition
from odradek.replication.replica_manager import ReplicaManager

# Bytes read at a time while loading a partition (whole batches; a larger one is read whole).
LOAD_READ_BYTES = 1024 * 1024


class ReplicaOffsetsStore:
    def __init__(self, replica_manager: ReplicaManager,
                 topic: Callable[[str], TopicMetadata | None],
                 config: Callable[[str], Any]) -> None:
        """``topic`` looks a topic up in the metadata store, ``config`` a broker config."""
        self._replica_manager = replica_manager
        self._topic = topic
        self._config = config

    def partition_count(self) -> int | None:
        topic = self._topic(OFFSETS_TOPIC)
        return len(topic.partitions) if topic is not None else None

    def hosted_partitions(self) -> list[int]:
        return [p.topic_partition.partition for p in self._replica_manager.partitions()
                if p.topic_partition.topic == OFFSETS_TOPIC and p.is_leader]

    def _partition(self, partition: int) -> Partition | None:
        return self._replica_manager.get_partition(TopicPartition(OFFSETS_TOPIC, partition))

    def read(self, partition: int) -> Iterator[KeyValue]:
        replica = self._partition(partition)
        if replica is None:
            return
        offset = replica.log_start_offset
        while offset < replica.high_watermark:
            info = replica.read_records(offset, LOAD_READ_BYTES,
                                        isolation_level=IsolationLevel.READ_UNCOMMITTED,
                                        from_follower=False, min_one_batch=True)
            batches = list(iter_batches(info.records))
            if not batches:
                return
            for batch in batches:
                if batch.is_control_batch:
                    continue
                for record in batch.records():
                    if record.offset >= offset:
                        yield record.key, record.value
            offset = batches[-1].next_offset

    def append(self, partition: int, records: Sequence[KeyValue],
               callback: AppendCallback) -> None:
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        batch = build_batch([Record(i, self._replica_manager.clock(), key, value)
                             for i, (key, value) in enumerate(records)])
        self._replica_manager.append_records(
            {tp: bytearray(batch)}, acks=-1,
            timeout_ms=self._config("offsets.commit.timeout.ms"),
            origin=AppendOrigin.COORDINATOR,
            respond=lambda results: callback(results[tp].error))
