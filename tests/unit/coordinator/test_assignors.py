"""The server-side assignors: valid, balanced, sticky, co-partitioned, rack-aware, deterministic."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.group.assignors import (
    ASSIGNORS,
    Assignment,
    MemberSpec,
    PartitionAssignor,
    PartitionAssignorError,
    RangeAssignor,
    TopicSpec,
    UniformAssignor,
)

UNIFORM, RANGE = UniformAssignor(), RangeAssignor()
BOTH = pytest.mark.parametrize("assignor", [UNIFORM, RANGE], ids=["uniform", "range"])
T1, T2, T3 = (uuid.UUID(int=n) for n in (1, 2, 3))
# Subscribed to by members, never a topic: deleted, or not created yet.
GONE = uuid.UUID(int=99)

Members = dict[str, MemberSpec]
Topics = dict[uuid.UUID, TopicSpec]
Result = dict[str, Assignment]


def topic(topic_id: uuid.UUID, partitions: int, racks: str = "") -> TopicSpec:
    """``racks``: partition p's single replica is on rack ``racks[p]``."""
    return TopicSpec(topic_id, f"topic-{topic_id.int}", partitions,
                     {p: frozenset(rack) for p, rack in enumerate(racks)})


def topics(*specs: TopicSpec) -> Topics:
    return {spec.topic_id: spec for spec in specs}


def member(member_id: str, *subscribed: uuid.UUID, assignment: Assignment | None = None,
           rack: str | None = None, instance: str | None = None) -> MemberSpec:
    return MemberSpec(member_id, instance, rack, frozenset(subscribed), assignment or {})


def group(*specs: MemberSpec) -> Members:
    return {spec.member_id: spec for spec in specs}


def parts(*partitions: int) -> frozenset[int]:
    return frozenset(partitions)


def rejoined(members: Members, result: Result) -> Members:
    """The members again, with the result as their current assignments."""
    return {member_id: MemberSpec(m.member_id, m.instance_id, m.rack_id, m.subscribed_topics,
                                  result[member_id])
            for member_id, m in members.items()}


def load(assignment: Assignment) -> int:
    return sum(len(partitions) for partitions in assignment.values())


def loads(result: Result) -> dict[str, int]:
    return {member_id: load(assignment) for member_id, assignment in result.items()}


def pairs(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(topic_id, p) for topic_id, partitions in assignment.items() for p in partitions}


def assert_valid(result: Result, members: Members, all_topics: Topics) -> None:
    """Every member present; each partition of a subscribed topic exactly once, and only to a
    subscriber; nothing else."""
    assert set(result) == set(members)
    seen: set[tuple[uuid.UUID, int]] = set()
    for member_id, assignment in result.items():
        for topic_id, partitions in assignment.items():
            assert partitions, "a topic is listed only with partitions"
            assert topic_id in members[member_id].subscribed_topics
            for p in partitions:
                assert (topic_id, p) not in seen
                seen.add((topic_id, p))
    subscribed = {t for m in members.values() for t in m.subscribed_topics if t in all_topics}
    assert seen == {(t, p) for t in subscribed for p in range(all_topics[t].partitions)}


def range_order(members: Members) -> list[str]:
    """Kafka's: static members by instance id, then the others by member id."""
    static = sorted((m for m in members.values() if m.instance_id is not None),
                    key=lambda m: m.instance_id or "")
    dynamic = sorted(m.member_id for m in members.values() if m.instance_id is None)
    return [m.member_id for m in static] + dynamic


# -- generated groups ------------------------------------------------------------------------

TOPIC_IDS = [uuid.UUID(int=n) for n in range(1, 6)]
RACKS = "abc"
RACK_SETS = [frozenset(), *map(frozenset, RACKS), frozenset("ab"), frozenset("bc")]
MEMBER_IDS = ["a", "b", "c", "ab", "ba", "ca", "bb", "abc", "z"]


