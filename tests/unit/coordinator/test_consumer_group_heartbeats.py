"""The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat), as clients drive it:
members join, heartbeat with what they own, move to their part of the target assignment one
heartbeat at a time, and leave or are fenced; the group lives in ``__consumer_offsets`` and
shares it with the classic protocol (commits, conversions, deletion).

The clients are :class:`Consumer`, a model of the Java consumer: it joins with epoch 0 and
its subscription, then heartbeats with its epoch and the partitions it owns; given a new
assignment it gives up at once what it no longer has (unless ``stuck``), and says so on its
next heartbeat."""

from __future__ import annotations

import itertools
import uuid

import pytest
from group_harness import (
    CONSUMER_SESSION_MS,
    GROUP,
    HEARTBEAT_INTERVAL_MS,
    REBALANCE_MS,
    Cluster,
    Groups,
    fetched,
)
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from kio.schema.errors import ErrorCode

from odradek.coordinator.group.consumer_group import ConsumerGroup, MemberState
from odradek.coordinator.group.heartbeats import HeartbeatResult
from odradek.coordinator.group.consumer_records import (
    ConsumerGroupKey,
    GroupEpochValue,
    RecordType,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from odradek.coordinator.group.group import Group
from odradek.coordinator.group.metadata_manager import TransactionalProducer
from odradek.coordinator.group.offsets_topic import group_metadata_key, offset_commit_key
from odradek.protocol.topic_partition import TopicPartition

E = ErrorCode
S = MemberState
R = RecordType
T0 = TopicPartition("t", 0)


def consumer_groups(config: dict | None = None, **topics: int) -> Groups:
    """A coordinator over a cluster with the topics ``t`` and ``u`` of 4 partitions each (or
    the ``topics`` given, name=partitions)."""
    cluster = Cluster()
    for name, count in (topics or {"t": 4, "u": 4}).items():
        cluster.create(name, count)
    return Groups(cluster=cluster, **(config or {}))


@pytest.fixture
def cg() -> Groups:
    return consumer_groups()


class Consumer:
    """A model of a consumer-protocol client (see the module docstring)."""

    def __init__(self, groups: Groups, member_id: str, *, topics: tuple[str, ...] = ("t",),
                 regex: str | None = None, instance: str | None = None,
                 assignor: str | None = None, rack: str | None = None,
                 rebalance_ms: int = REBALANCE_MS, group: str = GROUP) -> None:
        self.groups = groups
        self.member_id = member_id
        self.topics, self.regex = topics, regex
        self.instance, self.assignor, self.rack = instance, assignor, rack
        self.rebalance_ms = rebalance_ms
        self.group = group
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.assigned: dict[uuid.UUID, frozenset[int]] = {}  # the last assignment received
        self.stuck = False  # never gives a partition up: its revocation hangs

    def join(self, **fields) -> HeartbeatResult:
        """A full heartbeat with epoch 0 and no partitions."""
        self.epoch, self.owned = 0, {}
        return self._send(**({"topics": self.topics, "regex": self.regex,
                              "rebalance_ms": self.rebalance_ms, "assignor": self.assignor,
                              "rack": self.rack, "owned": {}} | fields))

    def heartbeat(self, **fields) -> HeartbeatResult:
        return self._send(**({"owned": self.owned} | fields))

    def leave(self, epoch: int = -1) -> HeartbeatResult:
        [result] = self.groups.consumer_heartbeat(self.member_id, epoch, group=self.group,
                                                  instance=self.instance)
        if result.error is E.none:
            self.epoch, self.owned = epoch, {}
        return result

    def _send(self, **fields) -> HeartbeatResult:
        [result] = self.groups.consumer_heartbeat(self.member_id, self.epoch, group=self.group,
                                                  instance=self.instance, **fields)
        if result.error is E.none:
            self.member_id, self.epoch = result.member_id, result.member_epoch
            if result.assignment is not None:
                self.assigned = dict(result.assignment)
                self.owned = (union(self.owned, result.assignment) if self.stuck
                              else dict(result.assignment))
        return result


def union(a: dict, b: dict) -> dict:
    return {t: a.get(t, frozenset()) | b.get(t, frozenset()) for t in a.keys() | b.keys()}


def tp(groups: Groups, **topics) -> dict[uuid.UUID, frozenset[int]]:
    """Partitions by topic name: ``tp(cg, t=[0, 1])``."""
    return {groups.cluster.id(name): frozenset(ps) for name, ps in topics.items() if ps}


def group_of(groups: Groups, group_id: str = GROUP) -> ConsumerGroup:
    group = groups.coordinator.manager.groups[group_id]
    assert isinstance(group, ConsumerGroup)
    return group


def owners(group: ConsumerGroup) -> dict[tuple[uuid.UUID, int], str]:
    """Who holds each partition (assigned or being revoked), checking that nobody shares
    one and that the partition epochs say the same."""
    held: dict[tuple[uuid.UUID, int], str] = {}
    for member in group.members.values():
        for partitions in (member.assigned, member.pending_revocation):
            for topic_id, parts in partitions.items():
                for p in parts:
                    assert (topic_id, p) not in held, (
                        f"{topic_id}-{p} held by {held[(topic_id, p)]} and {member.member_id}")
                    held[(topic_id, p)] = member.member_id
    assert group.partition_epochs == {
        key: group.members[member_id].member_epoch for key, member_id in held.items()}
    return held


def settle(*consumers: Consumer, rounds: int = 6) -> ConsumerGroup:
    """Heartbeats in turn until the group is Stable (at most ``rounds`` rounds)."""
    group = group_of(consumers[0].groups, consumers[0].group)
    for _ in range(rounds):
        for consumer in consumers:
            assert consumer.heartbeat().error is E.none
            owners(group)
        if str(group.state) == "Stable":
            return group
    raise AssertionError(f"not Stable after {rounds} rounds: {group.state}")


def stable_pair(groups: Groups, **options) -> tuple[Consumer, Consumer]:
    """Members "a" and "b" of ``t``, two partitions each, at group epoch 2."""
    a, b = Consumer(groups, "a", **options), Consumer(groups, "b", **options)
    a.join()
    b.join()
    settle(a, b)
    return a, b


def snapshot(group: ConsumerGroup) -> dict:
    """Everything a consumer group keeps in ``__consumer_offsets``, and who holds what."""
    return {"group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "members": dict(group.members), "static_members": dict(group.static_members),
            "target": dict(group.target),
            "subscription_metadata": dict(group.subscription_metadata),
            "partition_epochs": dict(group.partition_epochs),
            "offsets": dict(group.offsets)}


def keys_written(groups: Groups) -> list[tuple[object, bool]]:
    """Each record of the log as (decoded key, whether it is a tombstone)."""
    written = []
    for key, value in groups.store.records():
        if int.from_bytes(key[:2], "big") in tuple(R):
            written.append((decode_key(key), value is None))
    return written


# -- validation ------------------------------------------------------------------------


@pytest.mark.parametrize("fields, message", [
    ({"instance": ""}, "InstanceId can't be empty."),
    ({"rack": ""}, "RackId can't be empty."),
    ({"rebalance_ms": -1}, "RebalanceTimeoutMs must be provided"),
    ({"owned": None}, "TopicPartitions must be empty"),
    ({"owned": "t0"}, "TopicPartitions must be empty"),
    ({"topics": None}, "SubscribedTopicNames or SubscribedTopicRegex must be set"),
    ({"topics": ()}, "SubscribedTopicNames or SubscribedTopicRegex must be set"),
    ({"epoch": 1, "member_id": ""}, "MemberId can't be empty."),
    ({"epoch": -1, "member_id": ""}, "MemberId can't be empty."),
    ({"epoch": -2, "member_id": "a"}, "InstanceId can't be null."),
    ({"epoch": -2, "member_id": "", "instance": "pod"}, "MemberId can't be empty."),
    ({"epoch": -3, "member_id": "a"}, "MemberEpoch is invalid."),
], ids=["empty-instance", "empty-rack", "join-without-rebalance-timeout",
        "join-without-owned", "join-owning", "join-without-subscription",
        "join-with-no-topics", "heartbeat-without-member", "leave-without-member",
        "static-leave-without-instance", "static-leave-without-member", "epoch-minus-3"])
def test_a_heartbeat_breaking_the_rules_is_an_invalid_request(cg, fields, message):
    request = {"member_id": "", "epoch": 0, "topics": ("t",), "rebalance_ms": REBALANCE_MS,
               "owned": {}} | fields
    if request["owned"] == "t0":
        request["owned"] = tp(cg, t=[0])
    [result] = cg.consumer_heartbeat(**request)
    assert result.error is E.invalid_request
    assert message in result.message
    assert GROUP not in cg.coordinator.manager.groups
    assert cg.store.records() == []


def test_an_empty_group_id_is_an_invalid_request(cg):
    """As in Kafka: the heartbeat's own validation answers it ("GroupId can't be empty.")."""
    [result] = cg.consumer_heartbeat(group="", topics=("t",), rebalance_ms=REBALANCE_MS,
                                      owned={})
    assert (result.error, result.message) == (E.invalid_request, "GroupId can't be empty.")


def test_an_assignor_the_broker_does_not_have_is_unsupported(cg):
    result = Consumer(cg, "a", assignor="sticky").join()
    assert result.error is E.unsupported_assignor
    assert "uniform, range" in result.message
    assert GROUP not in cg.coordinator.manager.groups


def test_an_invalid_regular_expression_is_refused(cg):
    result = Consumer(cg, "a", topics=(), regex="orders-(").join()
    assert result.error is E.invalid_regular_expression
    assert GROUP not in cg.coordinator.manager.groups


def test_a_member_without_an_id_gets_one_from_the_coordinator(cg):
    """ConsumerGroupHeartbeat v0: the coordinator picks the member id."""
    consumer = Consumer(cg, "")
    joined = consumer.join()
    assert joined.error is E.none
    assert joined.member_id.startswith("uuid")
    assert set(group_of(cg).members) == {joined.member_id}
    assert consumer.heartbeat().member_epoch == 1


# -- joining -------------------------------------------------------------------------


def test_the_first_member_gets_every_partition_at_group_epoch_1(cg):
    a = Consumer(cg, "a")
    joined = a.join()

    assert (joined.error, joined.member_id, joined.member_epoch) == (E.none, "a", 1)
    assert joined.heartbeat_interval_ms == HEARTBEAT_INTERVAL_MS
    assert joined.assignment == tp(cg, t=range(4))
    group = group_of(cg)
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)
    assert group.target == {"a": tp(cg, t=range(4))}
    assert group.members["a"].state is S.STABLE
    assert str(group.state) == "Stable"
    assert owners(group) == {(cg.cluster.id("t"), p): "a" for p in range(4)}

    again = a.heartbeat()
    assert (again.error, again.member_epoch, again.assignment) == (E.none, 1, None)


