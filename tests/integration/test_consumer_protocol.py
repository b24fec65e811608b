"""Consumer groups of the KIP-848 protocol (``group.protocol=consumer``) as applications run
them with confluent-kafka, on a broker that serves classic groups at the same time: members
share the partitions, a member joining takes only what it gets (the others keep consuming
the rest), a killed or stalled member's partitions move without losing records, a static
member comes back to its partitions, a regular expression follows new topics, the group
outlives a broker restart, and an empty group changes protocol with its offsets."""

from __future__ import annotations

import time
from collections import Counter

import confluent_kafka
import confluent_kafka.admin
import pytest
from group_members import (
    BROKER_CONFIGS,
    CONSUMER_PROTOCOL,
    CONSUMER_PROTOCOL_CONFIGS,
    GROUP_TIMEOUT_SECONDS,
    DoomedMember,
    Member,
    committed_offsets,
    owns_all,
    poll_until,
    produce,
)
from conftest import create_topic as create_topic_on
from raw_client import RawClient

from odradek.cluster.local import free_ports
from odradek.protocol.api import ApiKey
from odradek.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.odradek_config(**BROKER_CONFIGS, **CONSUMER_PROTOCOL_CONFIGS)

PARTITIONS = 6
SESSION_SECONDS = CONSUMER_PROTOCOL_CONFIGS["group_consumer_session_timeout_ms"] / 1000


def consumed_values(*members: Member) -> Counter:
    return Counter(m.value() for member in members for m in member.records)


def new_members(bootstrap: str, group: str, topic: str, count: int, **config) -> list[Member]:
    return [Member(bootstrap, group, topic, f"{group}-{i}", **CONSUMER_PROTOCOL, **config)
            for i in range(count)]


def close(members) -> None:
    for member in members:
        if member is not None:
            member.close()


def described(bootstrap: str, group: str):
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(GROUP_TIMEOUT_SECONDS)


def test_consumer_protocol_members_share_partitions_beside_a_classic_group(
        bootstrap, create_topic):
    topic = create_topic("shared", partitions=PARTITIONS)
    members = new_members(bootstrap, "modern", topic, 3)
    classic = [Member(bootstrap, "classic", topic, f"classic-{i}") for i in range(3)]
    try:
        poll_until(members + classic,
                   lambda: owns_all(members, PARTITIONS)() and owns_all(classic, PARTITIONS)(),
                   what="one owner per partition in each group")
        assert all(len(m.owned) == 2 for m in members)  # uniform: balanced

        values = produce(bootstrap, topic, PARTITIONS, 600)
        poll_until(members + classic,
                   lambda: len(consumed_values(*members)) == len(values)
                   and len(consumed_values(*classic)) == len(values))

        assert consumed_values(*members) == Counter(values)  # every record, once per group
        assert consumed_values(*classic) == Counter(values)
        for member in members:  # each partition's records went to its owner only
            assert {m.partition() for m in member.records} == member.owned
        types = {group: described(bootstrap, group).type for group in ("modern", "classic")}
        assert types == {"modern": confluent_kafka.ConsumerGroupType.CONSUMER,
                         "classic": confluent_kafka.ConsumerGroupType.CLASSIC}
    finally:
        close(members + classic)


def test_a_fourth_member_takes_partitions_while_the_others_keep_consuming_theirs(
        bootstrap, create_topic):
    topic = create_topic("growing", partitions=8)
    members = new_members(bootstrap, "growing", topic, 3)
    fourth = None
    try:
        poll_until(members, owns_all(members, 8), what="three members")
        kept = {m.name: set(m.owned) for m in members}
        for member in members:  # what the three gave each other while forming
            member.revoked.clear()
        values = produce(bootstrap, topic, 8, 400)

        fourth = Member(bootstrap, "growing", topic, "fourth", **CONSUMER_PROTOCOL)
        everyone = members + [fourth]
        overlaps = []

        def settled() -> bool:
            owned = [p for m in everyone for p in m.owned]
            if len(owned) != len(set(owned)):
                overlaps.append([sorted(m.owned) for m in everyone])
            return owns_all(everyone, 8)() and len(fourth.owned) == 2

        poll_until(everyone, settled, what="the fourth member's share")
        poll_until(everyone, lambda: set(consumed_values(*everyone)) >= values)

        assert not overlaps  # never two owners of a partition, at any poll
        for member in members:
            # Only what moved to the fourth member was revoked: the rest never paused.
            assert member.revoked <= fourth.owned
            assert member.owned == kept[member.name] - member.revoked
    finally:
        close(members + [fourth])


