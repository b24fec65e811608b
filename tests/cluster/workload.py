"""What the cluster fault tests run while faults happen, and how they wait and check.

``Workload`` is an idempotent acks=all producer of unique values that records what it was
told; ``GroupReader`` a consumer in a group that records every offset it committed;
``check_topic`` reads every replica of every partition from the brokers' files and checks
the workload's acknowledged values against them (``checker``); ``ZooKeeperView`` tells when
a fault has been felt or healed.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from checker import CheckResult, check_partition, read_replicas
from odradek.metadata import zk_layout as layout

# A killed broker leaves the cluster when its ZooKeeper session expires: short sessions
# keep failover tests quick, long enough that a loaded machine never expires a live one.
SESSION_TIMEOUT_MS = 6000
PRODUCE_RATE = 500  # values per second: enough to be mid-write at every fault
CONVERGE_S = 90  # every wait for the cluster to settle ends by then


class Workload:
    """One idempotent acks=all producer of unique values, and what it was told."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 120_000, "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            # The idempotence state changes (drains, epoch bumps) on stderr, which pytest
            # shows when a check fails: what the producer did about each error.
            "debug": "eos"})
        self.attempted: set[bytes] = set()
        self.acknowledged: dict[int, set[bytes]] = defaultdict(set)
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error, message) -> None:
        if error is None:
            self.acknowledged[message.partition()].add(message.value())
        else:
            self.failed.append(str(error))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            value = f"value-{i}".encode()
            try:
                self.producer.produce(self.topic, value, on_delivery=self._delivered)
            except BufferError:
                self.producer.poll(0.1)
                continue
            self.attempted.add(value)
            i += 1
            self.producer.poll(0)
            time.sleep(1 / PRODUCE_RATE)

    def start(self) -> Workload:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(10)
        return self.producer.flush(CONVERGE_S)


class GroupReader:
    """A consumer in a group, committing as it goes; records every offset a commit was
    acknowledged for, in order. Commits are synchronous, so the order is the broker's: an
    offset lower than one acknowledged before means the group lost a commit (a coordinator
    failing over to a replica without it) and started reading again from further back."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.committed: dict[int, list[int]] = defaultdict(list)
        self.consumed = 0
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"{topic}-readers",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 10_000, "log_level": 3,
            # A commit to a coordinator frozen by SIGSTOP gives up after this, instead of
            # librdkafka's default minute, so the reader keeps reading.
            "socket.timeout.ms": 10_000})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _commit(self) -> None:
        try:
            partitions = self._consumer.commit(asynchronous=False)
        except KafkaException:
            return  # during a failover or a rebalance: the next commit carries it
        for tp in partitions or ():
            if tp.error is None and tp.offset >= 0:
                self.committed[tp.partition].append(tp.offset)

    def _run(self) -> None:
        self._consumer.subscribe([self.topic])
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is None or message.error():
                continue
            self.consumed += 1
            if self.consumed % 200 == 0:
                self._commit()
        self._consumer.close()

    def caught_up(self, values: int) -> bool:
        """Whether it has read at least ``values`` records (some twice, after rebalances)."""
        return self.consumed >= values

    def start(self) -> GroupReader:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def leaders(admin: AdminClient, topic_name: str) -> dict[int, int]:
    topic = admin.list_topics(topic_name, timeout=10).topics[topic_name]
    return {p: m.leader for p, m in topic.partitions.items()}


def wait_for(condition, what: str, timeout_s: float = CONVERGE_S) -> float:
    """Waits for ``condition()``; returns how long it took."""
    started = time.monotonic()
    while True:
        try:
            if condition():
                return time.monotonic() - started
        except Exception:  # noqa: BLE001 - a broker restarting answers with errors
            pass
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.1)


def full_isr(admin: AdminClient, topic_name: str) -> bool:
    topic = admin.list_topics(topic_name, timeout=5).topics[topic_name]
    return all(len(m.isrs) == 3 and m.leader >= 0 for m in topic.partitions.values())


class ZooKeeperView:
    """The cluster as ZooKeeper holds it: the live brokers' registrations, and each
    partition's leader and ISR as the controller and the leaders last wrote them.

    Every broker answers Metadata from its own watches on ZooKeeper, so a client sees the
    same within a round trip, but not from a broker that was frozen while its session
    expired: until it has read everything again, it answers with what it knew before, full
    ISRs and leaderships it no longer has. Waits for a fault to be felt, or healed, ask
    ZooKeeper instead."""

    def __init__(self, connect_string: str) -> None:
        # kazoo's default reconnection backs off towards an hour; a ZooKeeper restarted by
        # a test is back within seconds.
        self._client = KazooClient(connect_string, connection_retry={
            "max_tries": -1, "delay": 0.1, "max_delay": 0.5})

    def __enter__(self) -> ZooKeeperView:
        self._client.start(timeout=30)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._client.stop()
        self._client.close()

    def live_brokers(self) -> set[int]:
        return {int(child) for child in self._client.get_children(layout.BROKER_IDS)}

    def partitions(self, topic: str) -> list[layout.LeaderAndIsr]:
        return [layout.decode_leader_and_isr(
                    self._client.get(layout.partition_state_path(topic, int(partition)))[0])
                for partition in self._client.get_children(layout.partitions_path(topic))]

    def full_isr(self, *topics: str) -> bool:
        return all(len(state.isr) == 3 and state.leader >= 0
                   for topic in topics for state in self.partitions(topic))

    def replaced(self, node_id: int, *topics: str) -> bool:
        """Whether the cluster has given up on broker ``node_id``: its session ended, taking
        its registration, and it leads no partition of ``topics``."""
        return node_id not in self.live_brokers() and all(
            state.leader != node_id for topic in topics for state in self.partitions(topic))

    def cut_off(self, node_id: int, topic: str) -> bool:
        """Whether every ISR of ``topic`` shows broker ``node_id`` cut off from the others:
        the partitions it leads have only it in sync, the others have it out of sync."""
        return all(state.isr == (node_id,) if state.leader == node_id
                   else node_id not in state.isr for state in self.partitions(topic))


def check_topic(bootstrap: str, data_dirs: dict[int, Path], topic: str, partitions: int,
                workload: Workload) -> CheckResult:
    """Checks every partition of ``topic`` on every replica against what ``workload`` was
    told, below each partition's high watermark as its leader reports it."""
    result = CheckResult()
    watermarks = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-checker"})
    try:
        for partition in range(partitions):
            _, high_watermark = watermarks.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=10)
            replicas = read_replicas(data_dirs, topic, partition)
            assert len(replicas) == len(data_dirs), f"{topic}-{partition} is not on every broker"
            check_partition(replicas, high_watermark, workload.acknowledged[partition],
                            workload.attempted, result)
    finally:
        watermarks.close()
    return result
