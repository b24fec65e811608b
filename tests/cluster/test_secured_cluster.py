"""A cluster whose brokers talk to each other over SASL_SSL: followers fetch and transaction
markers travel on the INTERNAL listener, which asks every broker for TLS and SASL/PLAIN, as
a deployment that separates its networks does. Clients stay on PLAINTEXT.

With ``min.insync.replicas=2`` and acks=all, a record is acknowledged only once a follower
fetched it, so records acknowledged at all show the brokers authenticated to each other;
the test also kills a leader and checks nothing acknowledged was lost.
"""

from __future__ import annotations

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster.local import LocalCluster
from odradek.security.certificates import CertificateAuthority, CertificateFiles, write_file
from workload import SESSION_TIMEOUT_MS, full_isr, leaders, wait_for

TOPIC = "secured"
RECORDS = 2000
BROKER_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
               'username="broker" password="broker-secret" user_broker="broker-secret";')


@pytest.fixture(scope="module")
def secured_cluster(tmp_path_factory):
    pki = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority.create()
    write_file(pki / "ca.pem", ca.certificate_pem())
    CertificateFiles.named(pki, "broker").write(ca.issue_server())
    configs = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "listener.name.internal.ssl.keystore.type": "PEM",
        "listener.name.internal.ssl.keystore.location": str(pki / "broker.pem"),
        "listener.name.internal.ssl.truststore.type": "PEM",
        "listener.name.internal.ssl.truststore.location": str(pki / "ca.pem"),
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": BROKER_JAAS,
    }
    with LocalCluster(tmp_path_factory.mktemp("cluster"), brokers=3, configs=configs,
                      zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS) as cluster:
        yield cluster


def produce(bootstrap: str, values: range) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "enable.idempotence": True})
    for value in values:
        producer.produce(TOPIC, str(value).encode())
        producer.poll(0)
    assert producer.flush(30) == 0


def consumed_values(bootstrap: str, count: int) -> set[int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "checker",
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    values: set[int] = set()
    try:
        wait_for(lambda: _poll_into(consumer, values) >= count, f"{count} values consumed", 60)
    finally:
        consumer.close()
    return values


def _poll_into(consumer: confluent_kafka.Consumer, values: set[int]) -> int:
    for message in consumer.consume(500, 0.5):
        if message.error() is None:
            values.add(int(message.value()))
    return len(values)


def test_replication_runs_over_a_sasl_ssl_inter_broker_listener_through_a_failover(
        secured_cluster):
    cluster = secured_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])[
        TOPIC].result(30)
    wait_for(lambda: full_isr(admin, TOPIC), "the topic's ISRs are full")
    produce(cluster.bootstrap_servers, range(RECORDS))

    victim = leaders(admin, TOPIC)[0]
    cluster.brokers[victim].kill()
    survivor = next(b for node_id, b in cluster.brokers.items() if node_id != victim)
    survivor_admin = AdminClient({"bootstrap.servers": survivor.bootstrap})
    wait_for(lambda: leaders(survivor_admin, TOPIC)[0] not in (victim, -1),
             f"partition 0 led elsewhere after broker {victim} was killed")
    produce(survivor.bootstrap, range(RECORDS, 2 * RECORDS))
    cluster.brokers[victim].start()
    wait_for(lambda: full_isr(survivor_admin, TOPIC),
             "the restarted broker caught up over SASL_SSL and is back in every ISR")
    assert consumed_values(cluster.bootstrap_servers, 2 * RECORDS) == set(range(2 * RECORDS))
