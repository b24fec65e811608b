"""Consumer groups as applications run them: members share a topic's partitions, a member
that dies or stops polling loses them to the others without losing records, and committed
offsets survive a broker restart, with confluent-kafka (kafka-python and aiokafka:
test_groups_python_clients.py)."""

from __future__ import annotations

import time
from collections import Counter

import confluent_kafka
import confluent_kafka.admin
import pytest
from group_members import (
    BROKER_CONFIGS,
    DoomedMember,
    FAST_GROUP,
    GROUP_TIMEOUT_SECONDS,
    Member,
    committed_offsets,
    owns_all,
    poll_until,
    produce,
)

pytestmark = pytest.mark.odradek_config(**BROKER_CONFIGS)

PARTITIONS = 6


def consumed_values(*members: Member) -> Counter:
    return Counter(m.value() for member in members for m in member.records)


def test_three_members_share_the_partitions_and_each_record_is_consumed_once(
        bootstrap, create_topic):
    topic = create_topic("shared", partitions=PARTITIONS)
    members = [Member(bootstrap, "sharing", topic, f"m{i}") for i in range(3)]
    try:
        poll_until(members, owns_all(members, PARTITIONS), what="one owner per partition")
        assert all(len(m.owned) == 2 for m in members)  # range: two partitions each

        values = produce(bootstrap, topic, PARTITIONS, 600)
        poll_until(members, lambda: len(consumed_values(*members)) == len(values))

        assert consumed_values(*members) == Counter(values)  # every record, once
        for member in members:  # each partition's records went to its owner only
            assert {m.partition() for m in member.records} == member.owned
    finally:
        for member in members:
            member.close()


_KILLED_MEMBER = """
import sys, confluent_kafka
consumer = confluent_kafka.Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
    "client.id": "doomed", "auto.offset.reset": "earliest", "enable.auto.commit": False,
    "session.timeout.ms": 2000, "heartbeat.interval.ms": 300})
consumer.subscribe([sys.argv[3]], on_assign=lambda c, ps: print(
    "assigned", *(p.partition for p in ps), flush=True))
while True:
    message = consumer.poll(0.05)
    if message is not None and not message.error():
        print("consumed", message.value().decode(), flush=True)
        consumer.commit(message, asynchronous=False)
"""


def test_a_killed_members_partitions_move_after_its_session_timeout_and_no_record_is_lost(
        bootstrap, create_topic):
    topic = create_topic("survivors", partitions=PARTITIONS)
    doomed = DoomedMember(_KILLED_MEMBER, bootstrap, "killing", topic)
    members = [Member(bootstrap, "killing", topic, f"m{i}") for i in range(2)]
    try:
        poll_until(members, lambda: sum(len(m.owned) for m in members) == 4 and doomed.owned,
                   what="three members")
        values = produce(bootstrap, topic, PARTITIONS, 300)
        poll_until(members, lambda: len(doomed.consumed) >= 20,
                   what="the doomed member consuming")
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        committed_before = committed_offsets(admin, "killing", topic, PARTITIONS)

        doomed.kill()  # no LeaveGroup: only its session can end it
        killed_at = time.monotonic()
        poll_until(members, owns_all(members, PARTITIONS), what="its partitions moving")
        moved_after = time.monotonic() - killed_at
        poll_until(members, lambda: values <= set(consumed_values(*members))
                   | set(doomed.consumed))

        assert moved_after < 2.0 + 3.0  # session.timeout.ms of the killed member, and slack
        poll_until(members, lambda: sum(committed_offsets(
            admin, "killing", topic, PARTITIONS).values()) == len(values),
            what="every record committed")
        committed_after = committed_offsets(admin, "killing", topic, PARTITIONS)
        assert all(committed_after[p] >= committed_before[p] for p in committed_before)
    finally:
        doomed.close()
        for member in members:
            member.close()


