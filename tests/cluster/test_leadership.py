"""Leadership and metadata across a cluster of broker processes: preferred leaders come
back on their own after a broker returns (``auto.leader.rebalance.enable``), ElectLeaders
goes to the controller, every broker answers Metadata the same way, a topic config change
reaches every broker, a broker's dynamic configs are kept in ZooKeeper across its restart,
``__consumer_offsets`` is replicated on all three, and a deleted topic leaves every
broker's disk."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka._model import ElectionType
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from odradek.cluster.local import LocalCluster
from workload import SESSION_TIMEOUT_MS, wait_for

CHECK_INTERVAL_S = 2
WAIT_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("leadership"), brokers=3,
                      zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS,
                      configs={"leader.imbalance.check.interval.seconds":
                               str(CHECK_INTERVAL_S)}) as started:
        yield started


def partitions(bootstrap: str, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
    return {p: (m.leader, tuple(m.replicas), tuple(m.isrs))
            for p, m in metadata.topics[topic].partitions.items()}


def create(cluster: LocalCluster, topic: str, count: int) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, count, 3)])[topic].result(30)
    wait_for(lambda: all(len(isr) == 3 for _, _, isr in
                         partitions(cluster.bootstrap_servers, topic).values()), "full ISRs")
    return admin


def test_preferred_leaders_come_back_after_a_broker_returns(cluster):
    create(cluster, "rebalanced", 6)
    broker = cluster.brokers[2]
    broker.stop()  # a controlled shutdown: its leaderships move away
    view = partitions(cluster.bootstrap_servers, "rebalanced")
    assert all(leader != 2 for leader, _, _ in view.values())
    broker.start()
    wait_for(lambda: all(leader == replicas[0] and len(isr) == 3 for leader, replicas, isr
                         in partitions(cluster.bootstrap_servers, "rebalanced").values()),
             "every partition led by its preferred replica again", WAIT_S)


def test_elect_leaders_goes_to_the_controller(cluster):
    admin = create(cluster, "elected", 3)
    wait_for(lambda: all(leader == replicas[0] for leader, replicas, _ in
                         partitions(cluster.bootstrap_servers, "elected").values()),
             "preferred leaders")
    results = admin.elect_leaders(ElectionType.PREFERRED, [
        TopicPartition("elected", p) for p in (0, 1, 2, 5)]).result(30)
    codes = {tp.partition: error.code() if error else None for tp, error in results.items()}
    assert codes == {0: KafkaError.ELECTION_NOT_NEEDED, 1: KafkaError.ELECTION_NOT_NEEDED,
                     2: KafkaError.ELECTION_NOT_NEEDED, 5: KafkaError.UNKNOWN_TOPIC_OR_PART}


def test_every_broker_gives_the_same_metadata(cluster):
    create(cluster, "agreed", 4)
    views = [partitions(b.bootstrap, "agreed") for b in cluster.brokers.values()]
    assert views[0] == views[1] == views[2]
    controllers = {AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(
        timeout=5).controller_id for b in cluster.brokers.values()}
    assert len(controllers) == 1 and controllers <= set(cluster.brokers)


def test_a_topic_config_change_reaches_every_broker(cluster):
    admin = create(cluster, "configured", 1)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "configured",
                              set_config={"retention.ms": "123456"})
    admin.alter_configs([resource])[resource].result(30)

    def everywhere() -> bool:
        for broker in cluster.brokers.values():
            one = AdminClient({"bootstrap.servers": broker.bootstrap})
            described = one.describe_configs([ConfigResource(
                ConfigResource.Type.TOPIC, "configured")])
            configs = next(iter(described.values())).result(10)
            if configs["retention.ms"].value != "123456":
                return False
        return True

    wait_for(everywhere, "every broker describes the new retention.ms", 10)


def test_a_deleted_topic_leaves_every_broker(cluster):
    admin = create(cluster, "doomed", 3)
    data_dirs = [b.data_dir for b in cluster.brokers.values()]
    # The topic exists once the controller has written it; each follower makes its replica
    # when it hears of it.
    wait_for(lambda: all(any(d.glob("doomed-*")) for d in data_dirs),
             "every broker made its replicas of the topic", 20)
    admin.delete_topics(["doomed"])["doomed"].result(30)
    wait_for(lambda: not any(any(d.glob("doomed-*")) for d in data_dirs),
             "every broker removed its replicas of the topic", 20)
    for broker in cluster.brokers.values():
        topics = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(
            timeout=5).topics
        assert "doomed" not in topics


def test_the_offsets_topic_is_replicated_on_every_broker(cluster):
    create(cluster, "grouped", 1)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["grouped"])
        wait_for(lambda: consumer.poll(0.2) is None and consumer.assignment(),
                 "the group has its assignment")
    finally:
        consumer.close()
    offsets = partitions(cluster.bootstrap_servers, "__consumer_offsets")
    assert len(offsets) == 50
    assert all(len(replicas) == 3 for _, replicas, _ in offsets.values())


def test_a_broker_config_is_kept_in_zookeeper_across_a_restart(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.BROKER, "2",
                              set_config={"log.retention.ms": "7200000"})
    admin.alter_configs([resource])[resource].result(30)
    broker = cluster.brokers[2]
    broker.stop()
    broker.start()

    def retention_ms() -> str:
        one = AdminClient({"bootstrap.servers": broker.bootstrap})
        described = one.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "2")])
        return next(iter(described.values())).result(10)["log.retention.ms"].value

    wait_for(lambda: retention_ms() == "7200000", "the restarted broker has its config", 30)