_KILLED_MEMBER = """
import sys, confluent_kafka
consumer = confluent_kafka.Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
    "client.id": "doomed", "auto.offset.reset": "earliest", "enable.auto.commit": False,
    "group.protocol": "consumer"})
owned = set()
def assigned(c, ps):
    owned.update(p.partition for p in ps)
    print("assigned", *sorted(owned), flush=True)
def revoked(c, ps):
    owned.difference_update(p.partition for p in ps)
    print("assigned", *sorted(owned), flush=True)
consumer.subscribe([sys.argv[3]], on_assign=assigned, on_revoke=revoked)
while True:
    message = consumer.poll(0.05)
    if message is not None and not message.error():
        print("consumed", message.value().decode(), flush=True)
        consumer.commit(message, asynchronous=False)
"""


def test_a_killed_members_partitions_move_after_its_session_and_committed_offsets_never_go_back(
        bootstrap, create_topic):
    topic = create_topic("survivors", partitions=PARTITIONS)
    doomed = DoomedMember(_KILLED_MEMBER, bootstrap, "killing", topic)
    members = new_members(bootstrap, "killing", topic, 2)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    try:
        poll_until(members, lambda: owns_all(members + [doomed], PARTITIONS)(),
                   what="three members")
        values = produce(bootstrap, topic, PARTITIONS, 300)
        poll_until(members, lambda: len(doomed.consumed) >= 20,
                   what="the doomed member consuming")
        history = [committed_offsets(admin, "killing", topic, PARTITIONS)]

        doomed.kill()  # no leaving heartbeat: only its session can end it
        killed_at = time.monotonic()
        poll_until(members, owns_all(members, PARTITIONS), what="its partitions moving")
        moved_after = time.monotonic() - killed_at

        def all_committed() -> bool:
            history.append(committed_offsets(admin, "killing", topic, PARTITIONS))
            return sum(history[-1].values()) == len(values)

        poll_until(members, all_committed, what="every record committed")
        assert values <= set(consumed_values(*members)) | set(doomed.consumed)
        assert moved_after < SESSION_SECONDS + 3.0  # the broker's session, and slack
        for before, after in zip(history, history[1:]):
            assert all(after[p] >= before[p] for p in before), (before, after)
    finally:
        doomed.close()
        close(members)


def test_a_member_that_stops_polling_leaves_and_its_partitions_move(bootstrap, create_topic):
    topic = create_topic("stalled", partitions=PARTITIONS)
    active, stalled = new_members(bootstrap, "stalling", topic, 2,
                                  **{"max.poll.interval.ms": 3000})
    try:
        poll_until([active, stalled], owns_all([active, stalled], PARTITIONS))
        stalled_at = time.monotonic()
        poll_until([active], lambda: active.owned == set(range(PARTITIONS)),
                   what="the stalled member's partitions moving")
        assert time.monotonic() - stalled_at >= 2.5  # not before max.poll.interval.ms
    finally:
        close([active, stalled])


def test_a_static_member_restarting_gets_its_partitions_back_without_a_new_group_epoch(
        odradek_broker, bootstrap, create_topic):
    topic = create_topic("static", partitions=PARTITIONS)
    other = Member(bootstrap, "statics", topic, "other", **CONSUMER_PROTOCOL)
    static = Member(bootstrap, "statics", topic, "static", **CONSUMER_PROTOCOL,
                    **{"group.instance.id": "pod-1"})
    restarted = None
    try:
        poll_until([other, static], owns_all([other, static], PARTITIONS))
        owned_before = set(static.owned)
        other.revoked.clear()  # what it gave the static member when that one joined
        group = odradek_broker.broker.group_coordinator.manager.groups["statics"]
        epoch = group.group_epoch
        static.close()  # a static member steps away (epoch -2) rather than leaving

        restarted = Member(bootstrap, "statics", topic, "static", **CONSUMER_PROTOCOL,
                           **{"group.instance.id": "pod-1"})
        poll_until([other, restarted], lambda: restarted.owned == owned_before)

        assert group.group_epoch == epoch  # nothing to reassign
        assert other.revoked == set()  # the other member never gave anything up
    finally:
        close([other, restarted])


def test_a_regular_expression_subscription_follows_new_topics(bootstrap, create_topic):
    create_topic("orders-eu", partitions=2)
    member = Member(bootstrap, "regex", "^orders-.*", "regex", **CONSUMER_PROTOCOL)
    try:
        poll_until([member], lambda: len(member.owned) == 2, what="orders-eu")
        create_topic("orders-us", partitions=2)
        create_topic("refunds", partitions=1)  # not matched
        values = produce(bootstrap, "orders-us", 2, 20)
        poll_until([member], lambda: set(consumed_values(member)) >= values,
                   what="records of the new topic")
        assert {m.topic() for m in member.records} == {"orders-us"}
        assert {(tp.topic, tp.partition) for tp in member.consumer.assignment()} == {
            ("orders-eu", 0), ("orders-eu", 1), ("orders-us", 0), ("orders-us", 1)}
    finally:
        member.close()


