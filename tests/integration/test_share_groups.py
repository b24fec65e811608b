"""Share groups (KIP-932, queues for Kafka) with confluent-kafka's ``ShareConsumer``: members
of one group read the same partition, each record going to one of them at a time; a record
released, or whose lock ends, goes to another with its delivery count raised; a rejected
record, or one delivered too often, is archived; a killed member loses nothing; and what
was acknowledged stays acknowledged across a broker restart."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter

import confluent_kafka
import pytest
from conftest import create_topic as create_topic_on
from group_members import GROUP_TIMEOUT_SECONDS, wait_until
from raw_client import RawClient

from odradek.cluster.local import free_ports
from odradek.protocol.api import ApiKey
from odradek.protocol.records import iter_batches
from odradek.testing.embedded import EmbeddedBroker

LOCK_MS = 2000
DELIVERY_LIMIT = 3
SHARE_CONFIGS = {
    "offsets_topic_num_partitions": 2,
    "share_coordinator_state_topic_num_partitions": 2,
    "share_auto_offset_reset": "earliest",
    "group_share_min_record_lock_duration_ms": 1000,
    "group_share_record_lock_duration_ms": LOCK_MS,
    "group_share_delivery_count_limit": DELIVERY_LIMIT,
    "group_share_min_heartbeat_interval_ms": 100,
    "group_share_heartbeat_interval_ms": 500,
}

pytestmark = pytest.mark.odradek_config(**SHARE_CONFIGS)

ACCEPT, RELEASE, REJECT = (confluent_kafka.AcknowledgeType.ACCEPT,
                           confluent_kafka.AcknowledgeType.RELEASE,
                           confluent_kafka.AcknowledgeType.REJECT)


def share_consumer(bootstrap: str, group: str, topic: str, *, explicit: bool = False,
                   **config) -> confluent_kafka.ShareConsumer:
    consumer = confluent_kafka.ShareConsumer({
        "bootstrap.servers": bootstrap, "group.id": group,
        "share.acknowledgement.mode": "explicit" if explicit else "implicit", **config})
    consumer.subscribe([topic])
    return consumer


def poll(consumer: confluent_kafka.ShareConsumer, timeout: float = 0.2) -> list:
    messages = consumer.poll(timeout)
    for message in messages:
        if message.error():
            raise confluent_kafka.KafkaException(message.error())
    return list(messages)


def poll_until_some(consumer, timeout: float = GROUP_TIMEOUT_SECONDS) -> list:
    got: list = []
    wait_until(lambda: bool(got), timeout, "records", step=lambda: got.extend(poll(consumer)))
    return got


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> list[bytes]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    values = [f"r{i}".encode() for i in range(start, start + count)]
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(GROUP_TIMEOUT_SECONDS) == 0
    return values


def start_offset(port: int, group: str, topic: str) -> int:
    with RawClient(port) as raw:
        answer = raw.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, groups=[
            {"group_id": group, "topics": [{"topic_name": topic, "partitions": [0]}]}])
    [described] = answer.groups
    [row] = described.topics[0].partitions
    assert row.error_code == 0
    return row.start_offset


def close(consumers) -> None:
    for consumer in consumers:
        consumer.close()


def test_share_consumers_on_one_partition_each_get_distinct_records(
        odradek_broker, create_topic):
    bootstrap = odradek_broker.bootstrap_servers
    topic = create_topic("queue")
    consumers = [share_consumer(bootstrap, "workers", topic, **{"max.poll.records": 10})
                 for _ in range(3)]
    received: dict[int, list[bytes]] = {i: [] for i in range(3)}
    stop = threading.Event()

    def trickle() -> None:  # records keep arriving, as into a queue
        for start in range(0, 300, 10):
            if stop.is_set():
                return
            produce(bootstrap, topic, 10, start)
            time.sleep(0.02)

    producer = threading.Thread(target=trickle)
    producer.start()
    try:
        def step() -> None:
            for i, consumer in enumerate(consumers):
                received[i].extend(m.value() for m in poll(consumer, 0.05))

        wait_until(lambda: sum(map(len, received.values())) >= 300, what="300 records",
                   step=step)
        for consumer in consumers:  # the last poll's records are accepted by a commit
            consumer.commit_sync(GROUP_TIMEOUT_SECONDS)
        everything = Counter(v for values in received.values() for v in values)
        assert everything == Counter(f"r{i}".encode() for i in range(300))  # each once
        assert sum(1 for values in received.values() if values) >= 2  # shared out
        assert start_offset(odradek_broker.port, "workers", topic) == 300  # all accepted
    finally:
        stop.set()
        producer.join()
        close(consumers)


def test_a_released_record_goes_to_another_member_with_its_delivery_count_raised(
        bootstrap, create_topic):
    topic = create_topic("released")
    produce(bootstrap, topic, 5)
    first, second = (share_consumer(bootstrap, "releasing", topic, explicit=True)
                     for _ in range(2))
    try:
        given = poll_until_some(first)
        assert {m.delivery_count() for m in given} == {1}
        for message in given:
            first.acknowledge(message, RELEASE)
        first.commit_sync(GROUP_TIMEOUT_SECONDS)

        again = poll_until_some(second)
        assert sorted(m.offset() for m in again) == sorted(m.offset() for m in given)
        assert {m.delivery_count() for m in again} == {2}
        for message in again:
            second.acknowledge(message, ACCEPT)
        second.commit_sync(GROUP_TIMEOUT_SECONDS)
    finally:
        close([first, second])


def test_a_record_whose_lock_ends_is_delivered_again_to_another_member(
        bootstrap, create_topic):
    topic = create_topic("locked")
    produce(bootstrap, topic, 3)
    holder, other = (share_consumer(bootstrap, "locking", topic, explicit=True)
                     for _ in range(2))
    try:
        held = poll_until_some(holder)  # and never acknowledged
        taken_at = time.monotonic()
        again = poll_until_some(other)
        assert time.monotonic() - taken_at >= LOCK_MS / 1000 - 0.5  # not before the lock ends
        assert sorted(m.offset() for m in again) == sorted(m.offset() for m in held)
        assert {m.delivery_count() for m in again} == {2}
    finally:
        close([holder, other])


def test_rejected_records_and_records_delivered_too_often_are_archived(
        odradek_broker, create_topic):
    bootstrap = odradek_broker.bootstrap_servers
    topic = create_topic("poison")
    produce(bootstrap, topic, 2)  # r0 is rejected; r1 fails every time
    consumer = share_consumer(bootstrap, "archiving", topic, explicit=True)
    deliveries: Counter = Counter()
    try:
        def step() -> None:
            for message in poll(consumer):
                deliveries[message.value()] += 1
                consumer.acknowledge(message, REJECT if message.offset() == 0 else RELEASE)
            consumer.commit_sync(GROUP_TIMEOUT_SECONDS)

        wait_until(lambda: deliveries[b"r1"] >= DELIVERY_LIMIT, what="the delivery limit",
                   step=step)
        produce(bootstrap, topic, 1, start=2)
        wait_until(lambda: deliveries[b"r2"] >= 1, what="the next record", step=step)

        assert deliveries == {b"r0": 1, b"r1": DELIVERY_LIMIT, b"r2": 1}  # never again
        assert start_offset(odradek_broker.port, "archiving", topic) == 2  # both archived
    finally:
        consumer.close()


_KILLED_MEMBER = """
import sys, confluent_kafka
consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": sys.argv[1],
    "group.id": sys.argv[2], "share.acknowledgement.mode": "explicit"})
