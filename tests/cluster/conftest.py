"""Fixtures of the cluster tests: real ZooKeeper and broker processes on loopback.

``local_cluster`` is a started three-broker :class:`LocalCluster`, one per test module
(starting one takes a few seconds). A test that kills, pauses or stops one of its brokers
starts or resumes it again before it ends, so the module's next test finds three live
brokers. Whatever the tests left running is stopped when the module ends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.cluster.local import LocalCluster
from workload import SESSION_TIMEOUT_MS



@pytest.fixture(scope="module")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), brokers=3,
                      zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS) as cluster:
        yield cluster
