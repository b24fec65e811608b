"""``odradek cluster``: a local cluster of brokers and ZooKeeper, up, described and down.

``up`` starts the processes in the background and returns; they keep running until ``down``.
``status`` reads what the cluster itself knows from ZooKeeper — the live brokers, the
controller, each partition's leader and ISR — in Kafka's znode layout.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from odradek.cli import output
from odradek.cli.arguments import key_value_pairs
from odradek.cli.errors import fail
from odradek.cluster.local import CLIENT_LISTENER, LocalCluster, LocalClusterError
from odradek.metadata import zk_layout as layout
from odradek.metadata.model import BrokerInfo

app = typer.Typer(help="Run a local cluster: ZooKeeper and brokers on this machine.",
                  no_args_is_help=True)

DEFAULT_DIRECTORY = Path("odradek-cluster")
# A ZooKeeper on loopback answers at once; one that does not within this is down or paused.
ZOOKEEPER_TIMEOUT_S = 5.0

Directory = Annotated[Path, typer.Option(
    "--dir", "-d", file_okay=False,
    help="The cluster's directory: ZooKeeper's and every broker's data and logs.")]


@app.command()
def up(
    brokers: Annotated[int, typer.Option("--brokers", "-n", min=1, help="Number of brokers.")] = 3,
    directory: Directory = DEFAULT_DIRECTORY,
    overrides: Annotated[Optional[list[str]], typer.Option(
        "--set", "-s", metavar="KEY=VALUE",
        help="A config for every broker, e.g. default.replication.factor=3 (repeatable).")]
    = None,
) -> None:
    """Start ZooKeeper and the brokers in the background; print the bootstrap servers."""
    configs = dict(key_value_pairs(overrides, "--set"))
    try:
        running = LocalCluster.from_directory(directory)
    except LocalClusterError:
        running = None
    if running is not None and running.running:
        fail(f"a cluster is already running in {directory}: "
             f"stop it with `odradek cluster down --dir {directory}`")
    try:
        cluster = LocalCluster(directory, brokers, configs).start()
    except LocalClusterError as exc:
        fail(f"the cluster did not start: {exc}")
    output.note(f"ZooKeeper on {cluster.zookeeper.connect_string}, {_brokers_count(brokers)} "
                f"in {cluster.directory}; bootstrap servers:")
    output.line(cluster.bootstrap_servers)


@app.command()
def status(
    directory: Directory = DEFAULT_DIRECTORY,
    internal: Annotated[bool, typer.Option(
        "--internal", help="Include internal topics such as __consumer_offsets.")] = False,
) -> None:
    """Show the brokers, the controller and each partition's leader, epoch, replicas and ISR."""
    cluster = _cluster(directory)
    state = _read_zookeeper(cluster)
    output.line(f"ZooKeeper: {cluster.zookeeper.connect_string}")
    output.line(f"Controller: {'none' if state.controller is None else state.controller}")
    output.table(["Broker", "Address", "Process", "Registered"],
                 (_broker_row(cluster, state, node_id)
                  for node_id in sorted(cluster.brokers.keys() | state.brokers.keys())))
    partitions = [p for p in state.partitions if internal or not p.topic.startswith("__")]
    if not partitions:
        output.note("no topics")
        return
    output.table(
        ["Topic", "Partition", "Leader", "Leader epoch", "Replicas", "Isr"],
        (_partition_row(p) for p in partitions))


@app.command()
def down(directory: Directory = DEFAULT_DIRECTORY) -> None:
    """Stop the brokers (a controlled shutdown each), then ZooKeeper."""
    cluster = _cluster(directory)
    if not cluster.running:
        output.note(f"no cluster is running in {directory}")
        return
    try:
        cluster.stop()
    except LocalClusterError as exc:
        fail(f"the cluster was not stopped cleanly (its processes were killed): {exc}")
    output.note(f"Stopped {_brokers_count(len(cluster.brokers))} and ZooKeeper.")


