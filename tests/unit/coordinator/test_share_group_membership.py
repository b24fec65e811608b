"""Share groups (KIP-932): ShareGroupHeartbeat membership, as share consumers drive it, on a
fake clock — every member is assigned every partition of the topics it subscribes to — and
the group's records in ``__consumer_offsets``, from which a coordinator loads it again."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from group_harness import Groups
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from odradek.coordinator.group.heartbeats import HeartbeatResult
from odradek.coordinator.group.share_group import ShareGroup, ShareHeartbeatRequest
from odradek.coordinator.group.share_records import (
    SHARE_GROUP_RECORDS,
    ShareGroupKey,
    ShareRecordType,
)
from odradek.coordinator.group.state import GroupState
from odradek.protocol.topic_partition import TopicPartition

E = ErrorCode
R = ShareRecordType
GROUP = "sg"
SESSION_MS = 45_000
INTERVAL_MS = 5_000


class ShareGroups:
    """The share groups of a coordinator over an in-memory ``__consumer_offsets`` (a
    :class:`Groups`), on its fake clock."""

    def __init__(self, *, max_size: int = 100, groups: Groups | None = None) -> None:
        self.groups = groups or Groups(**{"group.share.heartbeat.interval.ms": INTERVAL_MS,
                                          "group.share.session.timeout.ms": SESSION_MS,
                                          "group.share.max.size": max_size})
        self.cluster = self.groups.cluster
        self.store = self.groups.store
        self.coordinator = self.groups.coordinator
        self.protocol = self.coordinator.share_protocol
        self.removed: list[tuple[str, str]] = []
        self.protocol.on_member_removed = lambda g, m: self.removed.append((g, m))

    @property
    def now_ms(self) -> int:
        return self.groups.now_ms

    def restart(self) -> ShareGroups:
        """A new coordinator over the same log (a broker restart), at the same time."""
        return ShareGroups(groups=self.groups.restart(keep_clock=True))

    def send(self, member_id: str, epoch: int, *, group: str = GROUP,
             topics: Sequence[str] | None = None, rack: str | None = None
             ) -> list[HeartbeatResult]:
        """One ShareGroupHeartbeat; the list receives its response when it is given."""
        responses: list[HeartbeatResult] = []
        self.protocol.heartbeat(ShareHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=epoch, rack_id=rack,
            subscribed_topic_names=None if topics is None else tuple(topics),
            client_id="client", client_host="/127.0.0.1"), responses.append)
        return responses

    def heartbeat(self, member_id: str, epoch: int, **options) -> HeartbeatResult:
        [result] = self.send(member_id, epoch, **options)
        return result

    def join(self, member_id: str, topics: Sequence[str] = ("t",), **options
             ) -> HeartbeatResult:
        return self.heartbeat(member_id, 0, topics=topics, **options)

    def delete(self, group_id: str = GROUP) -> ErrorCode:
        answers: list[ErrorCode] = []
        self.protocol.delete(group_id, answers.append)
        [answer] = answers
        return answer

    def advance(self, ms: int) -> None:
        self.groups.advance(ms)

    def group(self, group_id: str = GROUP) -> ShareGroup:
        return self.protocol.groups[group_id]


@pytest.fixture
def share() -> ShareGroups:
    groups = ShareGroups()
    groups.cluster.create("t", 3)
    return groups


def every(topic_id, count: int) -> dict:
    return {topic_id: frozenset(range(count))}


# -- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "message"), [
    ({"group_id": ""}, "GroupId can't be empty."),
    ({"member_id": ""}, "MemberId can't be empty."),
    ({"member_id": "", "member_epoch": 3}, "MemberId can't be empty."),
    ({"member_id": "", "member_epoch": -1}, "MemberId can't be empty."),
    ({"rack_id": ""}, "RackId can't be empty."),
    ({"subscribed_topic_names": None}, "SubscribedTopicNames must be set in first request."),
    ({"subscribed_topic_names": ()}, "SubscribedTopicNames must be set in first request."),
    ({"member_epoch": -2}, "MemberEpoch is invalid."),
])
def test_an_invalid_heartbeat_is_invalid_request_and_changes_nothing(share, fields, message):
    request = {"group_id": GROUP, "member_id": "m1", "member_epoch": 0, "rack_id": None,
               "subscribed_topic_names": ("t",), "client_id": "client",
               "client_host": "/127.0.0.1"} | fields
    responses: list[HeartbeatResult] = []
    share.protocol.heartbeat(ShareHeartbeatRequest(**request), responses.append)
    [result] = responses
    assert (result.error, result.message) == (E.invalid_request, message)
    assert result.assignment is None
    assert share.protocol.groups == {}
    assert share.store.records() == []


# -- joining ---------------------------------------------------------------------------


def test_the_first_member_gets_epoch_1_and_every_partition_of_its_topics(share):
    other = share.cluster.create("u", 2)
    share.cluster.create("unsubscribed", 4)

    result = share.join("m1", ["t", "u"], rack="rack-a")

    assert result == HeartbeatResult(
        E.none, member_id="m1", member_epoch=1, heartbeat_interval_ms=INTERVAL_MS,
        assignment=every(share.cluster.id("t"), 3) | every(other, 2))
    group = share.group()
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)
    member = group.members["m1"]
    assert (member.rack_id, member.client_id, member.subscribed_topic_names) == (
        "rack-a", "client", ("t", "u"))
    assert group.state is GroupState.STABLE
    assert group.state_timestamp_ms == share.now_ms


def test_a_second_member_gets_the_same_partitions_and_the_first_moves_to_its_epoch(share):
    everything = every(share.cluster.id("t"), 3)
    first = share.join("m1")
    second = share.join("m2")

    assert (first.member_epoch, first.assignment) == (1, everything)
    assert (second.error, second.member_epoch, second.assignment) == (E.none, 2, everything)
    assert share.group().members["m1"].member_epoch == 1  # until its next heartbeat

    again = share.heartbeat("m1", 1)
    assert (again.error, again.member_epoch) == (E.none, 2)
    assert again.assignment is None  # the same partitions: nothing to send
    member = share.group().members["m1"]
    assert (member.member_epoch, member.previous_member_epoch) == (2, 1)
    assert share.group().group_epoch == 2


def test_a_member_subscribed_to_another_topic_gets_only_that_topics_partitions(share):
    other = share.cluster.create("u", 2)
    share.join("m1", ["t"])
    result = share.join("m2", ["u"])

    assert result.assignment == every(other, 2)
    assert share.heartbeat("m1", 1).member_epoch == 2
    assert share.group().members["m1"].assigned == every(share.cluster.id("t"), 3)


def test_the_assignment_is_sent_only_on_a_join_a_change_or_when_topics_are_sent(share):
    everything = every(share.cluster.id("t"), 3)
    assert share.join("m1").assignment == everything

    assert share.heartbeat("m1", 1).assignment is None
    assert share.heartbeat("m1", 1, topics=["t"]).assignment == everything
    assert share.heartbeat("m1", 1).member_epoch == 1  # the same topics change nothing
    assert share.heartbeat("m1", 0, topics=["t"]).assignment == everything  # rejoin

    other = share.cluster.create("u", 2)
    share.protocol.on_topics_changed()
    changed = share.heartbeat("m1", 1, topics=["t", "u"])
    assert (changed.member_epoch, changed.assignment) == (2, everything | every(other, 2))
    assert share.heartbeat("m1", 2).assignment is None


def test_a_member_subscribing_to_a_topic_that_does_not_exist_gets_nothing(share):
    result = share.join("m1", ["missing"])
    assert (result.error, result.member_epoch, result.assignment) == (E.none, 1, {})


def test_the_same_topics_in_another_order_do_not_bump_the_epoch(share):
    share.cluster.create("u", 2)
    share.join("m1", ["t", "u"])

    result = share.heartbeat("m1", 1, topics=["u", "t"])

    assert (result.error, result.member_epoch) == (E.none, 1)
    assert share.group().group_epoch == 1


# -- epochs ----------------------------------------------------------------------------


def test_a_heartbeat_of_an_unknown_member_is_unknown_member_id(share):
    share.join("m1")
    result = share.heartbeat("stranger", 1)
    assert result.error is E.unknown_member_id
    assert list(share.group().members) == ["m1"]


def test_a_heartbeat_to_a_group_not_known_here_is_unknown_member_id_so_the_member_rejoins(
        share):
    # A group deleted, or whose first join was never written, is gone: the member is told
    # to join again (UNKNOWN_MEMBER_ID), not that its group is gone for good
    # (GROUP_ID_NOT_FOUND is fatal to a share consumer).
    assert share.heartbeat("m1", 4).error is E.unknown_member_id
    share.store.fail_with = E.not_enough_replicas
    assert share.join("m1").error is E.coordinator_not_available
    share.store.fail_with = None

    result = share.heartbeat("m1", 1)
    assert result.error is E.unknown_member_id
    rejoined = share.join("m1")
    assert (rejoined.error, rejoined.member_epoch) == (E.none, 1)


def test_a_wrong_epoch_is_fenced_but_the_previous_one_is_accepted(share):
    share.join("m1")
    share.join("m2")
    assert share.heartbeat("m1", 1).member_epoch == 2  # previous epoch 1

    ahead = share.heartbeat("m1", 3)
    assert ahead.error is E.fenced_member_epoch
    assert ahead.message == ("The share group member has epoch 3, not 2. "
                             "The member must rejoin.")
    share.join("m3")  # group epoch 3
    assert share.heartbeat("m1", 2).member_epoch == 3  # previous epoch 2
    assert share.heartbeat("m1", 1).error is E.fenced_member_epoch  # too old now
    lost = share.heartbeat("m1", 2)  # the answer with epoch 3 was lost
    assert (lost.error, lost.member_epoch) == (E.none, 3)
    assert share.group().members["m1"].member_epoch == 3
    assert share.removed == []  # a fenced heartbeat does not remove the member


# -- leaving ---------------------------------------------------------------------------


def test_a_member_leaving_is_removed_and_the_epoch_bumped(share):
    share.join("m1")
    share.join("m2")

    result = share.heartbeat("m2", -1)

    assert (result.error, result.member_id, result.member_epoch) == (E.none, "m2", -1)
    assert list(share.group().members) == ["m1"]
    assert share.group().group_epoch == 3
    assert share.removed == [(GROUP, "m2")]
    assert share.heartbeat("m1", 1).member_epoch == 3
    assert share.heartbeat("m2", 2).error is E.unknown_member_id


def test_the_last_member_leaving_empties_the_group(share):
    share.join("m1")
    share.advance(7)
    assert share.heartbeat("m1", -1).error is E.none
    group = share.group()
    assert group.state is GroupState.EMPTY
    assert (group.members, group.session_deadlines_ms) == ({}, {})
    assert group.state_timestamp_ms == share.now_ms
    assert group.subscribed_topics == {}
    share.advance(SESSION_MS)
    assert share.removed == [(GROUP, "m1")]  # once


def test_an_unknown_member_leaving_is_unknown_member_id(share):
    share.join("m1")
    assert share.heartbeat("stranger", -1).error is E.unknown_member_id
    assert share.heartbeat("m1", -1, group="elsewhere").error is E.unknown_member_id
    assert list(share.group().members) == ["m1"]
    assert share.removed == []


# -- sessions --------------------------------------------------------------------------


def test_a_member_whose_session_times_out_is_removed(share):
    share.join("m1")
    share.join("m2")
    share.advance(SESSION_MS - 1)
    assert share.heartbeat("m1", 1).error is E.none  # m1's session starts over
    share.advance(1)

    assert list(share.group().members) == ["m1"]
    assert share.removed == [(GROUP, "m2")]
    assert share.group().group_epoch == 3
    assert share.heartbeat("m2", 2).error is E.unknown_member_id

    share.advance(SESSION_MS - 2)
    assert list(share.group().members) == ["m1"]
    share.advance(1)
    assert share.group().members == {}
    assert share.group().state is GroupState.EMPTY
    assert share.removed == [(GROUP, "m2"), (GROUP, "m1")]


# -- size ------------------------------------------------------------------------------


def test_a_full_group_refuses_a_new_member_but_not_its_members():
    share = ShareGroups(max_size=2)
    share.cluster.create("t", 1)
    share.join("m1")
    share.join("m2")

    full = share.join("m3")
    assert (full.error, full.message) == (
        E.group_max_size_reached,
        "The share group has reached its maximum capacity of 2 members.")
    assert sorted(share.group().members) == ["m1", "m2"]
    assert share.heartbeat("m1", 1).error is E.none
    assert share.join("m2").error is E.none  # a member rejoining is no new member
    share.heartbeat("m2", -1)
    assert share.join("m3").error is E.none


# -- topics changing -------------------------------------------------------------------


def test_a_topic_created_then_grown_is_assigned_at_the_next_heartbeat(share):
    share.join("m1", ["t", "new"])
    assert share.heartbeat("m1", 1).assignment is None

    new = share.cluster.create("new", 2)
    assert share.heartbeat("m1", 1).member_epoch == 1  # not told yet
    share.protocol.on_topics_changed()
    created = share.heartbeat("m1", 1)
    assert (created.member_epoch, created.assignment) == (
        2, every(share.cluster.id("t"), 3) | every(new, 2))

    share.cluster.grow("new", 4)
    share.protocol.on_topics_changed()
    grown = share.heartbeat("m1", 2)
    assert (grown.member_epoch, grown.assignment) == (
        3, every(share.cluster.id("t"), 3) | every(new, 4))
    assert share.group().subscribed_topics == {"new": (new, 4),
                                               "t": (share.cluster.id("t"), 3)}


def test_a_change_to_other_topics_does_not_bump_the_epoch(share):
    share.join("m1")
    share.cluster.create("unrelated", 5)
    share.protocol.on_topics_changed()
    result = share.heartbeat("m1", 1)
    assert (result.member_epoch, result.assignment) == (1, None)


def test_a_deleted_topic_is_taken_away(share):
    other = share.cluster.create("u", 2)
    share.join("m1", ["t", "u"])
    share.cluster.delete("t")
    share.protocol.on_topics_changed()
    result = share.heartbeat("m1", 1)
    assert (result.member_epoch, result.assignment) == (2, every(other, 2))


# -- groups ----------------------------------------------------------------------------


def test_a_group_id_of_another_kind_of_group_is_group_id_not_found(share):
    share.groups.commit({TopicPartition("t", 0): 5}, group="classic")
    result = share.join("m1", group="classic")
    assert (result.error, result.message) == (E.group_id_not_found,
                                              "Group classic is not a share group.")
    assert share.heartbeat("m1", 1, group="classic").error is E.group_id_not_found
    assert share.heartbeat("m1", -1, group="classic").error is E.group_id_not_found
    assert share.protocol.groups == {}


def test_forget_drops_the_groups_coordinated_elsewhere_now(share):
    share.join("m1", group="a")
    share.join("m1", group="b")
    group_a = share.group("a")

    share.protocol.forget(lambda group_id: group_id == "a")

    assert list(share.protocol.groups) == ["b"]
    assert group_a.state is GroupState.DEAD
    assert share.removed == []
    share.advance(SESSION_MS)  # no session timer is left for the forgotten group
    assert share.removed == [("b", "m1")]


def test_delete_refuses_a_group_with_members_and_an_unknown_group(share):
    share.join("m1")
    assert share.delete() is E.non_empty_group
    assert share.delete("unknown") is E.group_id_not_found
    group = share.group()

    share.heartbeat("m1", -1)
    assert share.delete() is E.none
    assert share.protocol.groups == {}
    assert group.state is GroupState.DEAD
    assert share.delete() is E.group_id_not_found


def test_a_group_is_empty_then_stable_then_empty(share):
    share.join("m1")
    share.heartbeat("m1", -1)
    group = share.group()
    assert group.state is GroupState.EMPTY and group.is_(GroupState.EMPTY)
    share.advance(10)
    share.join("m2")
    assert group.state is GroupState.STABLE
    assert group.state_timestamp_ms == share.now_ms
    assert str(group.state) == "Stable"
    assert group.group_epoch == 3


# -- the group in __consumer_offsets ---------------------------------------------------


def snapshot(group: ShareGroup) -> dict:
    """Everything a share group keeps in ``__consumer_offsets``."""
    return {"state": group.state, "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch, "metadata_hash": group.metadata_hash,
            "members": dict(group.members), "target": dict(group.target)}


def keys_written(share: ShareGroups) -> list[tuple[ShareGroupKey, bool]]:
    """Each share group record of the log as (its key, whether it is a tombstone)."""
    return [(SHARE_GROUP_RECORDS.decode_key(key), value is None)
            for key, value in share.store.records()
            if SHARE_GROUP_RECORDS.is_key(int.from_bytes(key[:2], "big"))]


def test_a_restarted_coordinator_loads_the_group_as_it_was(share):
    other = share.cluster.create("u", 2)
    share.join("m1", ["t", "u"], rack="rack-a")
    share.join("m2", ["u"])
    share.join("m3")
    share.heartbeat("m1", 1)
    share.heartbeat("m3", -1)
    before = snapshot(share.group())
    assert (before["group_epoch"], before["assignment_epoch"]) == (4, 3)
    assert before["members"]["m2"].member_epoch == 2  # it has not heartbeated since

    restarted = share.restart()

    assert snapshot(restarted.group()) == before
    # The members carry on with their ids and epochs; nobody joins again.
    assert restarted.heartbeat("m1", 3).member_epoch == 4
    assert restarted.heartbeat("m2", 2).member_epoch == 4
    group = restarted.group()
    assert group.group_epoch == 4
    assert group.members["m1"].assigned == every(share.cluster.id("t"), 3) | every(other, 2)
    assert group.members["m1"].rack_id == "rack-a"


def test_the_log_holds_kafkas_share_group_records(share):
    share.join("m1")
    share.join("m2")
    share.heartbeat("m2", -1)
    share.heartbeat("m1", 1)
    types = set()
    for key, value in share.store.records():
        decoded = SHARE_GROUP_RECORDS.decode_key(key)
        types.add(decoded.type)
        assert decoded.group_id == GROUP
        if value is not None:
            assert SHARE_GROUP_RECORDS.encode_value(
                decoded.type, SHARE_GROUP_RECORDS.decode_value(decoded.type, value)) == value
    assert types == {R.MEMBER_SUBSCRIPTION, R.GROUP_EPOCH, R.TARGET_ASSIGNMENT_EPOCH,
                     R.TARGET_ASSIGNMENT_MEMBER, R.CURRENT_ASSIGNMENT}


def test_loaded_members_get_a_full_session_and_one_that_is_gone_is_fenced(share):
    share.join("m1")
    share.join("m2")
    share.advance(SESSION_MS - 1_000)  # close to the end of both sessions

    restarted = share.restart()
    restarted.advance(SESSION_MS - 1)
    assert sorted(restarted.group().members) == ["m1", "m2"]
    assert restarted.heartbeat("m1", 1).member_epoch == 2
    restarted.advance(1)

    assert list(restarted.group().members) == ["m1"]
    assert restarted.removed == [(GROUP, "m2")]
    assert restarted.heartbeat("m1", 2).member_epoch == 3
    assert snapshot(restarted.restart().group()) == snapshot(restarted.group())


def test_a_topic_that_grew_while_the_group_was_not_loaded_bumps_its_epoch(share):
    share.join("m1")
    share.cluster.grow("t", 5)

    restarted = share.restart()
    assert restarted.group().group_epoch == 1
    result = restarted.heartbeat("m1", 1)

    assert (result.member_epoch, result.assignment) == (2, every(share.cluster.id("t"), 5))


def test_a_coordinator_that_loses_the_partition_forgets_the_group_then_loads_it(share):
    share.join("m1")
    share.join("m2")
    before = snapshot(share.group())
    partition = share.coordinator.manager.partition_for(GROUP)

    share.coordinator.on_resigned(partition)
    assert GROUP not in share.protocol.groups
    share.coordinator.on_elected(partition)

    assert snapshot(share.group()) == before
    assert share.heartbeat("m1", 1).member_epoch == 2


def test_a_heartbeat_is_answered_once_its_records_are_written(share):
    share.store.hold = True
    responses = share.send("m1", 0, topics=["t"])
    assert responses == []
    share.store.release()
    assert [(r.error, r.member_epoch) for r in responses] == [(E.none, 1)]


@pytest.mark.parametrize(("failure", "answer"), [
    (E.not_leader_or_follower, E.not_coordinator),
    (E.not_enough_replicas, E.coordinator_not_available),
])
def test_a_failed_write_leaves_the_group_as_the_log_has_it(share, failure, answer):
    share.join("m1")
    before = snapshot(share.group())
    share.store.fail_with = failure

    assert share.join("m2").error is answer
    assert share.heartbeat("m1", -1).error is answer
    assert snapshot(share.group()) == before

    share.store.fail_with = None
    assert share.heartbeat("m1", 1).member_epoch == 1
    assert share.join("m2").member_epoch == 2


def test_members_leaving_and_the_deletion_write_tombstones_for_every_key(share):
    share.join("m1")
    assert share.heartbeat("m1", -1).error is E.none
    left = keys_written(share)[-4:]
    assert share.delete() is E.none
    deleted = keys_written(share)[-3:]

    assert left == [(ShareGroupKey(R.CURRENT_ASSIGNMENT, GROUP, "m1"), True),
                    (ShareGroupKey(R.TARGET_ASSIGNMENT_MEMBER, GROUP, "m1"), True),
                    (ShareGroupKey(R.MEMBER_SUBSCRIPTION, GROUP, "m1"), True),
                    (ShareGroupKey(R.GROUP_EPOCH, GROUP), False)]
    assert deleted == [(ShareGroupKey(R.TARGET_ASSIGNMENT_EPOCH, GROUP), True),
                       (ShareGroupKey(R.STATE_PARTITION_METADATA, GROUP), True),
                       (ShareGroupKey(R.GROUP_EPOCH, GROUP), True)]
    assert GROUP not in share.restart().protocol.groups


def test_a_deletion_that_cannot_be_written_leaves_the_group(share):
    share.join("m1")
    share.heartbeat("m1", -1)
    share.store.fail_with = E.not_enough_replicas

    assert share.delete() is E.coordinator_not_available
    assert share.group().state is GroupState.EMPTY


def test_group_ids_stay_one_namespace_after_a_restart(share):
    share.groups.commit({TopicPartition("t", 0): 5}, group="classic")
    share.join("m1")

    restarted = share.restart()

    assert restarted.join("m1", group="classic").error is E.group_id_not_found
    assert {g.group_id for g in restarted.coordinator.list_groups()} == {"classic", GROUP}


# -- any history -----------------------------------------------------------------------

MEMBERS = ["m1", "m2", "m3"]
TOPICS = ["t", "u", "v"]
steps = st.lists(st.one_of(
    st.tuples(st.just("join"), st.sampled_from(MEMBERS),
              st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3)),
    st.tuples(st.just("heartbeat"), st.sampled_from(MEMBERS), st.none()),
    st.tuples(st.just("subscribe"), st.sampled_from(MEMBERS),
              st.lists(st.sampled_from(TOPICS), max_size=3)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS), st.none()),
    st.tuples(st.just("grow"), st.sampled_from(TOPICS), st.integers(1, 4)),
    st.tuples(st.just("wait"), st.none(), st.sampled_from([1_000, SESSION_MS // 2])),
), max_size=40)


@settings(max_examples=80, deadline=None)
@given(steps)
def test_any_history_keeps_every_member_on_every_partition_of_its_topics(history):
    share = ShareGroups()
    share.cluster.create("t", 2)
    share.cluster.create("u", 1)  # "v" is created by its first "grow"
    epochs: dict[str, int] = {}  # the epoch each member was last told
    gone: list[tuple[str, str]] = []
    for step, name, argument in history:
        if step == "grow":
            if name in share.cluster.topics:
                share.cluster.grow(name, len(share.cluster.topics[name].partitions) + argument)
            else:
                share.cluster.create(name, argument)
            share.protocol.on_topics_changed()
            continue
        if step == "wait":
            before = set(share.group().members) if GROUP in share.protocol.groups else set()
            share.advance(argument)
            after = set(share.group().members) if GROUP in share.protocol.groups else set()
            gone += [(GROUP, m) for m in sorted(before - after)]
            for member_id in before - after:
                del epochs[member_id]
            continue
        if step == "join":
            result = share.join(name, argument)
        elif name not in epochs:
            assert share.heartbeat(name, 1).error is E.unknown_member_id
            continue
        elif step == "leave":
            result = share.heartbeat(name, -1)
            assert result.error is E.none
            del epochs[name]
            gone.append((GROUP, name))
            continue
        else:
            result = share.heartbeat(name, epochs[name],
                                     topics=argument if step == "subscribe" else None)
        assert result.error is E.none
        group = share.group()
        member = group.members[name]
        assert result.member_epoch == member.member_epoch == group.group_epoch
        assert result.member_epoch >= epochs.get(name, 0)
        epochs[name] = result.member_epoch
        topics = share.cluster.topics
        assert member.assigned == {
            topics[t].topic_id: frozenset(range(len(topics[t].partitions)))
            for t in set(member.subscribed_topic_names) if t in topics}
        if result.assignment is not None:
            assert result.assignment == member.assigned

    assert sorted(share.removed) == sorted(gone)  # each once, and no other
    if GROUP in share.protocol.groups:
        assert set(share.group().members) == set(epochs)
        # Rebuilt from its records, the group is the one that wrote them.
        assert snapshot(share.restart().group()) == snapshot(share.group())