@st.composite
def groups(draw, *, homogeneous: bool = False, racks: bool = False) -> tuple[Members, Topics]:
    """Up to 4 topics; members subscribe to some of them, and maybe to GONE. Current
    assignments are arbitrary: stale topics, partitions past the count, the same partition
    twice, topics no longer subscribed to."""
    all_topics: Topics = {}
    for topic_id in draw(st.lists(st.sampled_from(TOPIC_IDS), unique=True, max_size=4)):
        count = draw(st.integers(0, 12))
        rack_sets = draw(st.lists(st.sampled_from(RACK_SETS), min_size=count, max_size=count)
                         if racks else st.just([]))
        all_topics[topic_id] = TopicSpec(topic_id, f"topic-{topic_id.int}", count,
                                         dict(enumerate(rack_sets)))
    member_ids = draw(st.lists(st.sampled_from(MEMBER_IDS), unique=True, min_size=1,
                               max_size=7))
    subscriptions = st.frozensets(st.sampled_from([*TOPIC_IDS, GONE]))
    common = draw(subscriptions)
    members: Members = {}
    for member_id in member_ids:
        held = draw(st.lists(st.tuples(st.sampled_from([*TOPIC_IDS, GONE]), st.integers(-1, 14)),
                             max_size=8))
        assignment: dict[uuid.UUID, set[int]] = {}
        for topic_id, p in held:
            assignment.setdefault(topic_id, set()).add(p)
        static = draw(st.booleans())
        members[member_id] = MemberSpec(
            member_id,
            member_id[::-1] + "-instance" if static else None,
            draw(st.sampled_from([None, *RACKS])) if racks else None,
            common if homogeneous else draw(subscriptions),
            {topic_id: frozenset(ps) for topic_id, ps in assignment.items()})
    return members, all_topics


@st.composite
def owned_groups(draw, **kwargs) -> tuple[Members, Topics]:
    """Like ``groups``, but each partition currently with at most one member, as target
    assignments are; stale partitions as well."""
    members, all_topics = draw(groups(**kwargs))
    member_ids = sorted(members)
    current: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in member_ids}
    for topic_id, spec in all_topics.items():
        for p in range(spec.partitions):
            owner = draw(st.sampled_from([None, *member_ids]))
            if owner is not None:
                current[owner].setdefault(topic_id, set()).add(p)
    for member_id in draw(st.lists(st.sampled_from(member_ids), unique=True)):
        current[member_id].setdefault(GONE, set()).add(0)  # a deleted topic
        current[member_id].setdefault(TOPIC_IDS[0], set()).add(20)  # past the count
    return rejoined(members, {m: {t: frozenset(ps) for t, ps in current[m].items()}
                              for m in member_ids}), all_topics


def without_racks(members: Members, all_topics: Topics) -> tuple[Members, Topics]:
    return ({m: MemberSpec(s.member_id, s.instance_id, None, s.subscribed_topics, s.assignment)
             for m, s in members.items()},
            {t: TopicSpec(s.topic_id, s.name, s.partitions, {}) for t, s in all_topics.items()})


def quota_bounds(members: Members, all_topics: Topics) -> tuple[int, int]:
    subscribed = {t for m in members.values() for t in m.subscribed_topics if t in all_topics}
    total = sum(all_topics[t].partitions for t in subscribed)
    return total // len(members), -(-total // len(members))


# -- validity and determinism ----------------------------------------------------------------


@BOTH
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_every_assignment_is_valid(assignor: PartitionAssignor, data):
    members, all_topics = data.draw(groups(racks=data.draw(st.booleans())))
    assert_valid(assignor.assign(members, all_topics), members, all_topics)


@BOTH
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_the_same_input_gives_the_same_assignment(assignor: PartitionAssignor, data):
    members, all_topics = data.draw(groups(racks=True))
    result = assignor.assign(members, all_topics)
    # The same group given in another order, with equal but distinct sets.
    shuffled = {m: MemberSpec(s.member_id, s.instance_id, s.rack_id,
                              frozenset(sorted(s.subscribed_topics, key=str, reverse=True)),
                              dict(reversed(list(s.assignment.items()))))
                for m, s in reversed(list(members.items()))}
    again = assignor.assign(shuffled, dict(reversed(list(all_topics.items()))))
    assert again == result
    assert list(again) == list(result) == sorted(members)


