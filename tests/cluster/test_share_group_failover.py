"""A share group (KIP-932) through the failure of its partition's leader, on a three-broker
cluster: what it acknowledged is kept in ``__share_group_state``, so the new leader hands out
only the records not yet acknowledged."""

from __future__ import annotations

import subprocess
import sys
import time

import confluent_kafka
from confluent_kafka.admin import AdminClient

from test_group_protocols_failover import FAILOVER_S, create, produce, restart
from workload import leaders, wait_for


def test_a_share_group_keeps_what_it_acknowledged_when_its_leader_fails(local_cluster):
    cluster = local_cluster
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "queue-failover"
    create(admin, topic, 1)
    consumer = confluent_kafka.ShareConsumer({
        "bootstrap.servers": bootstrap, "group.id": "queue",
        "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    accepted: set[int] = set()
    try:
        # The group starts at the log end (share.auto.offset.reset=latest): it has fetched,
        # and its start offset is written, before anything is.
        wait_for(lambda: (consumer.poll(0.2), start_offsets(bootstrap, "queue", topic))[1]
                 == {0: 0}, "the share group's start", 60)
        produce(bootstrap, topic, 40)
        deadline = time.monotonic() + 60
        while len(accepted) < 20 and time.monotonic() < deadline:
            for message in consumer.poll(0.5):
                if message.error():
                    continue
                if message.offset() < 20:
                    consumer.acknowledge(message, confluent_kafka.AcknowledgeType.ACCEPT)
                    accepted.add(message.offset())
                else:
                    consumer.acknowledge(message, confluent_kafka.AcknowledgeType.RELEASE)
            consumer.commit_sync(30)
        assert accepted == set(range(20))
    finally:
        consumer.close()

    leader = leaders(admin, topic)[0]
    survivor = next(b for i, b in cluster.brokers.items() if i != leader)
    survivor_admin = AdminClient({"bootstrap.servers": survivor.bootstrap})
    cluster.brokers[leader].kill()
    try:
        wait_for(lambda: leaders(survivor_admin, topic)[0] not in (leader, -1),
                 "a new leader", FAILOVER_S)
        successor = confluent_kafka.ShareConsumer({
            "bootstrap.servers": survivor.bootstrap, "group.id": "queue"})
        successor.subscribe([topic])
        got: list[int] = []
        try:
            deadline = time.monotonic() + FAILOVER_S
            while len(got) < 20 and time.monotonic() < deadline:
                got += [m.offset() for m in successor.poll(0.5) if not m.error()]
            successor.commit_sync(30)
        finally:
            successor.close()
        # Read back from __share_group_state by the new leader: the accepted records are
        # never handed out again, the released ones are.
        assert sorted(got) == list(range(20, 40))
    finally:
        restart(cluster, leader, admin, topic)


def start_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The share group's start offset in each partition of ``topic``, as
    ``odradek share-groups describe`` shows it."""
    described = subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", "share-groups", "describe", group,
         "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=60)
    return {int(row[1]): int(row[2]) for row in map(str.split, described.stdout.splitlines())
            if row[:1] == [topic]}