def test_a_second_member_gets_its_share_only_once_the_first_revoked_it(cg):
    a, b = Consumer(cg, "a"), Consumer(cg, "b")
    a.join()
    joined = b.join()

    group = group_of(cg)
    assert (group.group_epoch, group.assignment_epoch) == (2, 2)
    a_target, b_target = group.target["a"], group.target["b"]
    assert union(a_target, b_target) == tp(cg, t=range(4))
    assert len(a_target[cg.cluster.id("t")]) == len(b_target[cg.cluster.id("t")]) == 2
    # b is at the new epoch, but its partitions are still a's.
    assert (joined.member_epoch, joined.assignment) == (2, {})
    assert group.members["b"].state is S.UNRELEASED_PARTITIONS
    assert set(owners(group).values()) == {"a"}

    told = a.heartbeat()  # a still owns all four: it must revoke b's first
    assert (told.member_epoch, told.assignment) == (1, a_target)
    assert group.members["a"].state is S.UNREVOKED_PARTITIONS
    assert group.members["a"].pending_revocation == b_target
    assert set(owners(group).values()) == {"a"}
    assert str(group.state) == "Reconciling"

    waiting = b.heartbeat()
    assert (waiting.member_epoch, waiting.assignment) == (2, None)
    assert set(owners(group).values()) == {"a"}

    revoked = a.heartbeat()  # now owning only its target
    assert (revoked.member_epoch, revoked.assignment) == (2, None)
    assert group.members["a"].state is S.STABLE
    assert set(owners(group).values()) == {"a"}
    assert len(owners(group)) == 2  # b's two are free

    given = b.heartbeat()
    assert (given.member_epoch, given.assignment) == (2, b_target)
    assert group.members["b"].state is S.STABLE
    held = owners(group)
    assert {p for (_, p), m in held.items() if m == "b"} == b_target[cg.cluster.id("t")]
    assert str(group.state) == "Stable"


def test_a_member_that_heartbeats_without_its_owned_partitions_is_not_taken_at_its_word(cg):
    """A heartbeat may leave the owned partitions out ("unchanged"): a member told to
    revoke keeps its epoch until a heartbeat lists what it owns."""
    a, b = Consumer(cg, "a"), Consumer(cg, "b")
    a.join()
    b.join()
    a.heartbeat()
    assert group_of(cg).members["a"].state is S.UNREVOKED_PARTITIONS
    assert a.heartbeat(owned=None).member_epoch == 1
    assert group_of(cg).members["a"].state is S.UNREVOKED_PARTITIONS
    assert a.heartbeat().member_epoch == 2