_DETERMINISM_SCRIPT = """
import uuid
from odradek.coordinator.group.assignors import ASSIGNORS, MemberSpec, TopicSpec
racks = ["east", "west", "north", "south"]
ts = {uuid.UUID(int=t): TopicSpec(uuid.UUID(int=t), str(t), 20,
      {p: frozenset(racks[(p + t) % 4:(p + t) % 4 + 2]) for p in range(20)}) for t in range(1, 5)}
ms = {f"member-{i}": MemberSpec(f"member-{i}", None, racks[i % 4],
      frozenset(list(ts)[i % 3:]), {}) for i in range(9)}
for name, assignor in sorted(ASSIGNORS.items()):
    result = assignor.assign(ms, ts)
    print(name, [(m, [(t.int, sorted(ps)) for t, ps in a.items()]) for m, a in result.items()])
"""


def test_the_assignment_does_not_depend_on_string_hashing():
    """Rack names and member ids are strings, whose sets iterate in an order that changes with
    every interpreter (PYTHONHASHSEED): it must never show in an assignment."""
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        outputs.add(subprocess.run([sys.executable, "-c", _DETERMINISM_SCRIPT], env=env,
                                   capture_output=True, text=True, check=True).stdout)
    assert len(outputs) == 1


@BOTH
def test_an_empty_group_gets_nothing(assignor: PartitionAssignor):
    assert assignor.assign({}, topics(topic(T1, 3))) == {}


@BOTH
def test_every_member_is_in_the_result(assignor: PartitionAssignor):
    members = group(member("a", T1), member("b"), member("c", GONE), member("d", T1))
    all_topics = topics(topic(T1, 1), topic(T2, 4))
    result = assignor.assign(members, all_topics)
    assert_valid(result, members, all_topics)
    assert result["b"] == result["c"] == {}
    assert loads(result) == {"a": 1, "b": 0, "c": 0, "d": 0}  # T2: nobody subscribes


@BOTH
def test_a_subscription_to_a_missing_topic_is_ignored(assignor: PartitionAssignor):
    members = group(member("a", T1, GONE), member("b", GONE))
    assert assignor.assign(members, topics(topic(T1, 2))) == {"a": {T1: parts(0, 1)}, "b": {}}


@BOTH
@pytest.mark.parametrize(("members", "all_topics", "error"), [
    ({"a": member("b", T1)}, topics(topic(T1, 1)), "member 'b' given as member 'a'"),
    (group(member("a", T1)), {T2: topic(T1, 1)}, "given as topic"),
    (group(member("a", T1)), topics(topic(T1, -1)), "has -1 partitions"),
])
def test_an_input_that_contradicts_itself_is_refused(assignor, members, all_topics, error):
    with pytest.raises(PartitionAssignorError, match=error):
        assignor.assign(members, all_topics)


def test_the_assignors_are_registered_by_name():
    assert {name: type(a) for name, a in ASSIGNORS.items()} == {
        "uniform": UniformAssignor, "range": RangeAssignor}
    assert all(a.name == name for name, a in ASSIGNORS.items())


# -- uniform: homogeneous subscriptions ------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_uniform_balances_members_with_the_same_subscriptions(data):
    members, all_topics = data.draw(groups(homogeneous=True, racks=data.draw(st.booleans())))
    low, high = quota_bounds(members, all_topics)
    assert set(loads(UNIFORM.assign(members, all_topics)).values()) <= {low, high}


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_uniform_keeps_as_many_current_partitions_as_balance_allows(data):
    members, all_topics = data.draw(owned_groups(homogeneous=True, racks=data.draw(st.booleans())))
    result = UNIFORM.assign(members, all_topics)
    low, _ = quota_bounds(members, all_topics)
    extra = sum(loads(result).values()) - low * len(members)
    valid = {m: len({(t, p) for t, p in pairs(s.assignment) if t in s.subscribed_topics
                     and t in all_topics and 0 <= p < all_topics[t].partitions})
             for m, s in members.items()}
    # floor(P / M) each, and P mod M members may keep one more.
    best = (sum(min(n, low) for n in valid.values())
            + min(extra, sum(1 for n in valid.values() if n > low)))
    assert sum(len(pairs(s.assignment) & pairs(result[m])) for m, s in members.items()) == best


