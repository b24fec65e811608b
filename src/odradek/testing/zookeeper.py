"""pytest fixture ``zookeeper_server``: a real ZooKeeper server of its own for each test.

Function-scoped because tests kill, pause and restart it; a JVM starts in about half a
second. The server listens on a free loopback port, keeps its data in a temporary
directory, and is stopped after the test whatever the test left it in (killed, paused,
restarted) and however the test ended, so no JVM outlives the test::

    def test_broker_registers(zookeeper_server):
        client = KazooClient(zookeeper_server.connect_string)
        ...
        zookeeper_server.kill()
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.cluster.zookeeper import ZooKeeperServer


@pytest.fixture
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server