def test_a_subscription_change_bumps_the_group_epoch_and_the_target(cg):
    a = Consumer(cg, "a")
    a.join()
    changed = a.heartbeat(topics=("t", "u"))
    assert (changed.member_epoch, group_of(cg).group_epoch) == (2, 2)
    assert changed.assignment == tp(cg, t=range(4), u=range(4))
    assert set(group_of(cg).subscription_metadata) == {"t", "u"}


def test_a_heartbeat_changing_nothing_the_assignment_depends_on_keeps_the_group_epoch(cg):
    """A new client host or rebalance timeout is recorded, but no rebalance: the epoch moves
    only for what the assignment depends on (Kafka's hasMemberSubscriptionChanged)."""
    a, _ = stable_pair(cg)
    records = len(cg.store.records())

    moved = a.heartbeat(client_host="/10.0.0.9", rebalance_ms=50_000)

    assert (moved.error, moved.member_epoch) == (E.none, 2)
    group = group_of(cg)
    assert group.group_epoch == 2 and str(group.state) == "Stable"
    assert group.members["a"].client_host == "/10.0.0.9"
    assert group.members["a"].rebalance_timeout_ms == 50_000
    assert [k.type for k, _ in keys_written(cg)[records:]] == [R.MEMBER_SUBSCRIPTION]
    restarted = cg.restart(keep_clock=True)
    assert group_of(restarted).members["a"].client_host == "/10.0.0.9"


@pytest.mark.parametrize("change, rebalances", [
    ({"topics": ("u", "t")}, False),  # the same topics in another order
    ({"client_id": "renamed"}, False),
    ({"rack": "rack-2"}, True),  # the assignors place partitions by rack
    ({"assignor": "range"}, True),
], ids=["topic-order", "client-id", "rack", "assignor"])
def test_what_a_member_changes_decides_whether_the_group_rebalances(cg, change, rebalances):
    a = Consumer(cg, "a", topics=("t", "u"))
    a.join()
    result = a.heartbeat(**change)
    assert result.error is E.none
    assert group_of(cg).group_epoch == (2 if rebalances else 1)
    assert result.member_epoch == group_of(cg).group_epoch


# -- epochs ----------------------------------------------------------------------------


def at_epoch_3(groups: Groups) -> Consumer:
    """Member "a" alone, at epoch 3 (previous 2) with partitions 0-7 of ``t``: ``t`` grew
    twice."""
    a = Consumer(groups, "a")
    a.join()
    for count in (6, 8):
        groups.cluster.grow("t", count)
        groups.coordinator.on_topics_changed()
        assert a.heartbeat().error is E.none
    member = group_of(groups).members["a"]
    assert (member.member_epoch, member.previous_member_epoch) == (3, 2)
    return a


def test_a_member_whose_last_response_was_lost_may_come_back_with_its_previous_epoch(cg):
    at_epoch_3(cg)
    [result] = cg.consumer_heartbeat("a", 2, owned=tp(cg, t=range(6)))
    assert (result.error, result.member_epoch) == (E.none, 3)


@pytest.mark.parametrize("epoch, owned", [
    (4, range(8)),  # from the future
    (1, range(4)),  # older than the previous epoch
    (2, range(9)),  # the previous epoch, but owning a partition it is not assigned
    (2, None),  # the previous epoch, not saying what it owns
], ids=["greater", "older", "previous-owning-more", "previous-without-owned"])
def test_a_member_with_another_epoch_is_fenced(cg, epoch, owned):
    at_epoch_3(cg)
    records = len(cg.store.records())
    if owned is not None:
        owned = tp(cg, t=[p for p in owned if p < 8], u=[0] if 8 in owned else [])
    [result] = cg.consumer_heartbeat("a", epoch, owned=owned)
    assert result.error is E.fenced_member_epoch
    assert group_of(cg).members["a"].member_epoch == 3
    assert len(cg.store.records()) == records


def test_an_unknown_member_with_an_epoch_is_unknown(cg):
    Consumer(cg, "a").join()
    [result] = cg.consumer_heartbeat("stranger", 1, owned={})
    assert result.error is E.unknown_member_id
    assert set(group_of(cg).members) == {"a"}


def test_a_heartbeat_to_a_group_that_does_not_exist_is_group_id_not_found(cg):
    [result] = cg.consumer_heartbeat("a", 1, owned={})
    assert result.error is E.group_id_not_found
    assert GROUP not in cg.coordinator.manager.groups


# -- leaving and fencing ------------------------------------------------------------------


def test_a_leaving_member_is_removed_and_the_other_takes_its_partitions(cg):
    a, b = stable_pair(cg)
    records = len(cg.store.records())

    left = b.leave()

    assert (left.error, left.member_id, left.member_epoch) == (E.none, "b", -1)
    group = group_of(cg)
    assert set(group.members) == {"a"} and "b" not in group.target
    assert group.group_epoch == 3 and str(group.state) == "Assigning"
    # Its three records are deleted, then the group epoch bumped.
    assert keys_written(cg)[records:] == [
        (ConsumerGroupKey(R.CURRENT_ASSIGNMENT, GROUP, "b"), True),
        (ConsumerGroupKey(R.TARGET_ASSIGNMENT_MEMBER, GROUP, "b"), True),
        (ConsumerGroupKey(R.MEMBER_SUBSCRIPTION, GROUP, "b"), True),
        (ConsumerGroupKey(R.GROUP_EPOCH, GROUP), False)]
    assert set(owners(group).values()) == {"a"}

    result = a.heartbeat()
    assert (result.member_epoch, result.assignment) == (3, tp(cg, t=range(4)))
    assert str(group.state) == "Stable"


def test_the_leave_of_an_unknown_member_is_unknown(cg):
    Consumer(cg, "a").join()
    [result] = cg.consumer_heartbeat("stranger", -1)
    assert result.error is E.unknown_member_id
    assert group_of(cg).group_epoch == 1


def test_a_member_whose_heartbeats_stop_for_the_session_timeout_is_fenced(cg):
    a, b = stable_pair(cg)
    cg.advance(CONSUMER_SESSION_MS - 5_000)
    a.heartbeat()
    cg.advance(4_999)
    assert set(group_of(cg).members) == {"a", "b"}

    cg.advance(1)  # b's session ends

    group = group_of(cg)
    assert set(group.members) == {"a"} and group.group_epoch == 3
    assert a.heartbeat().assignment == tp(cg, t=range(4))
    assert b.heartbeat().error is E.unknown_member_id


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(cg):
    a = Consumer(cg, "a", rebalance_ms=20_000)
    a.join()
    b = Consumer(cg, "b")
    b.join()
    a.stuck = True
    a.heartbeat()
    assert group_of(cg).members["a"].state is S.UNREVOKED_PARTITIONS
    for _ in range(3):  # it keeps heartbeating: its session is fine
        cg.advance(6_000)
        assert a.heartbeat().error is E.none
    cg.advance(1_999)
    assert "a" in group_of(cg).members

    cg.advance(1)

    group = group_of(cg)
    assert set(group.members) == {"b"} and group.group_epoch == 3
    assert a.heartbeat().error is E.unknown_member_id
    assert b.heartbeat().assignment == tp(cg, t=range(4))


