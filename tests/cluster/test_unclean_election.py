"""Unclean leader election: the loss it trades for availability, and only when allowed.

One partition with two replicas, ``min.insync.replicas=1``. The follower is killed and
leaves the ISR; the leader alone acknowledges a first set of values; the leader is killed
too, and the follower starts again. With ``unclean.leader.election.enable=false`` the
partition waits offline for the old leader, and nothing is lost. With it ``true`` the
follower, which never had the first set, leads; a second set is written; when the old
leader returns it truncates its log to the new leader's. The checker then finds exactly the
first set lost — the loss Kafka documents for unclean elections — and nothing else:
no duplicates, replicas identical below the high watermark.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from checker import CheckResult, check_partition, read_replicas
from workload import SESSION_TIMEOUT_MS, wait_for

VALUES = 200


def metadata(admin: AdminClient, topic: str):
    return admin.list_topics(topic, timeout=5).topics[topic].partitions[0]


def produce(bootstrap: str, topic: str, values: list[bytes]) -> set[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 60_000, "log_level": 3})
    acknowledged: set[bytes] = set()
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda error, message:
                         acknowledged.add(message.value()) if error is None else None)
    assert producer.flush(60) == 0
    return acknowledged


@pytest.mark.parametrize("unclean", [False, True], ids=["clean", "unclean"])
def test_an_unclean_election_loses_what_only_the_old_leader_had(local_cluster, unclean):
    cluster = local_cluster
    topic = f"election-{'unclean' if unclean else 'clean'}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 2, config={
        "min.insync.replicas": "1",
        "unclean.leader.election.enable": str(unclean).lower()})])[topic].result(30)
    wait_for(lambda: len(metadata(admin, topic).isrs) == 2, "a full ISR")
    leader_id = metadata(admin, topic).leader
    follower_id = next(r for r in metadata(admin, topic).replicas if r != leader_id)
    leader, follower = cluster.brokers[leader_id], cluster.brokers[follower_id]
    third = next(b for i, b in cluster.brokers.items() if i not in (leader_id, follower_id))
    survivor = AdminClient({"bootstrap.servers": third.bootstrap})
    try:
        follower.kill()
        wait_for(lambda: metadata(survivor, topic).isrs == [leader_id], "the follower left",
                 SESSION_TIMEOUT_MS / 1000 + 30)
        first = produce(third.bootstrap, topic, [f"first-{i}".encode() for i in range(VALUES)])
        assert len(first) == VALUES  # acknowledged by the leader alone
        leader.kill()
        wait_for(lambda: metadata(survivor, topic).leader == -1, "the partition is offline",
                 SESSION_TIMEOUT_MS / 1000 + 30)
        follower.start()
        second: set[bytes] = set()
        if unclean:
            wait_for(lambda: metadata(survivor, topic).leader == follower_id,
                     "the out-of-sync follower leads")
            second = produce(third.bootstrap, topic,
                             [f"second-{i}".encode() for i in range(VALUES)])
        else:
            time.sleep(3)  # the controller had time to elect it, and must not have
            assert metadata(survivor, topic).leader == -1
        leader.start()
        wait_for(lambda: len(metadata(survivor, topic).isrs) == 2, "both replicas in sync")
    finally:
        for broker in (follower, leader):
            if not broker.running:
                broker.start()
    _, high_watermark = _watermarks(cluster.bootstrap_servers, topic)
    replicas = read_replicas({i: cluster.brokers[i].data_dir for i in (leader_id, follower_id)},
                             topic, 0)
    result = CheckResult()
    check_partition(replicas, high_watermark, first | second, first | second, result)
    print(f"\n{topic}: {result}")
    assert not result.diverged and not result.duplicated and not result.unexpected
    if unclean:
        assert sorted(result.lost) == sorted(first)  # exactly what only the old leader had
        assert all(value in second for value in _committed(replicas, high_watermark))
    else:
        assert result.lost == []


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-checker"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()


def _committed(replicas, high_watermark: int) -> list[bytes]:
    return [value for offset, value in replicas[0].values if offset < high_watermark]
