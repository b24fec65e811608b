"""pytest plugin: ``odradek_broker``, a real broker for testing Kafka applications.

Installed with odradek (entry point ``pytest11``), so any project that depends on odradek
gets the fixture without a conftest::

    def test_my_app_produces(odradek_broker):
        app = MyApp(bootstrap_servers=odradek_broker.bootstrap_servers)
        ...

The broker listens on an ephemeral loopback port, keeps its data in a temporary directory
and is stopped and removed after the test. Broker configs can be set per test with the
``odradek_config`` marker: ``@pytest.mark.odradek_config(num_partitions=3)``.

``zookeeper_server`` (from ``odradek.testing.zookeeper``) is a real ZooKeeper server for
each test, for the cluster's tests.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing.embedded import EmbeddedBroker

pytest_plugins = ["odradek.testing.zookeeper"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "odradek_config(**configs): broker configs for the odradek_broker fixture"
    )


@pytest.fixture
def odradek_broker(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[EmbeddedBroker]:
    marker = request.node.get_closest_marker("odradek_config")
    configs = marker.kwargs if marker else {}
    with EmbeddedBroker(tmp_path_factory.mktemp("odradek"), **configs) as broker:
        yield broker