def test_a_member_that_revokes_in_time_is_not_fenced(cg):
    a = Consumer(cg, "a", rebalance_ms=20_000)
    a.join()
    Consumer(cg, "b").join()
    a.stuck = True
    a.heartbeat()
    cg.advance(19_000)
    a.stuck = False
    a.owned = dict(a.assigned)
    assert a.heartbeat().member_epoch == 2
    cg.advance(20_000)
    assert "a" in group_of(cg).members


def test_the_rebalance_timeout_of_a_member_revoking_survives_a_restart(cg):
    """A coordinator that loads the group arms it again (Kafka's onLoaded), as it does the
    sessions: a member stuck revoking is fenced all the same."""
    a = Consumer(cg, "a", rebalance_ms=20_000)
    a.join()
    Consumer(cg, "b").join()
    a.stuck = True
    a.heartbeat()
    restarted = cg.restart(keep_clock=True)
    a.groups = restarted
    for _ in range(3):
        restarted.advance(6_000)
        assert a.heartbeat().error is E.none
    restarted.advance(2_000)
    assert set(group_of(restarted).members) == {"b"}


# -- static members ------------------------------------------------------------------------


def static_pair(groups: Groups) -> tuple[Consumer, Consumer]:
    """The static member "a" (instance "pod-a") and the dynamic "b", Stable at epoch 2."""
    a, b = Consumer(groups, "a", instance="pod-a"), Consumer(groups, "b")
    a.join()
    b.join()
    settle(a, b)
    return a, b


def test_a_static_member_stepping_away_keeps_its_place_and_partitions(cg):
    a, b = static_pair(cg)
    kept = dict(a.owned)

    away = a.leave(-2)

    assert (away.error, away.member_id, away.member_epoch) == (E.none, "a", -2)
    group = group_of(cg)
    assert group.group_epoch == 2
    assert group.members["a"].member_epoch == -2
    assert group.members["a"].assigned == kept
    assert {p for (_, p), m in owners(group).items() if m == "a"} == kept[cg.cluster.id("t")]
    assert b.heartbeat().assignment is None  # b gets none of a's partitions


def test_a_new_incarnation_of_a_static_member_takes_its_partitions_without_a_rebalance(cg):
    a, b = static_pair(cg)
    kept = dict(a.owned)
    a.leave(-2)
    records = len(cg.store.records())

    rejoined = Consumer(cg, "a2", instance="pod-a").join()

    assert (rejoined.error, rejoined.member_id, rejoined.member_epoch) == (E.none, "a2", 2)
    assert rejoined.assignment == kept
    group = group_of(cg)
    assert group.group_epoch == 2 and str(group.state) == "Stable"
    assert set(group.members) == {"a2", "b"} and group.static_members == {"pod-a": "a2"}
    assert group.target["a2"] == kept and "a" not in group.target
    assert (ConsumerGroupKey(R.MEMBER_SUBSCRIPTION, GROUP, "a"), True) in \
        keys_written(cg)[records:]
    assert b.heartbeat().member_epoch == 2
    owners(group)


def test_a_static_member_coming_back_with_other_topics_rebalances(cg):
    a, _ = static_pair(cg)
    a.leave(-2)
    rejoined = Consumer(cg, "a2", instance="pod-a", topics=("t", "u")).join()
    assert rejoined.member_epoch == 3
    assert group_of(cg).group_epoch == 3


def test_an_instance_id_still_in_use_cannot_join_again(cg):
    static_pair(cg)
    result = Consumer(cg, "a2", instance="pod-a").join()
    assert result.error is E.unreleased_instance_id
    assert set(group_of(cg).members) == {"a", "b"}


def test_another_member_id_with_a_static_members_instance_id_is_fenced(cg):
    static_pair(cg)
    [heartbeat] = cg.consumer_heartbeat("impostor", 2, instance="pod-a", owned={})
    [leave] = cg.consumer_heartbeat("impostor", -1, instance="pod-a")
    assert heartbeat.error is leave.error is E.fenced_instance_id
    assert group_of(cg).static_members == {"pod-a": "a"}


def test_an_unknown_instance_id_is_an_unknown_member(cg):
    static_pair(cg)
    [result] = cg.consumer_heartbeat("c", 1, instance="pod-c", owned={})
    assert result.error is E.unknown_member_id


def test_a_static_member_leaving_for_good_rebalances(cg):
    a, _ = static_pair(cg)
    assert a.leave(-1).error is E.none
    assert set(group_of(cg).members) == {"b"} and group_of(cg).group_epoch == 3


def test_a_static_member_that_stepped_away_is_removed_when_its_session_ends(cg):
    a, b = static_pair(cg)
    a.leave(-2)
    cg.advance(CONSUMER_SESSION_MS - 10_000)
    b.heartbeat()
    assert "a" in group_of(cg).members
    cg.advance(10_000)
    group = group_of(cg)
    assert set(group.members) == {"b"} and group.static_members == {}
    assert group.group_epoch == 3
    assert b.heartbeat().assignment == tp(cg, t=range(4))


# -- group size ----------------------------------------------------------------------------


def test_a_full_group_refuses_new_members_and_keeps_serving_its_own():
    cg = consumer_groups({"group.consumer.max.size": 2})
    a, b = stable_pair(cg)
    refused = Consumer(cg, "c").join()
    assert refused.error is E.group_max_size_reached
    assert a.heartbeat().error is b.heartbeat().error is E.none
    assert set(group_of(cg).members) == {"a", "b"} and group_of(cg).group_epoch == 2


# -- regular expressions and topic changes ---------------------------------------------------


@pytest.fixture
def topics() -> Groups:
    return consumer_groups(**{"orders-1": 2, "orders-2": 2, "payments": 2,
                              "__consumer_offsets": 3})


def test_a_regular_expression_subscribes_to_the_topics_it_matches(topics):
    joined = Consumer(topics, "a", topics=(), regex="orders-.*").join()
    assert joined.assignment == tp(topics, **{"orders-1": [0, 1], "orders-2": [0, 1]})


