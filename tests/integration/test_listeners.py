"""Several listeners: a broker listens on each, and a client is told the addresses of the
listener it connected through, so that it keeps talking to the broker that way.

Both listeners here are on loopback with ephemeral ports; what tells them apart is the port a
client bootstraps from and the port every answer sends it on to.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient
from raw_client import RawClient

from odradek.protocol.api import ApiKey

LISTENERS = "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0"
PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"
TWO_LISTENERS = pytest.mark.odradek_config(
    listeners=LISTENERS, listener_security_protocol_map=PROTOCOL_MAP,
    offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0)
TIMEOUT_SECONDS = 10
RECORDS = [(f"key-{i}".encode(), f"value-{i}".encode()) for i in range(5)]


@TWO_LISTENERS
def test_each_listener_is_bound_on_a_port_of_its_own(odradek_broker):
    ports = odradek_broker.broker.bound_ports
    assert list(ports) == ["PLAINTEXT", "INTERNAL"]
    assert 0 not in ports.values() and ports["PLAINTEXT"] != ports["INTERNAL"]
    assert odradek_broker.port == ports["PLAINTEXT"]


@TWO_LISTENERS
@pytest.mark.parametrize("listener", ["PLAINTEXT", "INTERNAL"])
def test_metadata_lists_the_broker_at_the_address_of_the_clients_listener(
        odradek_broker, listener):
    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers_of(listener)})
    brokers = admin.list_topics(timeout=TIMEOUT_SECONDS).brokers
    assert [(b.id, b.host, b.port) for b in brokers.values()] == [
        (0, "127.0.0.1", odradek_broker.broker.bound_ports[listener])]


@TWO_LISTENERS
@pytest.mark.parametrize("listener", ["PLAINTEXT", "INTERNAL"])
def test_confluent_kafka_produces_and_consumes_in_a_group_through_either_listener(
        odradek_broker, listener):
    bootstrap = odradek_broker.bootstrap_servers_of(listener)
    topic = f"through-{listener.lower()}"
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for key, value in RECORDS:
        producer.produce(topic, value, key)
    assert producer.flush(TIMEOUT_SECONDS) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"group-{listener}",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        consumed = []
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while len(consumed) < len(RECORDS) and time.monotonic() < deadline:
            consumed += [(m.key(), m.value()) for m in consumer.consume(len(RECORDS), 0.5)
                         if not m.error()]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert consumed == RECORDS

    admin = AdminClient({"bootstrap.servers": bootstrap})
    [described] = admin.describe_consumer_groups([f"group-{listener}"]).values()
    coordinator = described.result(TIMEOUT_SECONDS).coordinator
    assert coordinator.port == odradek_broker.broker.bound_ports[listener]


@TWO_LISTENERS
@pytest.mark.clients("kafka-python", "aiokafka")
def test_python_clients_produce_and_consume_through_the_second_listener(
        odradek_broker, client, create_topic):
    bootstrap = odradek_broker.bootstrap_servers_of("INTERNAL")
    topic = create_topic(f"second-listener-{client.name}")
    records = [{"key": key, "value": value} for key, value in RECORDS]
    client.produce(bootstrap, topic, records)
    assert [m.as_sent() for m in client.consume(bootstrap, topic, len(records))] == records


@TWO_LISTENERS
def test_describe_cluster_answers_with_the_second_listeners_address(odradek_broker):
    admin = KafkaAdminClient(bootstrap_servers=odradek_broker.bootstrap_servers_of("INTERNAL"))
    try:
        brokers = admin.describe_cluster()["brokers"]
    finally:
        admin.close()
    assert [(b["broker_id"], b["port"]) for b in brokers] == [
        (0, odradek_broker.broker.bound_ports["INTERNAL"])]


@pytest.mark.odradek_config(
    listeners=LISTENERS, listener_security_protocol_map=PROTOCOL_MAP,
    advertised_listeners="PLAINTEXT://127.0.0.1:0")
def test_a_listener_left_out_of_advertised_listeners_is_advertised_to_nobody(odradek_broker):
    """As in Kafka: its clients learn of no broker, whatever they bootstrapped from."""
    with RawClient(odradek_broker.broker.bound_ports["INTERNAL"]) as raw:
        internal = raw.request(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False)
    with RawClient(odradek_broker.port) as raw:
        plaintext = raw.request(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False,
                                include_topic_authorized_operations=False)
    assert internal.brokers == ()
    assert [(b.node_id, b.port) for b in plaintext.brokers] == [(0, odradek_broker.port)]


@pytest.mark.odradek_config(max_connections=1, listeners=LISTENERS,
                            listener_security_protocol_map=PROTOCOL_MAP)
def test_max_connections_counts_the_connections_of_every_listener(odradek_broker):
    with RawClient(odradek_broker.port) as admitted:
        admitted.request(ApiKey.API_VERSIONS, 3, client_software_name="test",
                         client_software_version="1")
        with RawClient(odradek_broker.broker.bound_ports["INTERNAL"]) as refused:
            with pytest.raises(ConnectionError):
                refused.request(ApiKey.API_VERSIONS, 3, client_software_name="test",
                                client_software_version="1")