def test_a_new_member_takes_only_what_it_needs():
    all_topics = topics(topic(T1, 6), topic(T2, 6))
    members = group(*(member(m, T1, T2) for m in "abc"))
    before = UNIFORM.assign(members, all_topics)
    assert set(loads(before).values()) == {4}

    after = UNIFORM.assign(rejoined(members, before) | group(member("d", T1, T2)), all_topics)
    assert set(loads(after).values()) == {3}
    for m in "abc":
        assert pairs(after[m]) <= pairs(before[m])  # each keeps 3 of its 4, gains nothing
    moved = set().union(*(pairs(before[m]) - pairs(after[m]) for m in "abc"))
    assert pairs(after["d"]) == moved


def test_a_leaving_members_partitions_are_the_only_ones_to_move():
    all_topics = topics(topic(T1, 7), topic(T2, 6))
    members = group(*(member(m, T1, T2) for m in "abcd"))
    before = UNIFORM.assign(members, all_topics)
    remaining = rejoined(members, before)
    del remaining["b"]

    after = UNIFORM.assign(remaining, all_topics)
    assert sorted(loads(after).values()) == [4, 4, 5]
    for m in "acd":
        assert pairs(after[m]) >= pairs(before[m])
    assert set().union(*(pairs(after[m]) - pairs(before[m]) for m in "acd")) == pairs(before["b"])


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_membership_changes_move_the_fewest_partitions(data):
    members, all_topics = data.draw(groups(homogeneous=True, racks=data.draw(st.booleans())))
    before = UNIFORM.assign(members, all_topics)
    current = rejoined(members, before)

    leaving = data.draw(st.sampled_from(sorted(members)))
    after = UNIFORM.assign({m: s for m, s in current.items() if m != leaving}, all_topics)
    assert all(pairs(after[m]) >= pairs(before[m]) for m in after)

    newcomer = next(iter(members.values()))
    joined = current | {"new": MemberSpec("new", None, None, newcomer.subscribed_topics, {})}
    after = UNIFORM.assign(joined, all_topics)
    assert all(pairs(after[m]) <= pairs(before[m]) for m in members)


# -- uniform: different subscriptions --------------------------------------------------------


def test_uniform_gives_the_topic_only_one_member_can_take_to_that_member():
    members = group(member("a", T1), member("b", T1, T2))
    all_topics = topics(topic(T1, 4), topic(T2, 4))
    assert UNIFORM.assign(members, all_topics) == {
        "a": {T1: parts(0, 1, 2, 3)}, "b": {T2: parts(0, 1, 2, 3)}}


def test_uniform_balances_different_subscriptions_where_it_can():
    members = group(member("a", T1), member("b", T1, T2))
    all_topics = topics(topic(T1, 6), topic(T2, 2))
    result = UNIFORM.assign(members, all_topics)
    assert_valid(result, members, all_topics)
    assert loads(result) == {"a": 4, "b": 4}


def test_uniform_cannot_balance_what_the_subscriptions_keep_apart():
    members = group(member("a", T1), member("b", T2), member("c"))
    all_topics = topics(topic(T1, 10), topic(T2, 2))
    assert loads(UNIFORM.assign(members, all_topics)) == {"a": 10, "b": 2, "c": 0}


def test_a_member_joining_different_subscriptions_gets_its_share():
    all_topics = topics(topic(T1, 6), topic(T2, 2))
    members = group(member("a", T1), member("b", T1, T2, assignment={
        T1: parts(*range(6)), T2: parts(0, 1)}))
    result = UNIFORM.assign(members, all_topics)
    assert loads(result) == {"a": 4, "b": 4}
    assert result["b"][T2] == parts(0, 1)  # only a can take T1, so b gives up T1 only
    assert pairs(result["b"]) <= pairs(members["b"].assignment)