def test_internal_topics_never_match_a_regular_expression(topics):
    a = Consumer(topics, "a", topics=(), regex=".*")
    assert a.join().assignment == tp(topics, **{"orders-1": [0, 1], "orders-2": [0, 1],
                                                "payments": [0, 1]})


def test_internal_topics_do_not_match_even_when_another_member_subscribes_to_them():
    """The topic is in the group's subscription by name, still not the regex's: the member
    by regex is not given any of it, though balance would want it to."""
    groups = consumer_groups(payments=1, __consumer_offsets=6)
    a = Consumer(groups, "a", topics=(), regex=".*")
    b = Consumer(groups, "b", topics=("__consumer_offsets",))
    a.join()
    b.join()
    group = settle(a, b)
    assert group.target["a"] == tp(groups, payments=[0])
    assert group.target["b"] == tp(groups, __consumer_offsets=range(6))


def test_a_new_matching_topic_is_assigned_once_the_coordinator_hears_of_it(topics):
    a = Consumer(topics, "a", topics=(), regex="orders-.*")
    a.join()
    topics.cluster.create("orders-3", 2)
    assert a.heartbeat().member_epoch == 1  # not told yet

    topics.coordinator.on_topics_changed()
    result = a.heartbeat()

    assert (result.member_epoch, group_of(topics).group_epoch) == (2, 2)
    assert result.assignment == tp(topics, **{"orders-1": [0, 1], "orders-2": [0, 1],
                                              "orders-3": [0, 1]})
    topics.cluster.create("audit", 1)  # matches nothing: no rebalance
    topics.coordinator.on_topics_changed()
    assert a.heartbeat().member_epoch == 2


def test_a_subscribed_topic_gaining_partitions_is_reassigned(topics):
    a = Consumer(topics, "a", topics=("payments",))
    a.join()
    topics.cluster.grow("payments", 5)
    topics.coordinator.on_topics_changed()
    result = a.heartbeat()
    assert result.member_epoch == 2
    assert result.assignment == tp(topics, payments=range(5))
    assert group_of(topics).subscription_metadata["payments"].partitions == 5


def test_a_deleted_topic_is_revoked_and_its_partitions_leave_the_group(cg):
    a = Consumer(cg, "a", topics=("t", "u"))
    a.join()
    cg.cluster.delete("u")
    cg.coordinator.on_topics_changed()
    told = a.heartbeat()
    assert told.assignment == tp(cg, t=range(4))
    assert a.heartbeat().member_epoch == 2
    assert owners(group_of(cg)) == {(cg.cluster.id("t"), p): "a" for p in range(4)}


# -- assignors and describe ------------------------------------------------------------------


def test_members_asking_for_range_get_co_partitioned_ranges(cg):
    a = Consumer(cg, "a", topics=("t", "u"), assignor="range")
    b = Consumer(cg, "b", topics=("t", "u"), assignor="range")
    a.join()
    b.join()
    group = settle(a, b)
    t, u = cg.cluster.id("t"), cg.cluster.id("u")
    assert group.target == {"a": {t: frozenset({0, 1}), u: frozenset({0, 1})},
                            "b": {t: frozenset({2, 3}), u: frozenset({2, 3})}}
    assert group.members["a"].assigned == group.target["a"]
    assert group.preferred_assignor("uniform") == "range"


def test_without_a_preference_the_first_configured_assignor_assigns():
    cg = consumer_groups({"group.consumer.assignors": ("range", "uniform")})
    a = Consumer(cg, "a", topics=("t", "u"))
    b = Consumer(cg, "b", topics=("t", "u"))
    a.join()
    b.join()
    group = settle(a, b)
    for target in group.target.values():  # range: the same partitions of each topic
        assert target[cg.cluster.id("t")] == target[cg.cluster.id("u")]


def describe(groups: Groups, group_id: str = GROUP) -> tuple:
    error, group = groups.coordinator.describe_consumer_group(group_id)
    if group is None:
        return (error,)
    return error, str(group.state), group.group_epoch, group.assignment_epoch


def test_describe_follows_the_group_through_its_states(cg):
    assert describe(cg) == (E.group_id_not_found,)
    a, b = Consumer(cg, "a"), Consumer(cg, "b")
    a.join()
    assert describe(cg) == (E.none, "Stable", 1, 1)
    b.join()
    assert describe(cg) == (E.none, "Reconciling", 2, 2)
    settle(a, b)
    assert describe(cg) == (E.none, "Stable", 2, 2)
    b.leave()
    assert describe(cg) == (E.none, "Assigning", 3, 2)
    a.heartbeat()
    assert describe(cg) == (E.none, "Stable", 3, 3)
    a.leave()
    assert describe(cg) == (E.none, "Empty", 4, 3)
    _, group = cg.coordinator.describe_consumer_group(GROUP)
    assert group.members == {}


def test_describe_of_a_classic_group_is_group_id_not_found(cg):
    cg.form(1)
    assert describe(cg) == (E.group_id_not_found,)


# -- persistence -----------------------------------------------------------------------------


def test_a_restarted_coordinator_loads_the_group_as_it_was(cg):
    a = Consumer(cg, "a", topics=("t", "u"), assignor="uniform", rack="rack-1")
    b = Consumer(cg, "b", topics=("t",))
    c = Consumer(cg, "c", topics=("u",), instance="pod-c", regex="^u$")
    a.join()
    b.join()
    settle(a, b)
    c.join()
    a.heartbeat()  # a must revoke u's partitions: caught mid-way
    before = snapshot(group_of(cg))
    assert {m.state for m in before["members"].values()} >= {S.UNREVOKED_PARTITIONS}

    restarted = cg.restart(keep_clock=True)

    assert snapshot(group_of(restarted)) == before
    for consumer in (a, b, c):
        consumer.groups = restarted
    group = settle(a, b, c)
    assert group.group_epoch == before["group_epoch"]


def test_the_log_holds_kafkas_consumer_group_records(cg):
    a, b = stable_pair(cg)
    b.leave()
    a.heartbeat()
    versions = set()
    for key, value in cg.store.records():
        decoded = decode_key(key)
        versions.add(int.from_bytes(key[:2], "big"))
        assert decoded.group_id == GROUP
        if value is not None:
            assert encode_value(decoded.type, decode_value(decoded.type, value)) == value
    assert versions == {3, 4, 5, 6, 7, 8}


def test_a_record_with_a_tagged_field_of_a_newer_kafka_is_loaded(cg):
    Consumer(cg, "a").join()
    epoch_key = encode_key(ConsumerGroupKey(R.GROUP_EPOCH, GROUP))
    value = encode_value(R.GROUP_EPOCH, GroupEpochValue(epoch=9))
    partition = cg.coordinator.manager.partition_for(GROUP)
    cg.store.logs[partition].append((epoch_key, value[:-1] + bytes.fromhex("01" "03" "01" "00")))
    restarted = cg.restart(keep_clock=True)
    assert group_of(restarted).group_epoch == 9
    assert set(group_of(restarted).members) == {"a"}