def _brokers_count(count: int) -> str:
    return f"{count} broker" if count == 1 else f"{count} brokers"


def _cluster(directory: Path) -> LocalCluster:
    try:
        return LocalCluster.from_directory(directory)
    except LocalClusterError:
        fail(f"no cluster in {directory}: start one with `odradek cluster up --dir {directory}`")


@dataclass(frozen=True, slots=True)
class _Partition:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    state: layout.LeaderAndIsr | None  # None until the controller has elected a leader


@dataclass(frozen=True, slots=True)
class _ZooKeeperState:
    brokers: dict[int, BrokerInfo]
    controller: int | None
    partitions: list[_Partition]


def _read_zookeeper(cluster: LocalCluster) -> _ZooKeeperState:
    connect = cluster.zookeeper.connect_string
    if not cluster.zookeeper.running:
        fail(f"ZooKeeper at {connect} is not running: start the cluster with "
             f"`odradek cluster up --dir {cluster.directory}`")
    # kazoo logs its connection attempts, which Python would print for want of a handler:
    # an unreachable ZooKeeper is one line of ours instead.
    logging.getLogger("kazoo").addHandler(logging.NullHandler())
    client = KazooClient(connect, timeout=ZOOKEEPER_TIMEOUT_S,
                         connection_retry={"max_tries": 0})
    try:
        client.start(timeout=ZOOKEEPER_TIMEOUT_S)
    except KazooTimeoutError:  # start() has stopped and closed the client
        fail(f"ZooKeeper at {connect} is running but did not answer within "
             f"{ZOOKEEPER_TIMEOUT_S:g} s")
    try:
        return _ZooKeeperState(_brokers(client), _controller(client), _partitions(client))
    finally:
        client.stop()
        client.close()


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:  # a cluster whose brokers never started
        return []


def _brokers(client: KazooClient) -> dict[int, BrokerInfo]:
    brokers = {}
    for child in _children(client, layout.BROKER_IDS):
        try:
            data, _ = client.get(layout.broker_path(int(child)))
        except NoNodeError:  # its session ended meanwhile
            continue
        brokers[int(child)] = layout.decode_broker(int(child), data)
    return brokers


def _controller(client: KazooClient) -> int | None:
    try:
        data, _ = client.get(layout.CONTROLLER)
    except NoNodeError:
        return None
    return layout.decode_controller(data)


def _partitions(client: KazooClient) -> list[_Partition]:
    partitions = []
    for topic in sorted(_children(client, layout.TOPICS)):
        try:
            data, _ = client.get(layout.topic_path(topic))
        except NoNodeError:  # deleted meanwhile
            continue
        for partition, replicas in sorted(layout.decode_assignment(data).replicas.items()):
            try:
                state, _ = client.get(layout.partition_state_path(topic, partition))
            except NoNodeError:
                partitions.append(_Partition(topic, partition, replicas, None))
            else:
                partitions.append(_Partition(topic, partition, replicas,
                                             layout.decode_leader_and_isr(state)))
    return partitions


def _broker_row(cluster: LocalCluster, state: _ZooKeeperState, node_id: int) -> list[object]:
    registered = state.brokers.get(node_id)
    process = cluster.brokers.get(node_id)
    if process is None:  # a broker of another directory, registered in this ZooKeeper
        endpoint = registered.endpoint(CLIENT_LISTENER)
        address = "" if endpoint is None else f"{endpoint.host}:{endpoint.port}"
        return [node_id, address, "elsewhere", "yes"]
    return [node_id, process.bootstrap, "running" if process.running else "stopped",
            "no" if registered is None else "yes"]


def _partition_row(p: _Partition) -> list[object]:
    if p.state is None:
        return [p.topic, p.partition, "none", None, _ids(p.replicas), None]
    leader = "none" if p.state.leader == layout.NO_LEADER else p.state.leader
    return [p.topic, p.partition, leader, p.state.leader_epoch, _ids(p.replicas),
            _ids(p.state.isr)]


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in ids)
