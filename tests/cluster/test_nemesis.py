"""Jepsen's nemesis against a cluster: every kind of fault, nothing acknowledged lost.

Three broker processes and a real ZooKeeper; each broker's inter-broker traffic passes
through a loopback proxy of its own (``proxy.InterBrokerProxy``), so a test can cut one
broker off from the others while it still reaches ZooKeeper and its clients. While an
idempotent acks=all producer writes unique values and a consumer group reads and commits,
the nemesis, one fault at a time for a bounded number of rounds: kills a broker with
SIGKILL, stops one with SIGTERM, pauses one with SIGSTOP (once briefly, once long enough for
its ZooKeeper session to expire while it is frozen), restarts ZooKeeper, and cuts a broker
off from the others. A kill, a long pause and a cut last until ZooKeeper shows the cluster
felt them (the broker replaced as leader, or out of every ISR); after each fault the nemesis
heals it and waits for every ISR to be full again. Then the checker reads every replica:
nothing acknowledged lost or duplicated, replicas identical below the high watermark,
committed offsets never going backwards.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster.local import BrokerProcess, LocalCluster, free_ports
from proxy import InterBrokerProxy
from workload import (SESSION_TIMEOUT_MS, GroupReader, Workload, ZooKeeperView, check_topic,
                      full_isr, leaders, wait_for)

TOPIC = "nemesis"
PARTITIONS = 6
FAULTS = ["kill -9", "SIGTERM", "pause", "isolate", "zookeeper restart", "long pause"]
# A follower cut off leaves the ISR this fast, so an isolation is felt within the test.
REPLICA_LAG_MS = 4000
# A killed or frozen broker is replaced once its ZooKeeper session expires.
LEAVE_S = SESSION_TIMEOUT_MS / 1000 + 30


class ProxiedCluster:
    """A LocalCluster whose brokers advertise their proxies on the inter-broker listener."""

    def __init__(self, cluster: LocalCluster, proxies: dict[int, InterBrokerProxy]) -> None:
        self.cluster = cluster
        self.proxies = proxies

    def isolate(self, node_id: int) -> None:
        self.proxies[node_id].refuse(None)
        for other, proxy in self.proxies.items():
            if other != node_id:
                proxy.refuse({node_id})

    def heal(self) -> None:
        for proxy in self.proxies.values():
            proxy.allow_all()


@pytest.fixture(scope="module")
def proxied_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedCluster]:
    configs = {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
               "replica.lag.time.max.ms": str(REPLICA_LAG_MS)}
    cluster = LocalCluster(tmp_path_factory.mktemp("nemesis"), brokers=3, configs=configs,
                           zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS)
    proxies: dict[int, InterBrokerProxy] = {}
    try:
        cluster.zookeeper.start()
        ports = iter(free_ports(6))
        for node_id in (1, 2, 3):
            port, internal = next(ports), next(ports)
            proxies[node_id] = InterBrokerProxy(internal).start()
            cluster.brokers[node_id] = BrokerProcess(
                node_id, cluster.directory / f"broker-{node_id}",
                cluster.zookeeper.connect_string, port, internal,
                {**configs, "advertised.listeners":
                 f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{proxies[node_id].port}"})
        cluster.start()
        yield ProxiedCluster(cluster, proxies)
    finally:
        for proxy in proxies.values():
            proxy.allow_all()
        cluster.stop()
        for proxy in proxies.values():
            proxy.stop()


@pytest.fixture
def zookeeper(proxied_cluster: ProxiedCluster) -> Iterator[ZooKeeperView]:
    with ZooKeeperView(proxied_cluster.cluster.zookeeper.connect_string) as view:
        yield view


def test_nothing_acknowledged_is_lost_whatever_the_nemesis_does(proxied_cluster, zookeeper):
    cluster = proxied_cluster.cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3,
                                  config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    wait_for(lambda: full_isr(admin, TOPIC), "the topic's ISRs are full")
    rng = random.Random(4242)
    workload = Workload(cluster.bootstrap_servers, TOPIC).start()
    reader = GroupReader(cluster.bootstrap_servers, TOPIC).start()
    faults: dict[str, int] = defaultdict(int)
    try:
        time.sleep(2)
        for kind in FAULTS:
            victim_id = rng.choice(sorted(set(leaders(admin, TOPIC).values()) - {-1}))
            victim = cluster.brokers[victim_id]
            if kind == "kill -9":
                victim.kill()
                wait_for(lambda: zookeeper.replaced(victim_id, TOPIC),
                         f"broker {victim_id} replaced after its kill", LEAVE_S)
                victim.start()
            elif kind == "SIGTERM":
                stopping = threading.Thread(target=victim.stop, daemon=True)
                stopping.start()
                stopping.join(90)
                victim.start()
            elif kind == "pause":
                # A short pause keeps the broker's ZooKeeper session.
                victim.pause()
                time.sleep(2)
                victim.resume()
            elif kind == "long pause":
                # A long one outlasts it: the broker wakes up replaced as leader, registers
                # again and catches up.
                victim.pause()
                wait_for(lambda: zookeeper.replaced(victim_id, TOPIC),
                         f"broker {victim_id} replaced while paused", LEAVE_S)
                victim.resume()
            elif kind == "isolate":
                proxied_cluster.isolate(victim_id)
                wait_for(lambda: zookeeper.cut_off(victim_id, TOPIC),
                         f"broker {victim_id} cut off in every ISR", REPLICA_LAG_MS / 1000 + 30)
                proxied_cluster.heal()
            elif kind == "zookeeper restart":
                cluster.zookeeper.kill()
                time.sleep(2)
                cluster.zookeeper.start()
            faults[kind] += 1
            wait_for(lambda: zookeeper.full_isr(TOPIC), f"every ISR full after {kind}")
        time.sleep(2)
        workload.stop()
        acknowledged = sum(map(len, workload.acknowledged.values()))
        # The group kept reading through every fault: it gets to the end of what was written.
        wait_for(lambda: reader.caught_up(acknowledged), "the group read every value", 60)
    finally:
        proxied_cluster.heal()
        remaining = workload.stop()
        reader.stop()
    assert remaining == 0, f"{remaining} values never answered"
    result = check_topic(cluster.bootstrap_servers,
                         {i: b.data_dir for i, b in cluster.brokers.items()},
                         TOPIC, PARTITIONS, workload)
    print(f"\nfaults {dict(faults)}; {result}; producer errors {len(workload.failed)}; "
          f"consumed {reader.consumed}")
    assert sum(faults.values()) == len(FAULTS)
    assert result.acknowledged > 1000
    assert result.ok, str(result)
    for partition, offsets in reader.committed.items():
        assert offsets == sorted(offsets), f"partition {partition} committed offsets went back"
    assert workload.failed == []
    assert sum(map(len, workload.acknowledged.values())) == len(workload.attempted)