def test_a_coordinator_that_loses_the_partition_sends_members_away_and_reloads_it(cg):
    a, b = stable_pair(cg)
    before = snapshot(group_of(cg))
    partition = cg.coordinator.manager.partition_for(GROUP)

    cg.coordinator.on_resigned(partition)
    assert a.heartbeat().error is E.not_coordinator

    cg.coordinator.on_elected(partition)
    assert snapshot(group_of(cg)) == before
    assert a.heartbeat().member_epoch == b.heartbeat().member_epoch == 2


def test_a_heartbeat_is_answered_once_its_records_are_written(cg):
    cg.store.hold = True
    responses = cg.consumer_heartbeat("a", 0, topics=("t",), rebalance_ms=REBALANCE_MS,
                                      owned={})
    assert responses == []
    cg.store.release()
    assert [(r.error, r.member_epoch) for r in responses] == [(E.none, 1)]


@pytest.mark.parametrize("failure, answer", [
    (E.not_leader_or_follower, E.not_coordinator),
    (E.not_enough_replicas, E.coordinator_not_available),
    (E.request_timed_out, E.coordinator_not_available),
])
def test_a_join_that_cannot_be_written_leaves_no_member_behind(cg, failure, answer):
    cg.store.fail_with = failure
    result = Consumer(cg, "a").join()
    assert result.error is answer
    assert GROUP not in cg.coordinator.manager.groups
    cg.store.fail_with = None
    assert Consumer(cg, "a").join().member_epoch == 1


def test_a_failed_write_leaves_the_group_as_the_log_has_it(cg):
    a, b = stable_pair(cg)
    before = snapshot(group_of(cg))
    cg.store.fail_with = E.not_enough_replicas

    assert Consumer(cg, "c").join().error is E.coordinator_not_available
    assert b.leave().error is E.coordinator_not_available

    assert snapshot(group_of(cg)) == before
    assert snapshot(group_of(cg.restart(keep_clock=True))) == before
    cg.store.fail_with = None
    assert a.heartbeat().member_epoch == 2
    assert Consumer(cg, "c").join().member_epoch == 3


# -- offsets ---------------------------------------------------------------------------------


def commit(groups: Groups, member_id: str, epoch: int, *, api_version: int = 9) -> ErrorCode:
    answers: list[dict] = []
    groups.coordinator.commit_offsets(
        group_id=GROUP, generation_id=epoch, member_id=member_id, group_instance_id=None,
        offsets={T0: (5, -1, "m")}, respond=answers.append, api_version=api_version)
    [answer] = answers
    return answer[T0]


def test_a_member_commits_with_its_current_epoch(cg):
    Consumer(cg, "a").join()
    assert commit(cg, "a", 1) is E.none
    assert fetched(cg) == {T0: (5, "m")}


@pytest.mark.parametrize("member_id, epoch, api_version, error", [
    ("a", 2, 9, E.stale_member_epoch),
    ("a", 0, 9, E.stale_member_epoch),
    ("a", 1, 8, E.unsupported_version),
    ("stranger", 1, 9, E.unknown_member_id),
    ("", -1, 9, E.unknown_member_id),  # a simple commit to a group with members
], ids=["newer-epoch", "older-epoch", "offset-commit-v8", "unknown-member", "simple-commit"])
def test_a_commit_that_does_not_come_from_a_current_member_is_refused(
        cg, member_id, epoch, api_version, error):
    Consumer(cg, "a").join()
    assert commit(cg, member_id, epoch, api_version=api_version) is error
    assert fetched(cg) == {}


def test_a_simple_commit_is_taken_once_the_group_has_no_members(cg):
    a = Consumer(cg, "a")
    a.join()
    a.leave()
    assert commit(cg, "", -1) is E.none
    assert fetched(cg) == {T0: (5, "m")}


def test_fetching_offsets_as_a_member_checks_its_epoch(cg):
    Consumer(cg, "a").join()
    commit(cg, "a", 1)
    fetch = cg.coordinator.fetch_offsets
    assert fetch(GROUP, [T0], "a", 1)[0] is E.none
    assert fetch(GROUP, [T0], "a", 1)[1][T0].offset == 5
    assert fetch(GROUP, [T0], "a", 0) == (E.stale_member_epoch, {})
    assert fetch(GROUP, [T0], "stranger", 1) == (E.unknown_member_id, {})
    assert fetch(GROUP, [T0])[0] is E.none  # no member named: an admin


def test_a_transactional_commit_checks_the_member_epoch(cg):
    Consumer(cg, "a").join()
    producer = TransactionalProducer("txn", producer_id=7, producer_epoch=0)

    def txn_commit(epoch: int) -> ErrorCode:
        answers: list[dict] = []
        cg.coordinator.commit_transactional_offsets(
            group_id=GROUP, producer=producer, generation_id=epoch, member_id="a",
            group_instance_id=None, offsets={T0: (9, -1, None)}, respond=answers.append)
        return answers[0][T0]

    assert txn_commit(2) is E.illegal_generation
    assert txn_commit(1) is E.none
    assert fetched(cg) == {}  # until the transaction commits
    cg.coordinator.complete_transaction(7, [cg.coordinator.manager.partition_for(GROUP)], True)
    assert fetched(cg) == {T0: (9, "")}


# -- changing protocol -------------------------------------------------------------------------


def empty_classic_group(groups: Groups) -> None:
    """A classic group whose only member committed an offset and left."""
    (member,), generation = groups.form(1)
    assert groups.commit({T0: 7}, member_id=member, generation=generation) == {T0: E.none}
    groups.coordinator.leave_group(GROUP, [(member, None)])
    assert groups.state() == "Empty"


def empty_consumer_group(groups: Groups) -> None:
    """A consumer group whose only member committed an offset and left."""
    a = Consumer(groups, "a")
    a.join()
    assert commit(groups, "a", 1) is E.none
    a.leave()
    assert str(group_of(groups).state) == "Empty"


def test_an_empty_classic_group_becomes_a_consumer_group_with_its_offsets(cg):
    empty_classic_group(cg)

    joined = Consumer(cg, "a").join()

    assert (joined.error, joined.member_epoch) == (E.none, 1)
    assert set(group_of(cg).members) == {"a"}
    assert fetched(cg) == {T0: (7, "meta")}
    assert (group_metadata_key(GROUP), None) in cg.store.records()
    restarted = cg.restart(keep_clock=True)
    assert set(group_of(restarted).members) == {"a"}
    assert fetched(restarted) == {T0: (7, "meta")}


