"""Reassignment while producers and consumers keep running: every partition of a topic
moves to another pair of brokers under an idempotent acks=all producer and a consumer
group; afterwards the partitions live exactly on their new replicas, byte-identical below
the high watermark, with nothing acknowledged lost or duplicated, and the old replicas are
gone from disk."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from checker import CheckResult, check_partition, read_replicas
from odradek.cli.client import Kafka
from odradek.cli.reassignments import Reassignments
from odradek.protocol.topic_partition import TopicPartition as Partition
from workload import GroupReader, Workload, wait_for

TOPIC = "moving"
PLACEMENT = [[1, 2], [2, 3], [3, 1]]
TARGETS = [[2, 3], [3, 1], [1, 2]]


def replicas(admin: AdminClient) -> list[list[int]]:
    topic = admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
    return [list(topic.partitions[p].replicas) for p in range(len(PLACEMENT))]


def test_partitions_move_under_load_and_nothing_is_lost(local_cluster):
    cluster = local_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, len(PLACEMENT), replica_assignment=PLACEMENT,
                                  config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    wait_for(lambda: full_isr_of(admin, 2), "full ISRs")
    workload = Workload(cluster.bootstrap_servers, TOPIC).start()
    reader = GroupReader(cluster.bootstrap_servers, TOPIC).start()
    try:
        time.sleep(2)
        with Kafka(cluster.bootstrap_servers, None) as kafka:
            reassignments = Reassignments(kafka)
            refused = reassignments.alter({Partition(TOPIC, p): target
                                           for p, target in enumerate(TARGETS)})
            assert not refused, refused
            wait_for(lambda: not reassignments.ongoing(), "the reassignments completed")
        wait_for(lambda: [sorted(r) for r in replicas(admin)] == [sorted(t) for t in TARGETS],
                 "Metadata shows the new replicas")
        time.sleep(2)
    finally:
        remaining = workload.stop()
        reader.stop()
    assert remaining == 0
    wait_for(lambda: full_isr_of(admin, 2), "full ISRs at the end")
    result = CheckResult()
    watermarks = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "check"})
    try:
        for partition, target in enumerate(TARGETS):
            _, high_watermark = watermarks.get_watermark_offsets(
                TopicPartition(TOPIC, partition), timeout=10)
            wait_for(lambda: sorted(r.node_id for r in read_replicas(
                {i: b.data_dir for i, b in cluster.brokers.items()}, TOPIC, partition))
                == sorted(target), f"partition {partition} only on {target}", 20)
            on_disk = read_replicas({i: cluster.brokers[i].data_dir for i in target},
                                    TOPIC, partition)
            check_partition(on_disk, high_watermark, workload.acknowledged[partition],
                            workload.attempted, result)
    finally:
        watermarks.close()
    print(f"\n{result}; consumed {reader.consumed}")
    assert result.acknowledged > 500
    assert result.ok, str(result)
    assert workload.failed == []


def full_isr_of(admin: AdminClient, size: int) -> bool:
    topic = admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
    return all(len(m.isrs) == size and m.leader >= 0 for m in topic.partitions.values())
