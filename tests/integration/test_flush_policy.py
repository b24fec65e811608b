"""flush.messages: what an acknowledgement guarantees about the disk.

The recovery point of a partition's log is the offset below which everything has been
fsynced; these tests read it from the in-process broker after real clients' acks.
"""

from __future__ import annotations

import time

from confluent_kafka import Producer

from odradek.protocol.topic_partition import TopicPartition

TIMEOUT_SECONDS = 10


def produce_acknowledged(bootstrap: str, topic: str, count: int, acks: int) -> list[int]:
    offsets: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                         "log_level": 2})
    for i in range(count):
        producer.produce(topic, b"value-%d" % i,
                         on_delivery=lambda err, msg: offsets.append(msg.offset()) if err is None
                         else None)
        producer.flush(TIMEOUT_SECONDS)  # one batch per record: each is acknowledged alone
    return offsets


def recovery_point(odradek_broker, topic: str) -> int:
    partition = odradek_broker.broker.replica_manager.get_partition(TopicPartition(topic, 0))
    return partition.log.recovery_point


def test_with_flush_messages_1_every_acknowledged_batch_is_already_fsynced(
        odradek_broker, create_topic):
    topic = create_topic("durable", flush_messages=1)

    offsets = produce_acknowledged(odradek_broker.bootstrap_servers, topic, 20, acks=1)

    assert offsets == list(range(20))
    # Each ack came after its fsync: the recovery point covers the last acknowledged offset
    # the moment the producer has seen the ack.
    assert recovery_point(odradek_broker, topic) >= offsets[-1] + 1


def test_with_flush_messages_1_and_acks_0_the_flusher_catches_up(odradek_broker, create_topic):
    topic = create_topic("fire-and-forget", flush_messages=1)
    producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers, "acks": 0,
                         "log_level": 2})
    for i in range(10):
        producer.produce(topic, b"value-%d" % i)
    producer.flush(TIMEOUT_SECONDS)

    deadline = time.monotonic() + TIMEOUT_SECONDS
    while recovery_point(odradek_broker, topic) < 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert recovery_point(odradek_broker, topic) >= 10