def test_the_group_outlives_a_broker_restart(tmp_path):
    # A port of its own, kept across the restart: the members reconnect where they were.
    [port] = free_ports(1)
    configs = {**BROKER_CONFIGS, **CONSUMER_PROTOCOL_CONFIGS,
               "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    with EmbeddedBroker(tmp_path, **configs) as broker:
        bootstrap = broker.bootstrap_servers
        topic = create_topic_on(broker, "durable", partitions=PARTITIONS)
        members = new_members(bootstrap, "durable", topic, 2)
        try:
            poll_until(members, owns_all(members, PARTITIONS))
            group = broker.broker.group_coordinator.manager.groups["durable"]
            before = {m: (v.member_epoch, v.assigned) for m, v in group.members.items()}
            epoch = group.group_epoch

            broker.restart()
            group = broker.broker.group_coordinator.manager.groups["durable"]
            # Read back from __consumer_offsets: the same members, epochs and assignments.
            assert {m: (v.member_epoch, v.assigned) for m, v in group.members.items()} == before
            assert group.group_epoch == epoch

            values = produce(bootstrap, topic, PARTITIONS, 120)
            poll_until(members, lambda: set(consumed_values(*members)) >= values,
                       what="consuming after the restart")
            assert group.group_epoch == epoch  # the members carried on, nobody rejoined
        finally:
            close(members)


def test_an_empty_group_changes_protocol_both_ways_keeping_its_offsets(bootstrap, create_topic):
    topic = create_topic("migrating", partitions=1)
    values = produce(bootstrap, topic, 1, 90)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})

    def consume_thirty(protocol: str) -> list[bytes]:
        member = Member(bootstrap, "migrating", topic, protocol, **{
            "group.protocol": protocol, "enable.auto.commit": False})
        try:
            poll_until([member], lambda: len(member.records) >= 30, what=protocol)
            member.consumer.commit(member.records[29], asynchronous=False)
            return [m.value() for m in member.records[:30]]
        finally:
            member.close()

    got = consume_thirty("classic") + consume_thirty("consumer") + consume_thirty("classic")

    assert got == [f"r{i}".encode() for i in range(90)] and set(got) == values
    assert committed_offsets(admin, "migrating", topic, 1) == {0: 90}


def test_the_errors_of_a_heartbeat_are_kafkas(odradek_broker, create_topic):
    create_topic("errors", partitions=2)
    with RawClient(odradek_broker.port) as raw:
        raw.wait_for_coordinator("errors")

        def heartbeat(member_id: str, epoch: int, **fields):
            return raw.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, **{
                "group_id": "errors", "member_id": member_id, "member_epoch": epoch,
                "rebalance_timeout": 30_000 if epoch == 0 else -1,
                "subscribed_topic_names": ["errors"] if epoch == 0 else None,
                "topic_partitions": [] if epoch == 0 else None, **fields})

        joined = heartbeat("m1", 0, instance_id="pod")
        assert (joined.error_code, joined.member_epoch) == (0, 1)
        assert {p for t in joined.assignment.topic_partitions for p in t.partitions} == {0, 1}
        codes = {
            "greater epoch": heartbeat("m1", 5).error_code,
            "unknown member": heartbeat("nobody", 1).error_code,
            "instance owned by another": heartbeat("m2", 0, instance_id="pod").error_code,
            "no subscription": heartbeat("m3", 0, subscribed_topic_names=[]).error_code,
            "unknown assignor": heartbeat("m4", 0, server_assignor="sticky").error_code,
            "bad regex": heartbeat("m5", 0, subscribed_topic_regex="(").error_code,
        }
        assert codes == {
            "greater epoch": 110,  # FENCED_MEMBER_EPOCH
            "unknown member": 25,  # UNKNOWN_MEMBER_ID
            "instance owned by another": 111,  # UNRELEASED_INSTANCE_ID
            "no subscription": 42,  # INVALID_REQUEST
            "unknown assignor": 112,  # UNSUPPORTED_ASSIGNOR
            "bad regex": 128,  # INVALID_REGULAR_EXPRESSION
        }
        left = heartbeat("m1", -1, instance_id="pod")
        assert (left.error_code, left.member_epoch) == (0, -1)
