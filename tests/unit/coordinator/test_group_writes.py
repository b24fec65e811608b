"""Writes to __consumer_offsets complete later, as an acks=all append does once the in-sync
replicas have it: what a write decides happens only then, and only if the group has not
moved on meanwhile."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from group_harness import GROUP, Groups, fetched, static_group
from odradek.protocol.topic_partition import TopicPartition

E = ErrorCode
T0 = TopicPartition("t", 0)
MINUTE_MS = 60_000


def rebalanced(groups: Groups, leader: str, follower: str) -> int:
    """Both members rejoin (a leader's JoinGroup always rebalances): the next generation,
    waiting for the leader's assignment."""
    groups.join(leader)
    [joined] = groups.join(follower)
    assert groups.state() == "CompletingRebalance"
    return joined.generation_id


def test_the_leaders_assignment_reaches_the_members_only_once_it_is_written(groups):
    (leader, follower), generation = groups.form(2)
    generation = rebalanced(groups, leader, follower)
    groups.store.hold = True

    follower_sync = groups.sync(follower, generation)
    leader_sync = groups.sync(leader, generation, {leader: b"A", follower: b"B"})

    assert leader_sync == [] and follower_sync == []
    assert groups.state() == "CompletingRebalance"
    groups.store.release()
    assert (leader_sync[0].assignment, follower_sync[0].assignment) == (b"A", b"B")
    assert groups.state() == "Stable"


@pytest.mark.parametrize("outcome", [None, E.not_enough_replicas], ids=["written", "failed"])
def test_an_assignment_written_after_the_group_moved_on_changes_nothing(groups, outcome):
    (leader, follower), generation = groups.form(2)
    generation = rebalanced(groups, leader, follower)
    groups.store.hold, groups.store.fail_with = True, outcome
    leader_sync = groups.sync(leader, generation, {leader: b"A", follower: b"B"})

    # The follower leaves while the assignment is written: a new rebalance starts.
    groups.coordinator.leave_group(GROUP, [(follower, None)])
    [rejoined] = groups.join(leader)
    groups.store.release()

    assert [s.error for s in leader_sync] == [E.rebalance_in_progress]
    assert rejoined.generation_id == generation + 1
    assert groups.state() == "CompletingRebalance"  # neither Stable nor rebalancing again
    groups.store.hold, groups.store.fail_with = False, None
    [synced] = groups.sync(leader, generation + 1, {leader: b"all"})
    assert synced.assignment == b"all"


def test_a_static_member_rejoining_a_stable_group_is_answered_once_its_new_id_is_written(
        groups):
    static_group(groups)
    groups.store.hold = True
    rejoined = groups.join(instance="pod-1")
    assert rejoined == []
    groups.store.release()
    assert rejoined[0].error is E.none and rejoined[0].generation_id == 1


def test_a_static_member_whose_new_id_cannot_be_written_is_refused_and_keeps_its_old_one(
        groups):
    _, static = static_group(groups)
    groups.store.fail_with = E.not_enough_replicas

    [refused] = groups.join(instance="pod-1")

    assert (refused.error, refused.member_id) == (E.coordinator_not_available, "")
    assert groups.heartbeat(static, 1, instance="pod-1") is E.none
    assert groups.state() == "Stable"


def test_a_static_member_whose_write_fails_after_the_group_moved_on_stays_replaced(groups):
    dynamic, static = static_group(groups)
    groups.store.hold, groups.store.fail_with = True, E.not_enough_replicas
    rejoined = groups.join(instance="pod-1")
    # A new member joins meanwhile; the rebalance answers the static member's JoinGroup.
    newcomer, _ = groups.join_new()
    groups.join(dynamic)
    groups.store.release()

    [answer] = rejoined
    assert (answer.error, answer.generation_id) == (E.none, 2)
    groups.store.hold, groups.store.fail_with = False, None
    assert groups.heartbeat(answer.member_id, 2, instance="pod-1") is E.none
    assert groups.heartbeat(static, 2, instance="pod-1") is E.fenced_instance_id


def test_an_offset_commit_is_answered_and_fetched_only_once_it_is_written(groups):
    groups.store.hold = True
    answers = groups.send_commit({T0: (5, -1, "meta")})
    assert answers == []
    assert fetched(groups, [T0]) == {T0: None}
    groups.store.release()
    assert answers == [{T0: E.none}]
    assert fetched(groups, [T0]) == {T0: (5, "meta")}


def test_a_write_that_fails_once_waited_for_gives_kafkas_error_codes(groups):
    leader, _ = groups.join_new()
    groups.advance(3_000)
    groups.store.hold, groups.store.fail_with = True, E.not_enough_replicas
    sync = groups.sync(leader, 1, {leader: b"x"})
    commit = groups.send_commit({T0: (5, -1, "meta")}, group="simple")
    groups.store.release()

    assert [s.error for s in sync] == [E.coordinator_not_available]
    assert groups.state() == "PreparingRebalance"
    assert commit == [{T0: E.coordinator_not_available}]
    assert fetched(groups, [T0], group="simple") == {T0: None}


def test_delete_groups_is_answered_once_the_tombstones_are_written(groups):
    groups.commit({T0: 1})
    groups.store.hold = True
    answers: list[dict] = []
    groups.coordinator.delete_groups([GROUP], answers.append)
    assert answers == [] and groups.state() == "Empty"
    groups.store.release()
    assert answers == [{GROUP: E.none}] and groups.state() == "Dead"


def test_a_group_whose_first_commit_is_being_written_outlives_a_retention_check(groups):
    groups.store.hold = True
    answers = groups.send_commit({T0: (5, -1, "meta")}, group="simple")
    groups.advance(1_000)  # a retention check sees an Empty group without offsets yet
    groups.store.release()
    assert answers == [{T0: E.none}]
    assert fetched(groups, group="simple") == {T0: (5, "meta")}


def test_an_offset_committed_while_its_expiry_is_written_is_kept_as_the_log_keeps_it(groups):
    groups.commit({T0: 1}, group="simple")
    groups.store.hold = True
    groups.advance(10 * MINUTE_MS)  # the offset expires: its tombstone is being written
    answers = groups.send_commit({T0: (2, -1, "meta")}, group="simple")
    groups.store.release()

    assert answers == [{T0: E.none}]
    assert fetched(groups, group="simple") == {T0: (2, "meta")}
    assert fetched(groups.restart(), group="simple") == {T0: (2, "meta")}
