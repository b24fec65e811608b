"""A consumer-protocol group (KIP-848) through the failure of its coordinator, on a
three-broker cluster: killed with SIGKILL, the new coordinator reads the group from
``__consumer_offsets``, and the members carry on with their epochs, reading every record
with committed offsets that never go back. Share groups: test_share_group_failover.py."""

from __future__ import annotations

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster.local import LocalCluster
from workload import SESSION_TIMEOUT_MS, full_isr, wait_for

PARTITIONS = 4
RECORDS = 200
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 60


@pytest.fixture(scope="module")
def local_cluster(tmp_path_factory: pytest.TempPathFactory):
    """The module's cluster, its consumer-protocol members heartbeating every 500 ms: they
    find the new coordinator within a second of the old one's leadership moving."""
    with LocalCluster(tmp_path_factory.mktemp("cluster"), brokers=3,
                      zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS,
                      configs={"group.consumer.heartbeat.interval.ms": "500",
                               "group.consumer.min.heartbeat.interval.ms": "100"}) as cluster:
        yield cluster


def create(admin: AdminClient, topic: str, partitions: int) -> None:
    admin.create_topics([NewTopic(topic, partitions, 3,
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
    wait_for(lambda: full_isr(admin, topic), f"{topic}'s ISRs full")


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> set[bytes]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "enable.idempotence": True})
    values = {f"v{i}".encode() for i in range(start, start + count)}
    for value in sorted(values):
        producer.produce(topic, value)
    assert producer.flush(60) == 0
    return values


def restart(cluster, node_id: int, admin: AdminClient, topic: str) -> None:
    """The killed broker back, and in every ISR again, for the module's next test."""
    broker = cluster.brokers[node_id]
    wait_for(lambda: not broker.running, f"broker {node_id} stopped", 60)
    broker.start()
    wait_for(lambda: full_isr(admin, topic), f"broker {node_id} back in every ISR")


def test_a_consumer_group_keeps_its_members_when_its_coordinator_fails(local_cluster):
    cluster = local_cluster
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "modern-failover"
    create(admin, topic, PARTITIONS)
    members = [confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "modern", "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False}) for _ in range(2)]
    consumed: set[bytes] = set()
    committed: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}

    def poll_all() -> None:
        # Each record is committed before the next poll, as an application that must not
        # lose its place commits: a commit still in flight when its partition moves could
        # land after the new owner's.
        for member in members:
            message = member.poll(0.05)
            if message is None or message.error():
                continue
            consumed.add(message.value())
            try:
                member.commit(message, asynchronous=False)
                committed[message.partition()].append(message.offset() + 1)
            except confluent_kafka.KafkaException:
                pass  # refused during the failover: the record is read again

    for member in members:
        member.subscribe([topic])
    try:
        values = produce(bootstrap, topic, RECORDS // 2)
        wait_for(lambda: (poll_all(), len(consumed) >= RECORDS // 4)[1], "consuming", 60)
        group = admin.describe_consumer_groups(["modern"])["modern"].result(30)
        before = {m.member_id for m in group.members}
        coordinator = group.coordinator.id
        survivor = next(b for i, b in cluster.brokers.items() if i != coordinator)
        survivor_admin = AdminClient({"bootstrap.servers": survivor.bootstrap})

        cluster.brokers[coordinator].kill()
        values |= produce(survivor.bootstrap, topic, RECORDS // 2, start=RECORDS // 2)
        wait_for(lambda: (poll_all(), values <= consumed)[1],
                 "every record consumed after the failover", FAILOVER_S)
        group = survivor_admin.describe_consumer_groups(["modern"])["modern"].result(30)

        assert group.coordinator.id != coordinator
        # The new coordinator read the group from __consumer_offsets: the same members,
        # who carried on with their epochs instead of joining again.
        assert {m.member_id for m in group.members} == before
        assert sum(map(len, committed.values())) > 0
        for partition, offsets in committed.items():
            assert offsets == sorted(offsets), f"partition {partition} went back"
    finally:
        for member in members:
            member.close()
        restart(cluster, coordinator, admin, topic)
