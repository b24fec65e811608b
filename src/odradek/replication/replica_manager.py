"""``ReplicaManager``: the partitions this broker hosts, appends, reads and delayed fetches.

Handlers reach the logs only through here. A fetch that cannot be answered yet (fewer than
``min_bytes`` available) waits on :meth:`ReplicaManager.wait_for_appends`, which resolves as
soon as any of the watched partitions receives data, so a long poll answers when the data
arrives and not at its timeout (Kafka's DelayedFetch).

Producers idle for ``producer.id.expiration.ms`` are forgotten every
``producer.id.expiration.check.interval.ms`` (Kafka's scheduled task), checked at the first
append after each interval rather than on a timer: with no appends, nothing is added to
forget.

This class is not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.log import LogAppendInfo, LogConfig, LogManager
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.partition import Partition, PartitionError


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        log_manager: LogManager,
        clock: Callable[[], int],
        broker_config: Callable[[str], Any],
    ) -> None:
        """``broker_config`` gives a broker config's current value by name (they may change
        at runtime)."""
        self.node_id = node_id
        self.log_manager = log_manager
        self.clock = clock
        self._broker_config = broker_config
        self._partitions: dict[TopicPartition, Partition] = {}
        self._fetch_waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self._next_producer_expiration_check_ms = 0

    def get_partition(self, topic_partition: TopicPartition) -> Partition | None:
        return self._partitions.get(topic_partition)

    def leader_partition(self, topic_partition: TopicPartition,
                         current_leader_epoch: int = -1) -> Partition:
        """The partition led here, for a client request naming the leader epoch it knows
        (KIP-320); raises :class:`PartitionError` with the code to answer otherwise."""
        partition = self._partitions.get(topic_partition)
        if partition is None:
            raise PartitionError(ErrorCode.unknown_topic_or_partition)
        error = partition.check_leader_epoch(current_leader_epoch)
        if error is not ErrorCode.none:
            raise PartitionError(error)
        return partition

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
            partition.log.close()  # with its producer state snapshot
        self._wake(topic_partition)

    def append(self, partition: Partition, records: bytearray) -> LogAppendInfo:
        now_ms = self.clock()
        if now_ms >= self._next_producer_expiration_check_ms:
            self._remove_expired_producers(now_ms)
        info = partition.append_records_to_leader(records, now_ms)
        self._wake(partition.topic_partition)
        return info

    def _remove_expired_producers(self, now_ms: int) -> None:
        expiration_ms = self._broker_config("producer.id.expiration.ms")
        for partition in self._partitions.values():
            partition.producer_state.remove_expired_producers(now_ms, expiration_ms)
        self._next_producer_expiration_check_ms = (
            now_ms + self._broker_config("producer.id.expiration.check.interval.ms")
        )

    def shutdown(self) -> None:
        """A clean stop (Kafka's ``ReplicaManager.shutdown``): no partition is served here
        any more and a fetch still waiting is woken; the LogManager then closes the logs
        (their producer state snapshots, index files) and writes the checkpoints."""
        partitions, self._partitions = self._partitions, {}
        for topic_partition in partitions:
            self._wake(topic_partition)

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
