"""``LocalCluster`` and ``odradek cluster``: ZooKeeper and three brokers as real processes,
seen through a Kafka client the way a user sees them.

The tests that share the module's cluster leave it with three live brokers; the command
line tests start a cluster of their own, since they stop it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from workload import wait_for
from odradek.cluster.local import HOST, BrokerProcess, BrokerProcessError, LocalCluster
from odradek.cluster.zookeeper import ZooKeeperServer

ODRADEK = str(Path(sys.executable).with_name("odradek"))
# Metadata and topic creation on loopback take milliseconds; this is for a loaded machine.
CLIENT_TIMEOUT_S = 15.0
# How long after its ZooKeeper session expired a killed broker may still be listed: the
# controller and the other brokers see the expiry within a tick or two.
BROKER_LEAVES_MARGIN_S = 10
# `cluster up` starts a JVM and three Python brokers, `down` stops them.
CLI_TIMEOUT_S = 60


@pytest.fixture
def admin(local_cluster: LocalCluster) -> AdminClient:
    # log_level 2: librdkafka's complaints about a killed broker are expected here.
    return AdminClient({"bootstrap.servers": local_cluster.bootstrap_servers, "log_level": 2})


def metadata(admin: AdminClient) -> ClusterMetadata:
    return admin.list_topics(timeout=CLIENT_TIMEOUT_S)


def test_the_cluster_has_three_brokers_and_a_controller(local_cluster, admin):
    cluster = metadata(admin)

    assert {node_id: f"{b.host}:{b.port}" for node_id, b in cluster.brokers.items()} == {
        node_id: broker.bootstrap for node_id, broker in local_cluster.brokers.items()}
    assert cluster.controller_id in {1, 2, 3}
    assert local_cluster.bootstrap_servers == ",".join(
        local_cluster.brokers[node_id].bootstrap for node_id in (1, 2, 3))
    # A fresh cluster starts cleanly: no broker logged an error while joining it.
    errors = {node_id: [line for line in broker.log_path.read_text().splitlines()
                        if " ERROR " in line]
              for node_id, broker in local_cluster.brokers.items()}
    assert errors == {1: [], 2: [], 3: []}


def test_a_topic_with_replication_factor_3_has_every_broker_in_sync(admin):
    admin.create_topics([NewTopic("replicated", 3, 3)])["replicated"].result(CLIENT_TIMEOUT_S)

    def fully_replicated() -> bool:
        partitions = metadata(admin).topics["replicated"].partitions.values()
        return len(partitions) == 3 and all(
            sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3] for p in partitions)

    wait_for(fully_replicated, "3 replicas in sync for every partition", CLIENT_TIMEOUT_S)


def test_a_killed_broker_leaves_the_cluster_and_returns_when_started(local_cluster, admin):
    broker = local_cluster.brokers[3]
    pid, port = broker.pid, broker.port
    try:
        broker.kill()
        assert not broker.running
        wait_for(lambda: 3 not in metadata(admin).brokers, "broker 3 gone from the metadata", local_cluster.zookeeper_session_timeout_ms / 1000 + BROKER_LEAVES_MARGIN_S)
        assert set(metadata(admin).brokers) == {1, 2}
    finally:
        if not broker.running:
            broker.start()

    assert broker.pid != pid and broker.port == port
    wait_for(lambda: 3 in metadata(admin).brokers, "broker 3 back in the metadata", CLIENT_TIMEOUT_S)


def test_from_directory_controls_the_cluster_started_elsewhere(local_cluster):
    found = LocalCluster.from_directory(local_cluster.directory)

    assert found.bootstrap_servers == local_cluster.bootstrap_servers
    assert found.zookeeper.connect_string == local_cluster.zookeeper.connect_string
    assert found.zookeeper.ruok()
    assert {n: b.pid for n, b in found.brokers.items()} == {
        n: b.pid for n, b in local_cluster.brokers.items()}
    assert all(broker.running for broker in found.brokers.values())

    pid = local_cluster.brokers[2].pid
    found.brokers[2].pause()
    try:  # signals are delivered asynchronously
        wait_for(lambda: process_state(pid) == "T", "broker 2 stopped by SIGSTOP", 5)
    finally:
        found.brokers[2].resume()
    wait_for(lambda: process_state(pid) != "T", "broker 2 running again", 5)


def process_state(pid: int) -> str:
    # /proc/<pid>/stat: "pid (comm) state ..."; comm may hold spaces, never ") ".
    return Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2].split()[0]


@pytest.fixture
def unrelated_process() -> Iterator[subprocess.Popen]:
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def test_a_stale_pid_never_gets_another_process_signalled(tmp_path, unrelated_process):
    """A broker.json left by a crash or a reboot, whose pid another process now has."""
    (tmp_path / "broker.json").write_text(json.dumps({
        "node_id": 1, "pid": unrelated_process.pid, "port": 1, "internal_port": 2,
        "zookeeper_connect": "127.0.0.1:1", "configs": {}}))
    broker = BrokerProcess.from_directory(tmp_path)

    assert not broker.running
    broker.stop()
    broker.kill()
    with pytest.raises(BrokerProcessError, match="not running"):
        broker.pause()
    assert unrelated_process.poll() is None


def test_a_broker_whose_port_was_taken_before_its_first_start_starts_on_other_ports(tmp_path):
    """Ports are picked free and let go until the broker binds them: another process (a
    cluster started beside this one) may take one meanwhile."""
    with ZooKeeperServer(tmp_path / "zookeeper") as zookeeper, socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = BrokerProcess(1, tmp_path / "broker-1", zookeeper.connect_string, port, 0)
        try:
            broker.start()
            assert broker.port != port
            assert broker.known_brokers() == {1}
        finally:
            broker.stop()
    assert "address already in use" in broker.log_path.read_text().lower()


def odradek(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ODRADEK, "cluster", *arguments], capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S)


def processes_in(directory: Path) -> str:
    return subprocess.run(["pgrep", "-af", str(directory)], capture_output=True,
                          text=True).stdout


def test_cluster_up_status_and_down_on_the_command_line(tmp_path):
    directory = tmp_path / "cluster"
    try:
        up = odradek("up", "--brokers", "3", "--dir", str(directory))
        assert up.returncode == 0, up.stderr
        bootstrap_servers = up.stdout.strip().split(",")
        assert len(bootstrap_servers) == 3
        assert "ZooKeeper on 127.0.0.1:" in up.stderr

        again = odradek("up", "--dir", str(directory))
        assert again.returncode != 0
        assert "already running" in again.stderr

        status = odradek("status", "--dir", str(directory))
        assert status.returncode == 0, status.stderr
        controller = int(status.stdout.split("Controller: ")[1].split()[0])
        assert controller in {1, 2, 3}
        for node_id, address in enumerate(bootstrap_servers, start=1):
            row = next(line.split() for line in status.stdout.splitlines()
                       if address in line)
            assert row == [str(node_id), address, "running", "yes"]

        down = odradek("down", "--dir", str(directory))
        assert down.returncode == 0, down.stderr
        assert processes_in(directory) == ""

        after = odradek("status", "--dir", str(directory))
        assert after.returncode != 0
        assert after.stderr.count("\n") == 1 and "not running" in after.stderr
    finally:
        if (directory / "cluster.json").exists():
            LocalCluster.from_directory(directory).stop()


def test_cluster_status_without_a_cluster_is_a_one_line_error(tmp_path):
    result = odradek("status", "--dir", str(tmp_path))

    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and "no cluster in" in result.stderr
