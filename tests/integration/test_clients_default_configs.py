"""Clients with their out-of-the-box configuration (the adapters of conftest.py adjust none
but one, recorded here)."""

from __future__ import annotations

import kafka
import pytest


@pytest.mark.xfail(strict=True, raises=kafka.errors.IncompatibleBrokerVersion,
                   reason="kafka-python 3 enables idempotence by default, which needs "
                          "InitProducerId; odradek does not serve it yet (the adapter sets "
                          "enable_idempotence=False until it does)")
def test_kafka_python_producer_with_default_configs_delivers(bootstrap, create_topic):
    topic = create_topic("defaults")
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    try:
        metadata = producer.send(topic, key=b"k", value=b"v").get(timeout=20)
    finally:
        producer.close(timeout=5)

    assert metadata.offset == 0