def test_uniform_balances_overlapping_subscriptions():
    # Kafka's example of a chain: a and b share T1, b and c share T2.
    members = group(member("a", T1), member("b", T1, T2), member("c", T2))
    all_topics = topics(topic(T1, 20), topic(T2, 10))
    result = UNIFORM.assign(members, all_topics)
    assert_valid(result, members, all_topics)
    assert loads(result) == {"a": 10, "b": 10, "c": 10}


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_uniform_leaves_no_move_that_would_narrow_a_gap(data):
    """For every topic: no subscriber holding one of its partitions has more than one
    partition more than another subscriber of it."""
    members, all_topics = data.draw(groups(racks=data.draw(st.booleans())))
    result = UNIFORM.assign(members, all_topics)
    load_of = loads(result)
    for topic_id in all_topics:
        subscribers = [m for m, s in members.items() if topic_id in s.subscribed_topics]
        holders = [m for m in subscribers if topic_id in result[m]]
        if holders:
            assert max(load_of[m] for m in holders) - min(load_of[m] for m in subscribers) <= 1


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_a_uniform_assignment_is_its_own_result(data):
    members, all_topics = data.draw(groups(racks=data.draw(st.booleans())))
    result = UNIFORM.assign(members, all_topics)
    assert UNIFORM.assign(rejoined(members, result), all_topics) == result


# -- stale current assignments ---------------------------------------------------------------


def test_partitions_that_are_gone_or_no_longer_subscribed_are_dropped():
    members = group(
        # T1 was recreated with 3 partitions, GONE was deleted, T2 is no longer subscribed.
        member("a", T1, assignment={T1: parts(0, 1, 4, 5), GONE: parts(0), T2: parts(0, 1)}),
        member("b", T1, T2, assignment={T1: parts(2)}),
        member("c", T1, T2))
    all_topics = topics(topic(T1, 3), topic(T2, 3))
    result = UNIFORM.assign(members, all_topics)
    assert_valid(result, members, all_topics)
    assert result["a"] == {T1: parts(0, 1)}
    assert result["b"][T1] == parts(2)


def test_a_partition_in_two_current_assignments_stays_with_the_first_member():
    members = group(member("b", T1, assignment={T1: parts(0, 1)}),
                    member("a", T1, assignment={T1: parts(1, 2)}))
    assert UNIFORM.assign(members, topics(topic(T1, 4))) == {
        "a": {T1: parts(1, 2)}, "b": {T1: parts(0, 3)}}


# -- range -----------------------------------------------------------------------------------


def test_range_gives_contiguous_ranges_the_first_members_one_more():
    members = group(member("m0", T1, T2), member("m1", T1, T2))
    assert RANGE.assign(members, topics(topic(T1, 3), topic(T2, 3))) == {
        "m0": {T1: parts(0, 1), T2: parts(0, 1)}, "m1": {T1: parts(2), T2: parts(2)}}


def test_range_orders_static_members_by_instance_id_before_the_others():
    members = group(member("m-a", T1, instance="i-2"), member("m-b", T1, instance="i-1"),
                    member("m-c", T1), member("m-0", T1))
    assert RANGE.assign(members, topics(topic(T1, 5))) == {
        "m-b": {T1: parts(0, 1)}, "m-a": {T1: parts(2)}, "m-0": {T1: parts(3)},
        "m-c": {T1: parts(4)}}


def test_range_with_more_members_than_partitions():
    members = group(*(member(m, T1) for m in "abcd"))
    assert RANGE.assign(members, topics(topic(T1, 2))) == {
        "a": {T1: parts(0)}, "b": {T1: parts(1)}, "c": {}, "d": {}}


def test_range_with_different_subscriptions():
    members = group(member("a", T1, T2), member("b", T3), member("c", T2, T3))
    all_topics = topics(topic(T1, 3), topic(T2, 3), topic(T3, 2))
    assert RANGE.assign(members, all_topics) == {
        "a": {T1: parts(0, 1, 2), T2: parts(0, 1)},
        "b": {T3: parts(0)},
        "c": {T2: parts(2), T3: parts(1)}}


