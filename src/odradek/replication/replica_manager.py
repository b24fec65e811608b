"""``ReplicaManager``: the partitions this broker hosts, appends, reads and delayed fetches.

Handlers reach the logs only through here. A fetch that cannot be answered yet (fewer than
``min_bytes`` available) waits on :meth:`ReplicaManager.wait_for_appends`, which resolves as
soon as any of the watched partitions receives data, so a long poll answers when the data
arrives and not at its timeout (Kafka's DelayedFetch).

This class is not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from odradek.log import LogConfig, LogManager
from odradek.replication.partition import Partition, TopicPartition


class ReplicaManager:
    def __init__(self, node_id: int, log_manager: LogManager, clock: Callable[[], int]) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.clock = clock
        self._partitions: dict[TopicPartition, Partition] = {}
        self._fetch_waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    def get_partition(self, topic_partition: TopicPartition) -> Partition | None:
        return self._partitions.get(topic_partition)

    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    def make_leader(
        self,
        topic_partition: TopicPartition,
        *,
        leader_epoch: int,
        isr: tuple[int, ...],
        log_config: LogConfig,
        topic_config: dict[str, Any],
    ) -> Partition:
        log = self.log_manager.get_or_create(
            topic_partition.topic, topic_partition.partition, log_config
        )
        partition = Partition(
            topic_partition,
            log,
            leader_id=self.node_id,
            leader_epoch=leader_epoch,
            isr=isr,
            topic_config=topic_config,
        )
        self._partitions[topic_partition] = partition
        return partition

    def update_config(self, topic_partition: TopicPartition, log_config: LogConfig, topic_config: dict[str, Any]) -> None:
        partition = self._partitions.get(topic_partition)
        if partition is not None:
            partition.log.update_config(log_config)
            partition.topic_config = topic_config

    def remove_partition(self, topic_partition: TopicPartition, *, delete: bool) -> None:
        partition = self._partitions.pop(topic_partition, None)
        if partition is None:
            return
        if delete:
            self.log_manager.delete_partition(topic_partition.topic, topic_partition.partition)
        else:
            partition.log.close()
        self._wake(topic_partition)

    def append(self, partition: Partition, records: bytearray):
        info = partition.append_records_to_leader(records, self.clock())
        self._wake(partition.topic_partition)
        return info

    # -- delayed fetch -----------------------------------------------------------------

    def wait_for_appends(self, topic_partitions: Iterable[TopicPartition]) -> asyncio.Future[None]:
        """A future resolved at the next append to any of ``topic_partitions``.

        The caller must pass it to :meth:`stop_waiting` when done, timed out or not.
        """
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for tp in topic_partitions:
            self._fetch_waiters.setdefault(tp, set()).add(future)
        return future

    def stop_waiting(self, topic_partitions: Iterable[TopicPartition], future: asyncio.Future[None]) -> None:
        for tp in topic_partitions:
            waiters = self._fetch_waiters.get(tp)
            if waiters is not None:
                waiters.discard(future)
                if not waiters:
                    del self._fetch_waiters[tp]

    def _wake(self, topic_partition: TopicPartition) -> None:
        waiters = self._fetch_waiters.pop(topic_partition, None)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)