def test_an_empty_consumer_group_becomes_a_classic_group_with_its_offsets(cg):
    empty_consumer_group(cg)

    (member,), generation = cg.form(1)

    assert generation == 1 and cg.state() == "Stable"
    assert fetched(cg) == {T0: (5, "m")}
    for record_type in (R.GROUP_EPOCH, R.SUBSCRIPTION_METADATA, R.TARGET_ASSIGNMENT_EPOCH):
        assert (ConsumerGroupKey(record_type, GROUP), True) in keys_written(cg)
    restarted = cg.restart(keep_clock=True)
    classic = restarted.coordinator.manager.groups[GROUP]
    assert isinstance(classic, Group) and set(classic.members) == {member}
    assert fetched(restarted) == {T0: (5, "m")}


def test_a_classic_group_with_members_refuses_a_consumer_heartbeat(cg):
    cg.form(1)
    assert Consumer(cg, "a").join().error is E.group_id_not_found
    assert cg.state() == "Stable"


def test_a_consumer_group_with_members_refuses_a_classic_join(cg):
    Consumer(cg, "a").join()
    [refused] = cg.join()
    assert refused.error is E.inconsistent_group_protocol
    assert set(group_of(cg).members) == {"a"}


@pytest.mark.parametrize("policy, upgrades, downgrades", [
    ("bidirectional", True, True),
    ("upgrade", True, False),
    ("downgrade", False, True),
    ("disabled", False, False),
])
def test_the_migration_policy_decides_which_way_an_empty_group_may_go(
        policy, upgrades, downgrades):
    config = {"group.consumer.migration.policy": policy}
    classic = consumer_groups(config)
    empty_classic_group(classic)
    joined = Consumer(classic, "a").join()
    assert joined.error is (E.none if upgrades else E.group_id_not_found)
    assert isinstance(classic.coordinator.manager.groups[GROUP], ConsumerGroup) is upgrades

    consumer = consumer_groups(config)
    empty_consumer_group(consumer)
    [answer] = consumer.join()
    assert answer.error is (E.member_id_required if downgrades
                            else E.inconsistent_group_protocol)
    assert isinstance(consumer.coordinator.manager.groups[GROUP], Group) is downgrades


@pytest.mark.parametrize("start", ["classic", "consumer"])
def test_a_commit_in_flight_while_the_group_changes_protocol_lands_in_the_new_group(cg, start):
    """The commit's answer comes after the conversion: its offset is the new group's, and
    the new group, having no commit pending, can be deleted like any empty group."""
    (empty_classic_group if start == "classic" else empty_consumer_group)(cg)
    cg.store.hold = True
    answers = cg.send_commit({T0: (3, -1, "late")})
    cg.store.hold = False
    if start == "classic":
        assert Consumer(cg, "a").join().error is E.none
        Consumer(cg, "a").leave()
    else:
        [required] = cg.join()
        assert required.error is E.member_id_required
    cg.store.release()

    assert answers == [{T0: E.none}]
    converted = cg.coordinator.manager.groups[GROUP]
    assert isinstance(converted, Group if start == "consumer" else ConsumerGroup)
    assert fetched(cg) == {T0: (3, "late")}
    assert converted.pending_offset_commits == 0
    assert cg.delete_groups([GROUP]) == {GROUP: E.none}
    assert GROUP not in cg.coordinator.manager.groups


def test_classic_requests_to_a_consumer_group_find_no_classic_member(cg):
    Consumer(cg, "a").join()
    assert cg.sync("a", 1)[0].error is E.unknown_member_id
    assert cg.heartbeat("a", 1) is E.unknown_member_id
    assert cg.coordinator.leave_group(GROUP, [("a", None)]) == (E.none, [E.unknown_member_id])
    assert set(group_of(cg).members) == {"a"}


# -- deleting ----------------------------------------------------------------------------------


def test_deleting_an_empty_consumer_group_deletes_its_records_and_offsets(cg):
    empty_consumer_group(cg)

    assert cg.delete_groups([GROUP]) == {GROUP: E.none}

    assert GROUP not in cg.coordinator.manager.groups
    written = keys_written(cg)
    for record_type in (R.GROUP_EPOCH, R.SUBSCRIPTION_METADATA, R.TARGET_ASSIGNMENT_EPOCH):
        assert written[-3:].count((ConsumerGroupKey(record_type, GROUP), True)) == 1
    assert (offset_commit_key(GROUP, T0), None) in cg.store.records()
    restarted = cg.restart(keep_clock=True)
    assert GROUP not in restarted.coordinator.manager.groups
    assert fetched(restarted) == {}


def test_a_consumer_group_with_members_cannot_be_deleted(cg):
    Consumer(cg, "a").join()
    assert cg.delete_groups([GROUP]) == {GROUP: E.non_empty_group}
    assert set(group_of(cg).members) == {"a"}


def test_offsets_of_topics_the_group_subscribes_to_cannot_be_deleted(cg):
    Consumer(cg, "a").join()
    commit(cg, "a", 1)
    u0 = TopicPartition("u", 0)
    answers: list[dict] = []
    cg.coordinator.commit_offsets(
        group_id=GROUP, generation_id=1, member_id="a", group_instance_id=None,
        offsets={u0: (2, -1, None)}, respond=answers.append)
    assert cg.delete_offsets([T0, u0]) == (
        E.none, {T0: E.group_subscribed_to_topic, u0: E.none})
    assert fetched(cg) == {T0: (5, "m")}


def test_the_offsets_of_an_empty_consumer_group_expire_and_the_group_with_them():
    cg = consumer_groups({"offsets.retention.minutes": 10})
    a = Consumer(cg, "a")
    a.join()
    commit(cg, "a", 1)
    cg.advance(5 * 60_000)
    a.heartbeat()
    a.leave()  # the retention counts from now, when the group became empty
    cg.advance(9 * 60_000)
    assert fetched(cg) == {T0: (5, "m")}

    cg.advance(60_000)

    assert GROUP not in cg.coordinator.manager.groups
    assert (offset_commit_key(GROUP, T0), None) in cg.store.records()
    assert (ConsumerGroupKey(R.GROUP_EPOCH, GROUP), True) in keys_written(cg)
    assert GROUP not in cg.restart(keep_clock=True).coordinator.manager.groups


# -- the protocol as a state machine -----------------------------------------------------------


NAMES = ("m1", "m2", "m3", "m4", "m5")
STATIC = ("m4", "m5")  # with the instance id "pod-<name>"


