"""Failover with nothing acknowledged lost, checked the way Jepsen checks a log.

Idempotent producers write unique values with acks=all to a topic with replication factor 3
and ``min.insync.replicas=2`` while a consumer group reads and commits, and a nemesis
kills brokers with SIGKILL (the controller among them), stops them with SIGTERM (a
controlled shutdown) and starts them again, for a bounded time. Afterwards, with every
broker back in every ISR, the checker reads each partition from each replica's files:
every acknowledged value must be there exactly once, the replicas must hold the same
batches byte for byte below the high watermark, and the group's committed offsets must
never have gone backwards.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from checker import CheckResult, check_partition, read_replicas
from conftest import SESSION_TIMEOUT_MS

TOPIC = "failover"
PARTITIONS = 6
PRODUCE_RATE = 500  # values per second: enough to be mid-write at every fault
NEMESIS_ROUNDS = 4
CONVERGE_S = 90  # every wait for the cluster to settle ends by then


class Workload:
    """One idempotent acks=all producer of unique values, and what it was told."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 120_000, "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000, "log_level": 3})
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
                self.producer.produce(TOPIC, value, on_delivery=self._delivered)
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
    """A consumer in a group, committing as it goes; records every committed offset."""

    def __init__(self, bootstrap: str) -> None:
        self.committed: dict[int, list[int]] = defaultdict(list)
        self.consumed = 0
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": "failover-readers",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 10_000, "on_commit": self._on_commit, "log_level": 3})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_commit(self, error, partitions) -> None:
        if error is None:
            for tp in partitions:
                if tp.error is None and tp.offset >= 0:
                    self.committed[tp.partition].append(tp.offset)

    def _run(self) -> None:
        self._consumer.subscribe([TOPIC])
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is None or message.error():
                continue
            self.consumed += 1
            if self.consumed % 200 == 0:
                self._consumer.commit(asynchronous=True)
        self._consumer.close()

    def start(self) -> GroupReader:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def leaders(admin: AdminClient) -> dict[int, int]:
    topic = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
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


def full_isr(admin: AdminClient) -> bool:
    topic = admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
    return all(len(m.isrs) == 3 and m.leader >= 0 for m in topic.partitions.values())


def test_nothing_acknowledged_is_lost_across_kills_and_controlled_shutdowns(local_cluster):
    cluster = local_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    created = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3,
                                            config={"min.insync.replicas": "2"})])
    created[TOPIC].result(30)
    wait_for(lambda: full_isr(admin), "the topic's ISRs are full")
    rng = random.Random(2026)
    workload = Workload(cluster.bootstrap_servers).start()
    reader = GroupReader(cluster.bootstrap_servers).start()
    faults: dict[str, int] = defaultdict(int)
    failovers: dict[str, list[float]] = defaultdict(list)
    try:
        time.sleep(2)
        for round_ in range(NEMESIS_ROUNDS):
            kind = "kill -9" if round_ % 2 == 0 else "SIGTERM"
            led = leaders(admin)
            victim_id = rng.choice(sorted(set(led.values())))
            victim = cluster.brokers[victim_id]
            survivor = next(b for i, b in cluster.brokers.items() if i != victim_id)
            survivor_admin = AdminClient({"bootstrap.servers": survivor.bootstrap})
            moved = [p for p, leader in led.items() if leader == victim_id]
            if kind == "kill -9":
                victim.kill()
            else:
                threading.Thread(target=victim.stop, daemon=True).start()
            faults[kind] += 1
            failovers[kind].append(wait_for(
                lambda: all(leaders(survivor_admin)[p] not in (victim_id, -1) for p in moved),
                f"partitions {moved} led elsewhere after {kind} of broker {victim_id}",
                SESSION_TIMEOUT_MS / 1000 + 30))
            wait_for(lambda: not victim.running, f"broker {victim_id} stopped", 60)
            time.sleep(1)
            victim.start()
            faults["restart"] += 1
            wait_for(lambda: full_isr(admin), f"broker {victim_id} back in every ISR")
        time.sleep(2)
    finally:
        remaining = workload.stop()
        reader.stop()
    assert remaining == 0, f"{remaining} values never answered"
    wait_for(lambda: full_isr(admin), "every ISR full at the end")

    result = CheckResult()
    watermarks = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                           "group.id": "failover-checker"})
    data_dirs = {node_id: broker.data_dir for node_id, broker in cluster.brokers.items()}
    try:
        for partition in range(PARTITIONS):
            _, high_watermark = watermarks.get_watermark_offsets(
                TopicPartition(TOPIC, partition), timeout=10)
            replicas = read_replicas(data_dirs, TOPIC, partition)
            assert len(replicas) == 3
            check_partition(replicas, high_watermark, workload.acknowledged[partition],
                            workload.attempted, result)
    finally:
        watermarks.close()
    print(f"\nfaults {dict(faults)}; failover seconds {dict(failovers)}; {result}; "
          f"producer errors {len(workload.failed)}; consumed {reader.consumed}")
    assert result.acknowledged > 1000
    assert result.ok, str(result)
    for partition, offsets in reader.committed.items():
        assert offsets == sorted(offsets), f"partition {partition} committed offsets went back"
    assert sum(len(offsets) for offsets in reader.committed.values()) > 0
    # Idempotent producers retry through failovers until message.timeout.ms: every value
    # sent was acknowledged, none failed.
    assert workload.failed == []
    assert sum(map(len, workload.acknowledged.values())) == len(workload.attempted)
