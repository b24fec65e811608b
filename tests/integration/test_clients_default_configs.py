"""Clients with their out-of-the-box configuration (the adapters of conftest.py adjust
none)."""

from __future__ import annotations

import kafka


def test_kafka_python_producer_with_default_configs_delivers(bootstrap, create_topic):
    topic = create_topic("defaults")
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    try:
        metadata = producer.send(topic, key=b"k", value=b"v").get(timeout=20)
    finally:
        producer.close(timeout=5)

    assert metadata.offset == 0