class ConsumerProtocolMachine(RuleBasedStateMachine):
    """Two to five model consumers join (of ``t``, or of ``t`` and ``u``), heartbeat with
    what they own, stall in a revocation, leave, and go quiet while time passes (so that
    sessions and rebalance timeouts fence them); two of them are static, and may step away
    (epoch -2) and come back as a new incarnation. ``t`` may grow, the coordinator restart,
    a write fail. After every step nobody shares a partition and no epoch is ahead of the
    group's; after quiet heartbeats the group is Stable with every subscribed partition
    assigned."""

    def __init__(self) -> None:
        super().__init__()
        self.groups = consumer_groups(t=6, u=3)
        self.consumers: dict[str, Consumer] = {}  # the live clients, by name
        self.away: dict[str, tuple[str, ...]] = {}  # static members stepped away: topics
        self.incarnations = itertools.count()

    def group(self) -> ConsumerGroup | None:
        group = self.groups.coordinator.manager.groups.get(GROUP)
        assert group is None or isinstance(group, ConsumerGroup)
        return group

    def _answered(self, name: str, result: HeartbeatResult) -> None:
        """A member fenced by a timeout learns it from its next heartbeat (GROUP_ID_NOT_FOUND
        if the group, left empty, was deleted meanwhile), and rejoins later as a new member;
        no other error is expected."""
        group = self.group()
        if result.error is E.unknown_member_id or (
                result.error is E.group_id_not_found and group is None):
            assert group is None or self.consumers[name].member_id not in group.members
            del self.consumers[name]
        else:
            assert result.error is E.none, result

    @initialize(both=st.lists(st.booleans(), min_size=2, max_size=2))
    def two_members(self, both):
        for name, subscribes_both in zip(NAMES, both, strict=False):
            self.join(name, subscribes_both)

    @precondition(lambda self: len(self.consumers) < len(NAMES))
    @rule(name=st.sampled_from(NAMES), both=st.booleans())
    def join(self, name, both):
        if name in self.consumers or name in self.away:
            return
        consumer = Consumer(self.groups, f"{name}-{next(self.incarnations)}",
                            topics=("t", "u") if both else ("t",),
                            instance=f"pod-{name}" if name in STATIC else None)
        assert consumer.join().error is E.none
        self.consumers[name] = consumer

    @rule(name=st.sampled_from(STATIC))
    def step_away(self, name):
        """A static member leaves with epoch -2, keeping its place."""
        consumer = self.consumers.pop(name, None)
        if consumer is not None:
            result = consumer.leave(-2)
            if result.error is E.none:
                self.away[name] = consumer.topics
            else:  # its session had ended already
                group = self.group()
                assert group is None or consumer.member_id not in group.members

    @rule(name=st.sampled_from(STATIC))
    def come_back(self, name):
        """A new incarnation with the same instance id takes its place."""
        if name in self.away:
            self.join(name, both=len(self.away.pop(name)) == 2)

    @rule(name=st.sampled_from(NAMES), say_owned=st.booleans())
    def heartbeat(self, name, say_owned):
        if name in self.consumers:
            fields = {} if say_owned else {"owned": None}
            self._answered(name, self.consumers[name].heartbeat(**fields))

    @rule(name=st.sampled_from(NAMES))
    def leave(self, name):
        consumer = self.consumers.pop(name, None)
        if consumer is not None:
            expected = (E.none, E.unknown_member_id) if self.group() else (
                E.group_id_not_found,)
            assert consumer.leave().error in expected

    @rule(name=st.sampled_from(NAMES))
    def stall(self, name):
        """Its revocations hang (until the quiet heartbeats)."""
        if name in self.consumers:
            self.consumers[name].stuck = True

    @rule(ms=st.integers(1_000, 50_000))
    def wait(self, ms):
        self.groups.advance(ms)

    @rule()
    def restart(self):
        """The group loads as it was."""
        group = self.group()
        before = snapshot(group) if group is not None else None
        self.groups = self.groups.restart(keep_clock=True)
        for consumer in self.consumers.values():
            consumer.groups = self.groups
        group = self.group()
        assert (snapshot(group) if group is not None else None) == before

    @rule(name=st.sampled_from(NAMES))
    def heartbeat_that_cannot_be_written(self, name):
        """It changes nothing: the group is as the log has it."""
        if name not in self.consumers:
            return
        group = self.group()
        before = snapshot(group) if group is not None else None
        self.groups.store.fail_with = E.not_enough_replicas
        result = self.consumers[name].heartbeat()
        self.groups.store.fail_with = None
        if result.error is E.coordinator_not_available:
            group = self.group()
            assert (snapshot(group) if group is not None else None) == before
        else:
            self._answered(name, result)  # it had nothing to write

    @rule(count=st.integers(7, 9))
    def grow(self, count):
        if count > len(self.groups.cluster.topics["t"].partitions):
            self.groups.cluster.grow("t", count)
            self.groups.coordinator.on_topics_changed()

    @rule()
    def quiet_heartbeats(self):
        """Everyone heartbeats, no time passing, until the group settles."""
        for name in list(self.away):
            self.come_back(name)
        for consumer in self.consumers.values():
            if consumer.stuck:
                consumer.stuck, consumer.owned = False, dict(consumer.assigned)
        for _ in range(8):
            for name in list(self.consumers):
                self._answered(name, self.consumers[name].heartbeat())
            group = self.group()
            if group is None or str(group.state) in ("Stable", "Empty"):
                break
        group = self.group()
        if not self.consumers:
            assert group is None or not group.members
            return
        assert str(group.state) == "Stable"
        subscribed = {}
        for consumer in self.consumers.values():
            member = group.members[consumer.member_id]
            assert member.assigned == group.target.get(consumer.member_id, {})
            assert _non_empty(consumer.owned) == member.assigned
            for name in consumer.topics:
                subscribed[name] = len(self.groups.cluster.topics[name].partitions)
        assigned = {(t, p) for m in group.members.values() for t, ps in m.assigned.items()
                    for p in ps}
        assert assigned == {(self.groups.cluster.id(name), p)
                            for name, count in subscribed.items() for p in range(count)}

    @invariant()
    def one_owner_and_no_epoch_ahead_of_the_group(self):
        group = self.group()
        if group is None:
            return
        owners(group)
        assert group.assignment_epoch <= group.group_epoch
        for member in group.members.values():
            assert member.member_epoch <= group.group_epoch
        # What a live client owns, its member holds (assigned or being revoked).
        for consumer in self.consumers.values():
            member = group.members.get(consumer.member_id)
            if member is not None:
                held = union(member.assigned, member.pending_revocation)
                for topic_id, parts in consumer.owned.items():
                    assert parts <= held.get(topic_id, frozenset())


def _non_empty(partitions: dict) -> dict:
    return {t: ps for t, ps in partitions.items() if ps}


ConsumerProtocolMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
test_the_protocol_as_a_state_machine = ConsumerProtocolMachine.TestCase