def test_range_recomputes_rather_than_keeping_current_partitions():
    """Kafka's server-side range assignor (3.9 on) ignores current assignments: being sticky
    would break co-partitioning. Instance ids give static members the same ranges back."""
    members = group(member("a", T1, assignment={T1: parts(2, 3)}),
                    member("b", T1, assignment={T1: parts(0, 1)}))
    assert RANGE.assign(members, topics(topic(T1, 4))) == {
        "a": {T1: parts(0, 1)}, "b": {T1: parts(2, 3)}}


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_range_gives_each_subscriber_a_balanced_share_of_each_topic(data):
    racks = data.draw(st.booleans())
    members, all_topics = data.draw(groups(racks=racks))
    result = RANGE.assign(members, all_topics)
    order = range_order(members)
    for topic_id, spec in all_topics.items():
        subscribers = [m for m in order if topic_id in members[m].subscribed_topics]
        if not subscribers:
            continue
        shares = [sorted(result[m].get(topic_id, ())) for m in subscribers]
        low = spec.partitions // len(subscribers)
        assert {len(share) for share in shares} <= {low, low + 1}
        if not racks:  # ranges in order, the larger first
            assert [p for share in shares for p in share] == list(range(spec.partitions))
            assert [len(share) for share in shares] == sorted(map(len, shares), reverse=True)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_range_co_partitions_topics_with_the_same_subscribers_and_count(data):
    members, all_topics = data.draw(groups(racks=data.draw(st.booleans())))
    result = RANGE.assign(members, all_topics)
    for t in all_topics:
        for u in all_topics:
            subscribers = {m for m, s in members.items() if t in s.subscribed_topics}
            if (subscribers == {m for m, s in members.items() if u in s.subscribed_topics}
                    and all_topics[t].partitions == all_topics[u].partitions):
                assert all(result[m].get(t) == result[m].get(u) for m in subscribers)


def test_range_co_partitions_whatever_the_partition_racks():
    members = group(member("a", T1, T2, rack="a"), member("b", T1, T2, rack="b"))
    result = RANGE.assign(members, topics(topic(T1, 4, "abab"), topic(T2, 4, "baab")))
    # Partitions 1 and 2 are on the same rack in both topics, 0 and 3 are not.
    assert result == {"a": {T1: parts(0, 2), T2: parts(0, 2)},
                      "b": {T1: parts(1, 3), T2: parts(1, 3)}}


# -- racks -----------------------------------------------------------------------------------


@BOTH
def test_members_get_the_partitions_on_their_racks(assignor: PartitionAssignor):
    members = group(member("a", T1, rack="a"), member("b", T1, rack="b"))
    assert assignor.assign(members, topics(topic(T1, 6, "ababab"))) == {
        "a": {T1: parts(0, 2, 4)}, "b": {T1: parts(1, 3, 5)}}


@BOTH
def test_racks_never_cost_balance(assignor: PartitionAssignor):
    members = group(member("a", T1, rack="a"), member("b", T1, rack="b"))
    result = assignor.assign(members, topics(topic(T1, 4, "aaab")))
    assert loads(result) == {"a": 2, "b": 2}
    assert parts(3) <= result["b"][T1]


@BOTH
def test_the_places_one_more_go_to_members_on_the_partitions_racks(assignor: PartitionAssignor):
    members = group(member("a", T1, rack="a"), member("b", T1, rack="b"),
                    member("c", T1, rack="c"))
    result = assignor.assign(members, topics(topic(T1, 4, "cbcc")))
    assert loads(result) == {"a": 1, "b": 1, "c": 2}
    assert result["b"] == {T1: parts(1)}


def test_racks_never_cost_stickiness():
    members = group(member("a", T1, rack="a", assignment={T1: parts(1, 3)}),
                    member("b", T1, rack="b", assignment={T1: parts(0, 2)}))
    assert UNIFORM.assign(members, topics(topic(T1, 4, "abab"))) == {
        "a": {T1: parts(1, 3)}, "b": {T1: parts(0, 2)}}


