"""``ReplicaOffsetsStore``: ``__consumer_offsets`` through the replica manager, for the
:class:`~odradek.coordinator.group.metadata_manager.GroupMetadataManager`.

Appends go through ``ReplicaManager.append``, the path of a produced batch, so the records
are in the log (and, in a cluster, will be on the in-sync replicas) before the coordinator
answers: an acknowledged commit is as durable as an acks=all record. The append's callback
is called with its outcome. Reads replay a partition from its log start offset to its high
watermark, batch by batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.metadata_manager import AppendCallback, KeyValue
from odradek.coordinator.group.offsets_topic import OFFSETS_TOPIC
from odradek.log import LogError
from odradek.metadata.model import TopicMetadata
from odradek.protocol.records import Record, RecordsError, build_batch, iter_batches
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.partition import Partition
from odradek.replication.replica_manager import ReplicaManager

# Bytes read at a time while loading a partition (whole batches; a larger one is read whole).
LOAD_READ_BYTES = 1024 * 1024


class ReplicaOffsetsStore:
    def __init__(self, replica_manager: ReplicaManager,
                 topic: Callable[[str], TopicMetadata | None]) -> None:
        """``topic`` looks a topic up in the metadata store."""
        self._replica_manager = replica_manager
        self._topic = topic

    def partition_count(self) -> int | None:
        topic = self._topic(OFFSETS_TOPIC)
        return len(topic.partitions) if topic is not None else None

    def hosted_partitions(self) -> list[int]:
        return [p.topic_partition.partition for p in self._replica_manager.partitions()
                if p.topic_partition.topic == OFFSETS_TOPIC]

    def _partition(self, partition: int) -> Partition | None:
        return self._replica_manager.get_partition(TopicPartition(OFFSETS_TOPIC, partition))

    def read(self, partition: int) -> Iterator[KeyValue]:
        replica = self._partition(partition)
        if replica is None:
            return
        offset = replica.log_start_offset
        while offset < replica.high_watermark:
            info = replica.read_records(offset, LOAD_READ_BYTES, min_one_batch=True)
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
        replica = self._partition(partition)
        if replica is None:
            callback(ErrorCode.unknown_topic_or_partition)
            return
        now_ms = self._replica_manager.clock()
        batch = build_batch([Record(i, now_ms, key, value)
                             for i, (key, value) in enumerate(records)])
        try:
            self._replica_manager.append(replica, bytearray(batch))
        except (LogError, RecordsError) as e:
            error = e.error_code
        except OSError:
            error = ErrorCode.kafka_storage_error
        else:
            error = ErrorCode.none
        callback(error)
