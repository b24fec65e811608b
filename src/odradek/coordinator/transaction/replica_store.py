"""``__transaction_state`` through the replica manager, for the
:class:`~odradek.coordinator.transaction.state_manager.TransactionStateManager`: the group
coordinator's :class:`~odradek.coordinator.group.storage.ReplicaTopicStore` over the other
topic, with each partition led here named with its leader epoch — the coordinator epoch
its markers carry, so that a partition fences the markers of a coordinator it outlived.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.coordinator.group.storage import ReplicaTopicStore
from odradek.coordinator.transaction.coordinator import (
    MarkerWriter,
    ProducerIdSource,
    TransactionCoordinator,
)
from odradek.coordinator.transaction.state_manager import TransactionStateManager
from odradek.coordinator.transaction.log_records import TRANSACTION_STATE_TOPIC
from odradek.metadata.model import TopicMetadata
from odradek.replication.replica_manager import ReplicaManager

# Kafka appends to __transaction_state with the broker's request.timeout.ms.
APPEND_TIMEOUT_MS = 30_000


class ReplicaTransactionLogStore(ReplicaTopicStore):
    def __init__(self, replica_manager: ReplicaManager,
                 topic: Callable[[str], TopicMetadata | None]) -> None:
        super().__init__(replica_manager, topic, lambda: APPEND_TIMEOUT_MS,
                         topic_name=TRANSACTION_STATE_TOPIC)

    def hosted_partitions(self) -> list[tuple[int, int]]:  # type: ignore[override]
        return [(p.topic_partition.partition, p.leader_epoch)
                for p in self._replica_manager.partitions()
                if p.topic_partition.topic == self.topic_name and p.is_leader]


def transaction_coordinator_over(replica_manager: ReplicaManager,
                                 topic: Callable[[str], TopicMetadata | None],
                                 config: Callable[[str], Any], clock: Callable[[], int],
                                 generate_producer_id: ProducerIdSource,
                                 marker_writer: MarkerWriter) -> TransactionCoordinator:
    """The broker's transaction coordinator, its state kept in ``__transaction_state``."""
    return TransactionCoordinator(
        TransactionStateManager(ReplicaTransactionLogStore(replica_manager, topic), config,
                                clock),
        config, clock, generate_producer_id, marker_writer)