def test_a_member_that_stops_polling_loses_its_partitions_after_max_poll_interval(
        bootstrap, create_topic):
    topic = create_topic("stalled", partitions=PARTITIONS)
    config = {"max.poll.interval.ms": 6000}  # librdkafka: at least session.timeout.ms
    active, stalled = (Member(bootstrap, "stalling", topic, name, **config)
                       for name in ("active", "stalled"))
    try:
        poll_until([active, stalled], owns_all([active, stalled], PARTITIONS))
        stalled_at = time.monotonic()
        poll_until([active], lambda: active.owned == set(range(PARTITIONS)),
                   what="the stalled member's partitions moving")
        assert time.monotonic() - stalled_at >= 5.0  # not before max.poll.interval.ms
    finally:
        active.close()
        stalled.close()


def test_cooperative_sticky_members_move_only_the_partitions_that_change_owner(
        bootstrap, create_topic):
    topic = create_topic("cooperative", partitions=PARTITIONS)
    config = {"partition.assignment.strategy": "cooperative-sticky"}
    first, second = (Member(bootstrap, "incremental", topic, f"m{i}", **config)
                     for i in range(2))
    third = None
    try:
        poll_until([first, second], owns_all([first, second], PARTITIONS))
        kept = {id(m): set(m.owned) for m in (first, second)}
        values = produce(bootstrap, topic, PARTITIONS, 300)

        third = Member(bootstrap, "incremental", topic, "m2", **config)
        members = [first, second, third]
        poll_until(members, lambda: owns_all(members, PARTITIONS)() and len(third.owned) == 2)
        poll_until(members, lambda: set(consumed_values(*members)) >= values)

        for member in (first, second):  # sticky: each kept all but what went to the third
            assert member.owned <= kept[id(member)] and len(member.owned) == 2
    finally:
        for member in (first, second, third):
            if member is not None:
                member.close()


def test_a_static_member_restarting_within_its_session_rejoins_without_a_rebalance(
        odradek_broker, bootstrap, create_topic):
    topic = create_topic("static", partitions=PARTITIONS)
    static_config = {"group.instance.id": "pod-1", "session.timeout.ms": 10000}
    other = Member(bootstrap, "statics", topic, "other")
    static = Member(bootstrap, "statics", topic, "static", **static_config)
    restarted = None
    try:
        poll_until([other, static], owns_all([other, static], PARTITIONS))
        owned_before = set(static.owned)
        group = odradek_broker.broker.group_coordinator.manager.groups["statics"]
        generation = group.generation_id
        static.close()  # a static member does not leave the group when it closes

        restarted = Member(bootstrap, "statics", topic, "static", **static_config)
        poll_until([other, restarted], lambda: restarted.owned == owned_before)

        assert group.generation_id == generation  # no rebalance
        assert other.assignments == 1  # the other member never had to rejoin
    finally:
        other.close()
        if restarted is not None:
            restarted.close()


def test_committed_offsets_and_their_metadata_survive_a_broker_restart(
        odradek_broker, create_topic):
    bootstrap = odradek_broker.bootstrap_servers
    topic = create_topic("remembered", partitions=2)
    produce(bootstrap, topic, 2, 10)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "durable",
                                         "enable.auto.commit": False, **FAST_GROUP})
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 3, metadata="checkpoint-a"),
                             confluent_kafka.TopicPartition(topic, 1, 4)], asynchronous=False)
    consumer.close()

    odradek_broker.restart()

    bootstrap = odradek_broker.bootstrap_servers
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.list_consumer_group_offsets(
        [confluent_kafka.ConsumerGroupTopicPartitions("durable")]).values()
    committed = {(tp.partition, tp.offset, tp.metadata)
                 for tp in future.result(GROUP_TIMEOUT_SECONDS).topic_partitions}
    assert committed == {(0, 3, "checkpoint-a"), (1, 4, None)}  # librdkafka: "" is None
    resumed = Member(bootstrap, "durable", topic, "resumed")
    try:
        poll_until([resumed], lambda: len(resumed.records) == 10 - 3 - 4)
        assert sorted((m.partition(), m.offset()) for m in resumed.records) == [
            (0, 3), (0, 4), (1, 4)]
    finally:
        resumed.close()