def test_a_member_gives_up_the_partitions_off_its_rack_first():
    members = group(member("a", T1, rack="a", assignment={T1: parts(0, 1, 2, 3)}),
                    member("b", T1, rack="b"))
    assert UNIFORM.assign(members, topics(topic(T1, 4, "abab"))) == {
        "a": {T1: parts(0, 2)}, "b": {T1: parts(1, 3)}}


def test_racks_with_different_subscriptions():
    members = group(member("a", T1, rack="a"), member("b", T1, T2, rack="b"))
    result = UNIFORM.assign(members, topics(topic(T1, 4, "abab"), topic(T2, 2, "ab")))
    assert loads(result) == {"a": 3, "b": 3}
    assert result["a"][T1] >= parts(0, 2)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_racks_never_cost_balance_or_stickiness(data):
    members, all_topics = data.draw(owned_groups(racks=True,
                                                 homogeneous=data.draw(st.booleans())))
    with_racks = UNIFORM.assign(members, all_topics)
    without = UNIFORM.assign(*without_racks(members, all_topics))
    assert sorted(loads(with_racks).values()) == sorted(loads(without).values())

    def kept(result: Result) -> int:
        return sum(len(pairs(s.assignment) & pairs(result[m])) for m, s in members.items())
    assert kept(with_racks) == kept(without)


@BOTH
def test_a_member_without_a_rack_takes_what_is_left(assignor: PartitionAssignor):
    members = group(member("a", T1), member("b", T1, rack="b"))
    assert assignor.assign(members, topics(topic(T1, 2, "ab"))) == {
        "a": {T1: parts(0)}, "b": {T1: parts(1)}}


@BOTH
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_racks_that_cannot_matter_change_nothing(assignor: PartitionAssignor, data):
    members, all_topics = data.draw(groups(racks=True))
    plain_members, plain_topics = without_racks(members, all_topics)
    expected = assignor.assign(plain_members, plain_topics)
    # Members on racks, no partition rack known; or the reverse.
    assert assignor.assign(members, plain_topics) == expected
    assert assignor.assign(plain_members, all_topics) == expected
    # Every partition on every rack.
    everywhere = {t: TopicSpec(s.topic_id, s.name, s.partitions,
                               dict.fromkeys(range(s.partitions), frozenset(RACKS)))
                  for t, s in all_topics.items()}
    assert assignor.assign(members, everywhere) == expected
    # No member on a rack that has replicas.
    elsewhere = {m: MemberSpec(s.member_id, s.instance_id, s.rack_id and "z", s.subscribed_topics,
                               s.assignment) for m, s in members.items()}
    assert assignor.assign(elsewhere, all_topics) == expected


# -- size ------------------------------------------------------------------------------------


def _big_group(subscriptions: int) -> tuple[Members, Topics]:
    """1,000 members and 100 topics of 100 partitions, on three racks; each member subscribes
    to ``subscriptions`` of the topics (100: all, the same subscriptions for every member)."""
    all_topics = {uuid.UUID(int=t): TopicSpec(uuid.UUID(int=t), f"topic-{t}", 100,
                                              {p: frozenset("abc"[(p + t) % 3]) for p in
                                               range(100)}) for t in range(100)}
    topic_ids = list(all_topics)
    members = {f"member-{i:04}": MemberSpec(
        f"member-{i:04}", None, "abc"[i % 3],
        frozenset(topic_ids[(i + k * 7) % 100] for k in range(subscriptions)), {})
        for i in range(1000)}
    return members, all_topics


@BOTH
@pytest.mark.parametrize("subscriptions", [100, 10], ids=["homogeneous", "heterogeneous"])
def test_a_thousand_members_and_ten_thousand_partitions(assignor: PartitionAssignor,
                                                        subscriptions: int):
    members, all_topics = _big_group(subscriptions)
    start = time.perf_counter()
    result = assignor.assign(members, all_topics)
    del members["member-0500"]
    assignor.assign(rejoined(members, result), all_topics)
    # A sanity bound, not a benchmark: both assignments take a fraction of this.
    assert time.perf_counter() - start < 3.0
