"""``ZooKeeperServer``: a real ZooKeeper JVM, checked with kazoo as the brokers will use it.

Tests that leave the server as they found it share one; those that stop, kill, pause or
restart it take the ``zookeeper_server`` fixture's own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from odradek.cluster.zookeeper import CLASSPATH_ENV, ZooKeeperServer, ZooKeeperServerError

# kazoo's default reconnection backs off towards an hour; a test waits for a server
# that comes back within seconds.
FAST_RECONNECT = {"max_tries": -1, "delay": 0.1, "max_delay": 0.5}
STATE_TIMEOUT_S = 15

Connect = Callable[[ZooKeeperServer], KazooClient]


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def connect() -> Iterator[Connect]:
    """Connected kazoo clients, closed after the test."""
    clients: list[KazooClient] = []

    def connect_(server: ZooKeeperServer) -> KazooClient:
        client = KazooClient(server.connect_string, connection_retry=FAST_RECONNECT)
        clients.append(client)
        client.start(timeout=STATE_TIMEOUT_S)
        return client

    yield connect_
    for client in clients:
        client.stop()
        client.close()


def wait_for_state(client: KazooClient, state: KazooState) -> None:
    deadline = time.monotonic() + STATE_TIMEOUT_S
    while client.state != state:
        assert time.monotonic() < deadline, f"client still {client.state}, not {state}"
        time.sleep(0.05)


def test_a_client_creates_and_reads_a_znode(shared_server, connect):
    client = connect(shared_server)

    client.create("/brokers/ids/0", b'{"port": 9092}', makepath=True)

    assert client.get("/brokers/ids/0")[0] == b'{"port": 9092}'
    assert client.get_children("/brokers/ids") == ["0"]


def test_the_server_listens_on_a_free_loopback_port_it_records_with_its_pid(shared_server):
    recorded = json.loads((shared_server.directory / "server.json").read_text())

    assert shared_server.port != 0
    assert shared_server.connect_string == f"127.0.0.1:{shared_server.port}"
    assert (recorded["pid"], recorded["port"]) == (shared_server.pid, shared_server.port)
    assert shared_server.running and shared_server.ruok()


def test_a_port_another_server_listens_on_is_refused_before_starting(shared_server, tmp_path):
    taken = ZooKeeperServer(tmp_path, port=shared_server.port)

    with pytest.raises(ZooKeeperServerError, match="cannot listen on 127.0.0.1:"):
        taken.start()
    assert not taken.running
    assert not (tmp_path / "server.json").exists()


def test_a_port_another_server_took_before_the_jvm_bound_it_fails_the_start(
        shared_server, tmp_path, monkeypatch):
    """The port is picked free and let go until the JVM binds it: another server that took
    it meanwhile answers on it, but from its own data, and this one exits."""
    monkeypatch.setattr(ZooKeeperServer, "_claim_port",
                        lambda server: setattr(server, "port", shared_server.port))
    late = ZooKeeperServer(tmp_path)

    with pytest.raises(ZooKeeperServerError, match="exited with code"):
        late.start()
    assert not late.running
    assert shared_server.ruok()


def test_data_survives_a_restart_on_the_same_port(zookeeper_server, connect):
    connect(zookeeper_server).create("/controller", b"1")
    first_pid = zookeeper_server.pid

    zookeeper_server.restart()

    assert zookeeper_server.pid != first_pid
    assert connect(zookeeper_server).get("/controller")[0] == b"1"


def test_a_client_sees_a_killed_server_go_away_and_come_back_with_its_data(
        zookeeper_server, connect):
    client = connect(zookeeper_server)
    client.create("/brokers/topics/orders", b"acknowledged before the crash", makepath=True)

    zookeeper_server.kill()
    assert not zookeeper_server.running
    wait_for_state(client, KazooState.SUSPENDED)

    zookeeper_server.start()
    wait_for_state(client, KazooState.CONNECTED)
    assert client.get("/brokers/topics/orders")[0] == b"acknowledged before the crash"


def test_a_paused_server_answers_nothing_until_resumed(zookeeper_server, connect):
    client = connect(zookeeper_server)
    client.create("/isr", b"0,1,2")

    zookeeper_server.pause()
    pending = client.get_async("/isr")
    with pytest.raises(KazooTimeoutError):
        pending.get(timeout=1)
    assert zookeeper_server.running and not zookeeper_server.ruok()

    zookeeper_server.resume()
    assert pending.get(timeout=STATE_TIMEOUT_S)[0] == b"0,1,2"
    assert zookeeper_server.ruok()


def test_a_server_started_by_a_process_that_exited_is_stopped_from_its_directory(tmp_path):
    """`odradek cluster up` starts the server and exits; `odradek cluster down` stops it."""
    start = "import sys; from odradek.cluster.zookeeper import ZooKeeperServer as Z; " \
            "Z(sys.argv[1]).start()"
    subprocess.run([sys.executable, "-c", start, str(tmp_path)], check=True, timeout=60)
    server = ZooKeeperServer.from_directory(tmp_path)
    try:
        assert server.running and server.ruok()

        server.stop()

        assert not server.running
        assert not server.ruok()
    finally:
        server.kill()


def test_a_directory_without_a_server_says_so(tmp_path):
    with pytest.raises(ZooKeeperServerError, match="no ZooKeeper was started in"):
        ZooKeeperServer.from_directory(tmp_path)


def test_a_missing_server_jar_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv(CLASSPATH_ENV, str(tmp_path / "zookeeper.jar"))
    server = ZooKeeperServer(tmp_path)

    with pytest.raises(ZooKeeperServerError, match="install Debian's libzookeeper-java"):
        server.start()
    assert not server.running


def test_a_jvm_that_exits_at_start_is_reported_with_the_end_of_its_log(tmp_path, monkeypatch):
    monkeypatch.setenv(CLASSPATH_ENV, str(tmp_path))  # exists, but holds no ZooKeeper

    with pytest.raises(ZooKeeperServerError, match="exited with code") as error:
        ZooKeeperServer(tmp_path).start()
    assert "Could not find or load main class" in str(error.value)
    assert str(Path(tmp_path, "zookeeper.log")) in str(error.value)
