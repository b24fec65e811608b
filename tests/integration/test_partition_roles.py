"""A running broker applies the partition states its metadata store publishes: a partition
whose leadership moves to another broker refuses produces, fetches and ListOffsets with
NOT_LEADER_OR_FOLLOWER, and serves them again with its data when the leadership comes back
at a new epoch; an ``__consumer_offsets`` partition's groups are unloaded and loaded with it.

The single-node store never moves a leader by itself, so the test publishes the event a
controller's decision would produce."""

from __future__ import annotations

import confluent_kafka
from kio.schema.errors import ErrorCode

from odradek.coordinator.group.offsets_topic import OFFSETS_TOPIC, partition_for
from odradek.metadata.model import PartitionState
from odradek.metadata.store import PartitionStatesChanged
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build
from odradek.protocol.records import Record, build_batch
from odradek.protocol.topic_partition import TopicPartition

OTHER_BROKER = 1
TIMEOUT_SECONDS = 10


def move_leader(odradek_broker, topic: str, partition: int, leader: int, epoch: int) -> None:
    """Publishes what the controller would: ``partition`` of ``topic`` led by ``leader``, with
    both brokers in the ISR when the other one leads, and this one alone when it leads again
    (the other one fell out of the ISR, so acks=-1 needs no follower)."""
    store = odradek_broker.broker.metadata
    me = odradek_broker.broker.node_id
    isr = (me,) if leader == me else (me, OTHER_BROKER)
    state = PartitionState(partition, leader, epoch, (me, OTHER_BROKER), isr,
                           partition_epoch=epoch)

    async def publish() -> None:
        store._publish(PartitionStatesChanged(store.topic(topic), (state,)))

    odradek_broker.call(publish())


def answer(odradek_broker, api_key: ApiKey, version: int, **body):
    async def handle():
        response = odradek_broker.handle(api_key, version, build(request_class(api_key, version),
                                                                 **body))
        return await response if hasattr(response, "__await__") else response

    return odradek_broker.call(handle())


def produce_error(odradek_broker, topic: str) -> ErrorCode:
    response = answer(odradek_broker, ApiKey.PRODUCE, 9, transactional_id=None, acks=-1,
                      timeout=5_000, topic_data=[{"name": topic, "partition_data": [
                          {"index": 0, "records": build_batch([Record(0, 0, None, b"v")])}]}])
    return response.responses[0].partition_responses[0].error_code


def fetch_error(odradek_broker, topic: str) -> ErrorCode:
    response = answer(odradek_broker, ApiKey.FETCH, 12, replica_id=-1, max_wait=0, min_bytes=1,
                      max_bytes=2**20, isolation_level=0, session_id=0, session_epoch=-1,
                      forgotten_topics_data=(), rack_id="", topics=[{
                          "topic": topic, "partitions": [{
                              "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                              "last_fetched_epoch": -1, "log_start_offset": -1,
                              "partition_max_bytes": 2**20}]}])
    return response.responses[0].partitions[0].error_code


def list_offsets_error(odradek_broker, topic: str) -> ErrorCode:
    response = answer(odradek_broker, ApiKey.LIST_OFFSETS, 7, replica_id=-1, isolation_level=0,
                      topics=[{"name": topic, "partitions": [
                          {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}])
    return response.topics[0].partitions[0].error_code


def test_a_partition_led_elsewhere_refuses_clients_and_serves_them_again_when_it_returns(
        odradek_broker, create_topic, bootstrap):
    topic = create_topic("roles")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for value in (b"a", b"b"):
        producer.produce(topic, value, partition=0)
    assert producer.flush(TIMEOUT_SECONDS) == 0
    log = odradek_broker.broker.replica_manager.get_partition(TopicPartition(topic, 0)).log

    move_leader(odradek_broker, topic, 0, OTHER_BROKER, epoch=1)
    assert produce_error(odradek_broker, topic) is ErrorCode.not_leader_or_follower
    assert fetch_error(odradek_broker, topic) is ErrorCode.not_leader_or_follower
    assert list_offsets_error(odradek_broker, topic) is ErrorCode.not_leader_or_follower

    move_leader(odradek_broker, topic, 0, odradek_broker.broker.node_id, epoch=2)
    assert produce_error(odradek_broker, topic) is ErrorCode.none
    assert fetch_error(odradek_broker, topic) is ErrorCode.none
    # The same log, which now knows that epoch 2 began after the two records.
    assert log.leader_epoch_cache.end_offset_for(0, log.log_end_offset) == (0, 2)
    assert log.leader_epoch_cache.latest_epoch == 2
    assert log.log_end_offset == 3


def test_a_groups_coordinator_moves_with_its_offsets_partition(odradek_broker, bootstrap,
                                                               create_topic):
    topic = create_topic("committed")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "roles",
                                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 42)],
                        asynchronous=False)
    finally:
        consumer.close()
    offsets = odradek_broker.broker.metadata.topic(OFFSETS_TOPIC)
    partition = partition_for("roles", len(offsets.partitions))

    def committed() -> tuple[ErrorCode, int]:
        response = answer(odradek_broker, ApiKey.OFFSET_FETCH, 7, group_id="roles",
                          topics=[{"name": topic, "partition_indexes": [0]}],
                          require_stable=False)
        return response.error_code, response.topics[0].partitions[0].committed_offset \
            if response.topics else -1

    move_leader(odradek_broker, OFFSETS_TOPIC, partition, OTHER_BROKER, epoch=1)
    assert committed()[0] is ErrorCode.not_coordinator
    move_leader(odradek_broker, OFFSETS_TOPIC, partition, odradek_broker.broker.node_id, epoch=2)
    assert committed() == (ErrorCode.none, 42)
