"""``odradek topics reassign`` and ``odradek topics reassignments`` (KIP-455), run as a user
runs them, against three broker processes: a partition moves to another broker with its
records, and what the controller refuses is one readable error line.

The topics are created with a replication factor and the placement the controller chose is
read back (a cluster refuses explicit replica assignments at creation), so each test names
its brokers from that placement.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, PartitionMetadata

from workload import wait_for
from odradek.cluster.local import LocalCluster

# Generous: a command that hangs fails its test instead of the whole run.
COMMAND_TIMEOUT_S = 60
# Metadata, topic creation and produce on loopback take milliseconds; this is for a loaded
# machine.
CLIENT_TIMEOUT_S = 15.0
METADATA_PROPAGATION_S = 5
# A follower copies a few kilobytes and joins the ISR within a second or two.
REASSIGN_TIMEOUT_S = 30
# The removed replica deletes its copy as soon as it learns it is no longer a replica.
OLD_REPLICA_DELETED_WITHIN_S = 15
RECORDS = [f"record-{i:03d}".encode() for i in range(100)]


def odradek(cluster: LocalCluster, *args: str,
            bootstrap_servers: str | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "ODRADEK_BOOTSTRAP_SERVERS"}
    return subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", "topics", *args,
         "-b", bootstrap_servers or cluster.bootstrap_servers],
        capture_output=True, text=True, env=environment, timeout=COMMAND_TIMEOUT_S)


def ok(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0, (result.args, result.stdout, result.stderr)
    return result.stdout.splitlines()


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0, (result.args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ")
    return line


@pytest.fixture
def admin(local_cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": local_cluster.bootstrap_servers, "log_level": 2})


def partition_0(admin: AdminClient, topic: str) -> PartitionMetadata | None:
    topic_metadata = admin.list_topics(timeout=CLIENT_TIMEOUT_S).topics.get(topic)
    return topic_metadata and topic_metadata.partitions.get(0)


def assert_replicas(admin: AdminClient, topic: str, expected: list[int]) -> None:
    # Each broker learns the controller's decisions on its own, so the one answering
    # Metadata may be a moment behind.
    wait_for(lambda: (partition := partition_0(admin, topic)) is not None
               and partition.replicas == expected, f"{topic}-0 on replicas {expected}", METADATA_PROPAGATION_S)


def create_in_sync(admin: AdminClient, topic: str, replication_factor: int) -> list[int]:
    """Creates ``topic`` with one partition; returns its replicas once all are in sync."""
    admin.create_topics([NewTopic(topic, 1, replication_factor)])[topic].result(CLIENT_TIMEOUT_S)
    created: list[int] = []

    def in_sync() -> bool:
        partition = partition_0(admin, topic)
        if partition is None or len(partition.replicas) != replication_factor:
            return False
        created[:] = partition.replicas
        return sorted(partition.isrs) == sorted(partition.replicas)

    wait_for(in_sync, f"{topic}'s replicas in sync", CLIENT_TIMEOUT_S)
    return created


def produce(cluster: LocalCluster, topic: str) -> None:
    errors = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "compression.type": "none", "log_level": 2})
    for value in RECORDS:
        producer.produce(topic, value, partition=0,
                         on_delivery=lambda error, _: error and errors.append(error))
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    assert errors == []


def consume(cluster: LocalCluster, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": topic,
                         "enable.auto.commit": False, "log_level": 2})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    try:
        while len(values) < len(RECORDS) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def partition_dirs(data_dir: Path, topic: str) -> list[str]:
    """The partition's directory, also while it is being deleted (``<dir>.<id>-delete``)."""
    return [child.name for child in data_dir.iterdir()
            if child.name == f"{topic}-0" or child.name.startswith(f"{topic}-0.")]


