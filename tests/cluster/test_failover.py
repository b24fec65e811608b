"""Failover with nothing acknowledged lost, checked the way Jepsen checks a log.

Idempotent producers write unique values with acks=all to a topic with replication factor 3
and ``min.insync.replicas=2`` while a consumer group reads and commits, and a nemesis
kills brokers with SIGKILL (the controller among them), stops them with SIGTERM (a
controlled shutdown) and starts them again, for a bounded time. Afterwards, with every
broker back in every ISR, the checker reads each partition from each replica's files:
every acknowledged value must be there exactly once, the replicas must hold the same
batches byte for byte below the high watermark, and the group's committed offsets must
never have gone backwards. The failover times are printed (``-s``).
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

from confluent_kafka.admin import AdminClient, NewTopic

from workload import (SESSION_TIMEOUT_MS, GroupReader, Workload, check_topic, full_isr, leaders,
                      wait_for)

TOPIC = "failover"
PARTITIONS = 6
NEMESIS_ROUNDS = 3  # kill -9, SIGTERM, kill -9


def test_nothing_acknowledged_is_lost_across_kills_and_controlled_shutdowns(local_cluster):
    cluster = local_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    created = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3,
                                            config={"min.insync.replicas": "2"})])
    created[TOPIC].result(30)
    wait_for(lambda: full_isr(admin, TOPIC), "the topic's ISRs are full")
    rng = random.Random(2026)
    workload = Workload(cluster.bootstrap_servers, TOPIC).start()
    reader = GroupReader(cluster.bootstrap_servers, TOPIC).start()
    faults: dict[str, int] = defaultdict(int)
    failovers: dict[str, list[float]] = defaultdict(list)
    try:
        time.sleep(2)
        for round_ in range(NEMESIS_ROUNDS):
            kind = "kill -9" if round_ % 2 == 0 else "SIGTERM"
            led = leaders(admin, TOPIC)
            victim_id = rng.choice(sorted(set(led.values())))
            victim = cluster.brokers[victim_id]
            survivor = next(b for i, b in cluster.brokers.items() if i != victim_id)
            survivor_admin = AdminClient({"bootstrap.servers": survivor.bootstrap})
            moved = [p for p, leader in led.items() if leader == victim_id]
            if kind == "kill -9":
                victim.kill()
            else:
                threading.Thread(target=victim.stop, daemon=True).start()
            faults[kind] += 1
            failovers[kind].append(wait_for(
                lambda: all(leaders(survivor_admin, TOPIC)[p] not in (victim_id, -1)
                            for p in moved),
                f"partitions {moved} led elsewhere after {kind} of broker {victim_id}",
                SESSION_TIMEOUT_MS / 1000 + 30))
            wait_for(lambda: not victim.running, f"broker {victim_id} stopped", 60)
            time.sleep(1)
            victim.start()
            faults["restart"] += 1
            wait_for(lambda: full_isr(admin, TOPIC), f"broker {victim_id} back in every ISR")
        time.sleep(2)
        workload.stop()
        acknowledged = sum(map(len, workload.acknowledged.values()))
        # The group kept reading through every fault: it gets to the end of what was written.
        wait_for(lambda: reader.caught_up(acknowledged), "the group read every value", 60)
    finally:
        remaining = workload.stop()
        reader.stop()
    assert remaining == 0, f"{remaining} values never answered"
    wait_for(lambda: full_isr(admin, TOPIC), "every ISR full at the end")
    result = check_topic(cluster.bootstrap_servers,
                         {i: b.data_dir for i, b in cluster.brokers.items()},
                         TOPIC, PARTITIONS, workload)
    print(f"\nfaults {dict(faults)}; failover seconds {dict(failovers)}; {result}; "
          f"producer errors {len(workload.failed)}; consumed {reader.consumed}")
    assert result.acknowledged > 1000
    assert result.ok, str(result)
    for partition, offsets in reader.committed.items():
        assert offsets == sorted(offsets), f"partition {partition} committed offsets went back"
    assert sum(len(offsets) for offsets in reader.committed.values()) > 0
    # Idempotent producers retry through failovers until message.timeout.ms: every value
    # sent was acknowledged, none failed.
    assert workload.failed == []
    assert sum(map(len, workload.acknowledged.values())) == len(workload.attempted)
