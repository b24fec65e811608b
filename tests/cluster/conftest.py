"""Fixtures of the cluster tests: real ZooKeeper and broker processes on loopback.

``local_cluster`` is a started three-broker :class:`LocalCluster`, one per test module
(starting one takes a few seconds). A test that kills, pauses or stops one of its brokers
starts or resumes it again before it ends, so the module's next test finds three live
brokers. Whatever the tests left running is stopped when the module ends.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.cluster.local import LocalCluster
from workload import SESSION_TIMEOUT_MS


@pytest.fixture(scope="module", autouse=True)
def hypothesis_storage_of_this_run() -> Iterator[None]:
    """The brokers' Hypothesis storage is this run's, for the module's fixtures and tests.

    The brokers run with this environment's packages, where kio imports Hypothesis, which
    at import loads its Unicode table from ``.hypothesis`` in the working directory, and
    first builds it there if it is missing: a second and a half of CPU. A broker works in
    its own new directory, so every broker of every cluster built one, three at once on two
    cores. The storage of this run already has it: importing the same packages here did."""
    storage = os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY", str(Path.cwd() / ".hypothesis"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", storage)
        yield


@pytest.fixture(scope="module")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), brokers=3,
                      zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS) as cluster:
        yield cluster