def test_a_reassigned_partition_moves_with_its_records_and_leaves_its_old_broker(
        local_cluster, admin):
    old, kept = create_in_sync(admin, "moved", replication_factor=2)
    [new] = set(local_cluster.brokers) - {old, kept}
    produce(local_cluster, "moved")

    lines = ok(odradek(local_cluster, "reassign", "moved", "--replicas", f"0={kept},{new}",
                       "--timeout", str(REASSIGN_TIMEOUT_S)))

    assert lines == [f"Reassigning topic moved partition 0 to replicas {kept},{new}.",
                     f"Topic moved partition 0: replicas {kept},{new}."]
    assert_replicas(admin, "moved", [kept, new])
    new_dir = local_cluster.brokers[new].data_dir / "moved-0"
    segments = b"".join(path.read_bytes() for path in new_dir.glob("*.log"))
    assert all(value in segments for value in RECORDS)
    assert consume(local_cluster, "moved") == RECORDS
    wait_for(lambda: not partition_dirs(local_cluster.brokers[old].data_dir, "moved"), f"broker {old}'s copy of moved-0 deleted", OLD_REPLICA_DELETED_WITHIN_S)
    listed = odradek(local_cluster, "reassignments")
    assert ok(listed) == []
    assert listed.stderr.strip() == "no reassignments in progress"


def test_a_reassignment_in_progress_is_listed_and_cancelled_back_to_its_replicas(
        local_cluster, admin):
    [replica] = create_in_sync(admin, "cancelled", replication_factor=1)
    controller = admin.list_topics(timeout=CLIENT_TIMEOUT_S).controller_id
    # A paused broker keeps its ZooKeeper session, so it may be added, but never catches up.
    [paused] = sorted(set(local_cluster.brokers) - {replica, controller})[:1]
    live = ",".join(local_cluster.brokers[b].bootstrap for b in local_cluster.brokers
                    if b != paused)
    local_cluster.brokers[paused].pause()
    try:
        assert ok(odradek(local_cluster, "reassign", "cancelled", "--replicas",
                          f"0={replica},{paused}", "--no-wait", bootstrap_servers=live)) == [
            f"Reassigning topic cancelled partition 0 to replicas {replica},{paused}."]

        table = ok(odradek(local_cluster, "reassignments", "cancelled", bootstrap_servers=live))
        assert table[0].split() == ["Topic", "Partition", "Replicas", "Adding", "Removing"]
        assert table[2].split() == ["cancelled", "0", f"{replica},{paused}", str(paused)]

        assert ok(odradek(local_cluster, "reassign", "cancelled", "--cancel",
                          "--timeout", str(REASSIGN_TIMEOUT_S), bootstrap_servers=live)) == [
            f"Cancelling the reassignment of topic cancelled partition 0: back to replicas "
            f"{replica}.",
            f"Topic cancelled partition 0: replicas {replica}."]
    finally:
        local_cluster.brokers[paused].resume()
    assert_replicas(admin, "cancelled", [replica])
    # The pause may have outlasted the broker's ZooKeeper session: the next test wants it back.
    wait_for(lambda: len(admin.list_topics(timeout=CLIENT_TIMEOUT_S).brokers) == 3, f"broker {paused} registered again", CLIENT_TIMEOUT_S)


def test_a_reassignment_to_a_broker_that_does_not_exist_is_refused(local_cluster, admin):
    before = create_in_sync(admin, "refused", replication_factor=2)

    error = one_error_line(odradek(local_cluster, "reassign", "refused",
                                   "--replicas", f"0={before[0]},9"))

    assert "topic 'refused' partition 0" in error
    assert "INVALID_REPLICA_ASSIGNMENT" in error
    assert "[9]" in error
    assert partition_0(admin, "refused").replicas == before


@pytest.mark.parametrize("partitions", [["--partition", "0"], []],
                         ids=["that partition", "the whole topic"])
def test_cancelling_with_no_reassignment_in_progress_is_an_error(local_cluster, admin,
                                                                 partitions):
    topic = f"unmoved-{len(partitions)}"
    create_in_sync(admin, topic, replication_factor=1)

    error = one_error_line(odradek(local_cluster, "reassign", topic, "--cancel", *partitions))

    assert f"topic {topic!r}" in error
    assert "NO_REASSIGNMENT_IN_PROGRESS" in error
