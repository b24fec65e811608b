"""Transactions on a cluster under faults, checked from every client's point of view.

Three broker processes and a real ZooKeeper. The checker: transactional producers commit
and abort at random across partitions of a replicated topic while the nemesis kills -9,
stops and pauses brokers — among them the leader of a producer's ``__transaction_state``
partition, its transaction coordinator — and some producers wait between their writes and
their EndTxn; then read_committed readers of three clients check every transaction (see
``txn_checker``). Then a producer killed -9 mid-transaction is aborted after its timeout,
or at once by its successor; and a consume-transform-produce loop, killed -9 and restarted
while brokers restart too, moves every record exactly once.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster.local import LocalCluster
from odradek.coordinator.transaction.log_records import TRANSACTION_STATE_TOPIC, partition_for
from txn_checker import (
    READERS,
    Transaction,
    TransactionalWriters,
    aborted_values_seen,
    check_reads,
    end_offsets,
    read_partitions,
)
from workload import SESSION_TIMEOUT_MS, ZooKeeperView, full_isr, leaders, wait_for

PROCESSES = Path(__file__).with_name("txn_processes.py")
PARTITIONS = 6
FAULTS = ["kill -9 coordinator", "pause", "kill -9 leader", "SIGTERM coordinator",
          "long pause coordinator"]
# A killed or frozen broker is replaced once its ZooKeeper session expires.
LEAVE_S = SESSION_TIMEOUT_MS / 1000 + 30
CONFIGS = {
    # Timed-out transactions are looked for every second, not every ten.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    # The consume-transform-produce loop's group: its first member is let in at once, and a
    # killed one is let go after the loop's short session (txn_processes).
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "3000",
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("transactions"), brokers=3, configs=CONFIGS,
                      zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS) as started:
        yield started


@pytest.fixture
def zookeeper(cluster: LocalCluster) -> Iterator[ZooKeeperView]:
    with ZooKeeperView(cluster.zookeeper.connect_string) as view:
        yield view


def create_topic(cluster: LocalCluster, name: str, partitions: int) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})]
                        )[name].result(30)
    wait_for(lambda: full_isr(admin, name), f"{name}'s ISRs are full")
    return admin


def coordinator_of(admin: AdminClient, transactional_id: str) -> int:
    topic = admin.list_topics(TRANSACTION_STATE_TOPIC, timeout=10).topics[TRANSACTION_STATE_TOPIC]
    return topic.partitions[partition_for(transactional_id, len(topic.partitions))].leader


def all_decided(bootstrap: str, topic: str, partitions: int) -> bool:
    """No transaction undecided: every last stable offset is at the high watermark."""
    return end_offsets(bootstrap, topic, partitions, "read_committed") == end_offsets(
        bootstrap, topic, partitions)


def test_no_anomaly_whatever_the_nemesis_does_to_transactions(cluster, zookeeper):
    topic = "txn-checker"
    admin = create_topic(cluster, topic, PARTITIONS)
    writers = TransactionalWriters(cluster.bootstrap_servers, topic, PARTITIONS).start()
    rng = random.Random(90)
    faults: dict[str, int] = defaultdict(int)
    try:
        wait_for(lambda: len(writers.transactions) >= 20, "the writers are under way")
        for kind in FAULTS:
            if kind.endswith("coordinator"):
                victim_id = coordinator_of(admin, rng.choice(writers.transactional_ids()))
            else:
                victim_id = rng.choice(sorted(set(leaders(admin, topic).values()) - {-1}))
            victim = cluster.brokers[victim_id]
            if kind.startswith("kill -9"):
                victim.kill()
                wait_for(lambda: zookeeper.replaced(victim_id, topic, TRANSACTION_STATE_TOPIC),
                         f"broker {victim_id} replaced after its kill", LEAVE_S)
                victim.start()
            elif kind.startswith("SIGTERM"):
                stopping = threading.Thread(target=victim.stop, daemon=True)
                stopping.start()
                stopping.join(90)
                victim.start()
            elif kind == "pause":  # shorter than its ZooKeeper session
                victim.pause()
                time.sleep(2)
                victim.resume()
            else:  # frozen until its session expired and it was replaced as leader
                victim.pause()
                wait_for(lambda: zookeeper.replaced(victim_id, topic, TRANSACTION_STATE_TOPIC),
                         f"broker {victim_id} replaced while paused", LEAVE_S)
                victim.resume()
            faults[kind] += 1
            wait_for(lambda: zookeeper.full_isr(topic, TRANSACTION_STATE_TOPIC),
                     f"every ISR full after {kind}")
            time.sleep(1)
    finally:
        writers.stop()
    # Transactions whose producer gave up are aborted by its successor or their timeout.
    wait_for(lambda: all_decided(cluster.bootstrap_servers, topic, PARTITIONS),
             "every transaction decided")
    ends = end_offsets(cluster.bootstrap_servers, topic, PARTITIONS)
    anomalies = {}
    for client in READERS:
        read = read_partitions(client, cluster.bootstrap_servers, topic, ends, "read_committed")
        anomalies[f"{client} read_committed"] = check_reads(writers.transactions, read,
                                                             committed_only=True)
    uncommitted = read_partitions("confluent-kafka", cluster.bootstrap_servers, topic, ends,
                                  "read_uncommitted")
    anomalies["confluent-kafka read_uncommitted"] = check_reads(
        writers.transactions, uncommitted, committed_only=False)
    outcomes = writers.outcomes()
    print(f"\ntransactions {outcomes}; faults {dict(faults)}; client errors "
          f"{dict(writers.errors)}; producers replaced {writers.producers_replaced}; "
          f"aborted values seen read_uncommitted {aborted_values_seen(writers.transactions, uncommitted)}")
    for reader, found in anomalies.items():
        print(f"  {reader}: {found.counts()}")
    assert sum(faults.values()) == len(FAULTS)
    assert outcomes.get("committed", 0) >= 50 and outcomes.get("aborted", 0) >= 10
    assert not any(anomalies.values()), {r: a for r, a in anomalies.items() if a}


def spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(PROCESSES), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def wait_for_line(process: subprocess.Popen, line: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = process.stdout.readline()
        if got.strip() == line:
            return
        if not got and process.poll() is not None:
            break
    raise AssertionError(f"the process never printed {line!r}")


def test_a_producer_killed_mid_transaction_is_aborted_by_its_timeout_or_its_successor(cluster):
    topic = "txn-killed"
    create_topic(cluster, topic, 1)
    bootstrap = cluster.bootstrap_servers
    hanging = spawn("hang", bootstrap, topic, "killed-1")
    wait_for_line(hanging, "written")
    hanging.kill()
    hanging.wait(10)
    # transaction.timeout.ms is 2 s: the coordinator aborts it, the stable offset moves.
    took = wait_for(lambda: all_decided(bootstrap, topic, 1), "the timeout aborts it", 30)
    assert took < 15
    hanging = spawn("hang", bootstrap, topic, "killed-2")
    wait_for_line(hanging, "written")
    hanging.kill()
    hanging.wait(10)
    successor = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                          "transactional.id": "killed-2"})
    started = time.monotonic()
    successor.init_transactions(30)  # fences the dead producer, aborting its transaction
    successor.begin_transaction()
    successor.produce(topic, value=b"successor", partition=0)
    successor.commit_transaction(30)
    assert time.monotonic() - started < 5  # not the timeout: InitProducerId aborted it
    read = read_partitions("confluent-kafka", bootstrap, topic, end_offsets(bootstrap, topic, 1),
                           "read_committed")
    assert read[0] == [b"successor"]


def test_consume_transform_produce_moves_every_record_once_through_kills(cluster, zookeeper):
    source, sink = "ctp-source", "ctp-sink"
    admin = create_topic(cluster, source, 3)
    create_topic(cluster, sink, 3)
    bootstrap = cluster.bootstrap_servers
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "enable.idempotence": True})
    values = [b"%d" % i for i in range(3000)]
    for i, value in enumerate(values):
        producer.produce(source, value=value, partition=i % 3)
    assert producer.flush(30) == 0
    rng = random.Random(17)
    loop = spawn("ctp", bootstrap, source, sink)
    kills = restarts = 0
    try:
        for round_ in range(2):  # the loop killed twice, the second time with a broker
            time.sleep(rng.uniform(1.0, 3.0))
            loop.kill()
            loop.wait(10)
            kills += 1
            if round_ % 2 == 1:
                victim_id = rng.choice(sorted(set(leaders(admin, sink).values()) - {-1}))
                victim = cluster.brokers[victim_id]
                victim.kill()
                wait_for(lambda: zookeeper.replaced(victim_id, sink),
                         f"broker {victim_id} replaced after its kill", LEAVE_S)
                victim.start()
                restarts += 1
                wait_for(lambda: full_isr(admin, sink), "the sink's ISRs are full")
            loop = spawn("ctp", bootstrap, source, sink)

        def group_done() -> bool:
            if loop.poll() is not None:  # it gave up on a transaction: start it again
                restart()
            consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                                 "group.id": f"{sink}-ctp"})
            try:
                committed = consumer.committed(
                    [confluent_kafka.TopicPartition(source, p) for p in range(3)], 10)
            finally:
                consumer.close()
            return sum(max(tp.offset, 0) for tp in committed) == len(values)

        def restart() -> None:
            nonlocal loop
            loop = spawn("ctp", bootstrap, source, sink)

        wait_for(group_done, "the loop moved every record", 120)
    finally:
        loop.kill()
        loop.wait(10)
    wait_for(lambda: all_decided(bootstrap, sink, 3), "every transaction decided")
    read = read_partitions("confluent-kafka", bootstrap, sink, end_offsets(bootstrap, sink, 3),
                           "read_committed")
    moved = sorted(v for values_ in read.values() for v in values_)
    print(f"\nconsume-transform-produce: {len(values)} records, loop killed {kills} times, "
          f"brokers restarted {restarts} times, {len(moved)} records read_committed")
    assert moved == sorted(b"out-" + v for v in values)


def test_the_checker_finds_each_class_of_anomaly():
    """The checker itself, on reads made up to hold one anomaly of each class."""
    committed = Transaction(0, 0, {0: [b"c0", b"c1"], 1: [b"c2"]}, "committed")
    aborted = Transaction(0, 1, {0: [b"a0"]}, "aborted")
    unknown = Transaction(1, 0, {0: [b"u0"], 1: [b"u1"]}, "unknown")
    later = Transaction(0, 2, {1: [b"l0", b"l1"]}, "committed")
    transactions = [committed, aborted, unknown, later]
    clean = {0: [b"c0", b"c1", b"u0"], 1: [b"c2", b"u1", b"l0", b"l1"]}
    assert not check_reads(transactions, clean, committed_only=True)
    broken = {0: [b"c0", b"a0", b"u0", b"c0"], 1: [b"c2", b"l1", b"l0"]}
    found = check_reads(transactions, broken, committed_only=True)
    assert found.lost == [b"c1"]
    assert found.aborted_read == [b"a0"]
    assert len(found.torn) == 2  # the committed one lacks c1, the unknown one u1
    assert found.duplicate == [b"c0"]
    assert found.out_of_order == ["partition 0: b'c0'", "partition 1: b'l0'"]
    uncommitted = {0: [b"c0", b"c1", b"a0"], 1: [b"c2", b"l0", b"l1"]}
    assert not check_reads(transactions, uncommitted, committed_only=False)
    assert aborted_values_seen(transactions, uncommitted) == 1
