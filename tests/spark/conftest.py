"""Spark tests: one local SparkSession for the whole run and one broker per module.

Starting Spark's JVM takes seconds, so ``spark`` is session-scoped; the broker is shared by
a module's tests, each of which uses topics of its own (``topic`` makes a unique name).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import confluent_kafka
import confluent_kafka.admin
import pytest
from drivers import JVM_OPTIONS

from odradek.spark.session import local_session
from odradek.testing.embedded import EmbeddedBroker

TIMEOUT_SECONDS = 30.0

_names = itertools.count()


@pytest.fixture(scope="session")
def spark():
    session = local_session("odradek-tests", master="local[2]",
                            **{"spark.driver.extraJavaOptions": JVM_OPTIONS})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("odradek"), num_partitions=1,
                        offsets_topic_num_partitions=2, transaction_state_log_num_partitions=2,
                        group_initial_rebalance_delay_ms=0) as embedded:
        yield embedded


@pytest.fixture
def bootstrap(broker) -> str:
    return broker.bootstrap_servers


@pytest.fixture
def topic(bootstrap, request):
    """``topic(partitions=1, **configs)``: creates a topic with a name unique to this run."""

    def create(partitions: int = 1, **configs: str) -> str:
        name = f"{request.node.name[:40].strip('_[]')}-{next(_names)}".replace("[", "-")
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        [future] = admin.create_topics([confluent_kafka.admin.NewTopic(
            name, partitions, config={k: str(v) for k, v in configs.items()})]).values()
        future.result(TIMEOUT_SECONDS)
        return name

    return create


@pytest.fixture
def produce(bootstrap):
    """``produce(topic, records, partition=None)``: sends ``records`` (values, or
    ``(key, value)`` pairs) and waits for every ack."""

    def send(topic: str, records, partition: int | None = None) -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for record in records:
            key, value = record if isinstance(record, tuple) else (None, record)
            kwargs = {} if partition is None else {"partition": partition}
            producer.produce(topic, key=key, value=value, **kwargs)
        assert producer.flush(TIMEOUT_SECONDS) == 0

    return send