consumer.subscribe([sys.argv[3]])
while True:
    for message in consumer.poll(0.2):
        if not message.error():
            print("acquired", message.offset(), flush=True)
    # never acknowledged: the process is killed holding its records
"""


def test_a_member_killed_holding_records_loses_none_of_them(bootstrap, create_topic):
    topic = create_topic("killed")
    values = produce(bootstrap, topic, 50)
    doomed = subprocess.Popen([sys.executable, "-c", _KILLED_MEMBER, bootstrap, "survivors",
                               topic], stdout=subprocess.PIPE, text=True)
    survivor = None
    try:
        first_line = doomed.stdout.readline()
        assert first_line.startswith("acquired"), first_line
        doomed.kill()
        doomed.wait(GROUP_TIMEOUT_SECONDS)
        survivor = share_consumer(bootstrap, "survivors", topic)
        got: list = []
        wait_until(lambda: len({m.value() for m in got}) == len(values),
                   what="every record", step=lambda: got.extend(poll(survivor)))
        assert {m.value() for m in got} == set(values)
        assert max(m.delivery_count() for m in got) == 2  # the killed member's, again
    finally:
        doomed.kill()
        doomed.wait(GROUP_TIMEOUT_SECONDS)
        if survivor is not None:
            survivor.close()


def restartable_broker(tmp_path) -> EmbeddedBroker:
    """A broker with SHARE_CONFIGS on a port of its own, kept across a restart: clients
    reconnect where they were."""
    [port] = free_ports(1)
    return EmbeddedBroker(tmp_path, **SHARE_CONFIGS, listeners=f"PLAINTEXT://127.0.0.1:{port}")


def accept_below(consumer: confluent_kafka.ShareConsumer, offset: int) -> set[int]:
    """Polls until it gets records, accepts those below ``offset``, releases the others
    and commits; returns the offsets accepted."""
    accepted = set()
    for message in poll_until_some(consumer):
        if message.offset() < offset:
            consumer.acknowledge(message, ACCEPT)
            accepted.add(message.offset())
        else:
            consumer.acknowledge(message, RELEASE)
    consumer.commit_sync(GROUP_TIMEOUT_SECONDS)
    return accepted


def test_acknowledged_records_stay_acknowledged_across_a_broker_restart(tmp_path):
    with restartable_broker(tmp_path) as broker:
        bootstrap = broker.bootstrap_servers
        topic = create_topic_on(broker, "durable")
        produce(bootstrap, topic, 20)
        consumer = share_consumer(bootstrap, "durable", topic, explicit=True)
        try:
            accepted = accept_below(consumer, 10)  # accept the first ten, hold the rest
        finally:
            consumer.close()
        assert accepted == set(range(10))

        broker.restart()
        assert start_offset(broker.port, "durable", topic) == 10  # read back from the log
        consumer = share_consumer(bootstrap, "durable", topic)
        try:
            got: list = []
            wait_until(lambda: len(got) >= 10, what="the unacknowledged records",
                       step=lambda: got.extend(poll(consumer)))
            assert sorted(m.offset() for m in got) == list(range(10, 20))  # none again
        finally:
            consumer.close()


def test_share_session_errors_are_kafkas(odradek_broker, create_topic):
    topic = create_topic("sessions")
    topic_id = odradek_broker.broker.metadata.topic(topic).topic_id
    with RawClient(odradek_broker.port) as raw:
        raw.wait_for_coordinator("sessions")

        def share_fetch(epoch: int, **fields):
            return raw.request(ApiKey.SHARE_FETCH, 1, **{
                "group_id": "sessions", "member_id": "m1", "share_session_epoch": epoch,
                "max_wait": 0, "min_bytes": 1, "max_records": 10, "batch_size": 10,
                "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition_index": 0, "acknowledgement_batches": []}]}],
                "forgotten_topics_data": [], **fields})

        assert share_fetch(3).error_code == 122  # SHARE_SESSION_NOT_FOUND
        assert share_fetch(0).error_code == 0  # opens the session; its next epoch is 1
        assert share_fetch(5).error_code == 123  # INVALID_SHARE_SESSION_EPOCH
        acknowledged = share_fetch(1, topics=[{"topic_id": topic_id, "partitions": [{
            "partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]}])
        [partition] = acknowledged.responses[0].partitions
        assert partition.acknowledge_error_code == 121  # INVALID_RECORD_STATE: never delivered


def test_a_share_fetch_carries_only_the_batches_holding_what_it_acquired(odradek_broker,
                                                                         create_topic):
    """Twenty one-record batches, a fetch that may take three: three come, in their batches,
    not all that the broker read."""
    topic = create_topic("sliced")
    topic_id = odradek_broker.broker.metadata.topic(topic).topic_id
    producer = confluent_kafka.Producer({"bootstrap.servers": odradek_broker.bootstrap_servers})
    for i in range(20):  # flushed one by one: a batch each
        producer.produce(topic, b"r%d" % i, partition=0)
        assert producer.flush(GROUP_TIMEOUT_SECONDS) == 0
    with RawClient(odradek_broker.port) as raw:
        raw.wait_for_coordinator("sliced")
        answer = raw.request(ApiKey.SHARE_FETCH, 1, **{
            "group_id": "sliced", "member_id": "m1", "share_session_epoch": 0,
            "max_wait": 5000, "min_bytes": 1, "max_records": 3, "batch_size": 3,
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": []}]}],
            "forgotten_topics_data": []})
    [partition] = answer.responses[0].partitions
    assert [(a.first_offset, a.last_offset) for a in partition.acquired_records] == [(0, 2)]
    assert [(b.base_offset, b.next_offset) for b in iter_batches(partition.records)] == [
        (0, 1), (1, 2), (2, 3)]
