"""A member's next step towards its target assignment (``reconciliation.reconcile``), as a
pure function: the cases of Kafka's ``CurrentAssignmentBuilderTest``, and a few more.

Each case gives the member as the coordinator knows it, the target (its epoch and
partitions), who holds each partition (``held``: the epoch of the member holding it, -1 when
free) and what the member's heartbeat says it owns (None: the heartbeat left it out)."""

from __future__ import annotations

import uuid

import pytest

from odradek.coordinator.group.consumer_group import ConsumerGroupMember, MemberState
from odradek.coordinator.group.reconciliation import FencedMemberEpoch, reconcile

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
S = MemberState


def parts(t1=(), t2=()) -> dict[uuid.UUID, frozenset[int]]:
    """Partitions of the topics T1 and T2 (topics without any are left out)."""
    return {topic: frozenset(ps) for topic, ps in ((T1, t1), (T2, t2)) if ps}


def member(state: MemberState, epoch: int, previous: int, assigned, pending=None
           ) -> ConsumerGroupMember:
    return ConsumerGroupMember("m", member_epoch=epoch, previous_member_epoch=previous,
                               state=state, assigned=assigned, pending_revocation=pending or {})


def held(epoch: int = -1, **by_topic: int):
    """Every partition is held at ``epoch``, or a topic's at ``by_topic``'s (t1=, t2=)."""
    epochs = {T1: by_topic.get("t1", epoch), T2: by_topic.get("t2", epoch)}
    return lambda topic_id, partition: epochs[topic_id]


def test_a_stable_member_already_at_the_target_epoch_is_left_as_it_is():
    current = member(S.STABLE, 11, 10, parts((1, 2), (3,)))
    assert reconcile(current, 11, parts((4,)), held(), None) is current


def test_stable_to_stable_when_the_target_keeps_its_partitions():
    """Kafka's testStableToStable: only the epoch moves."""
    current = member(S.STABLE, 10, 10, parts((1, 2, 3), (4, 5, 6)))
    after = reconcile(current, 11, parts((1, 2, 3), (4, 5, 6)), held(10), None)
    assert after == member(S.STABLE, 11, 10, parts((1, 2, 3), (4, 5, 6)))


def test_stable_to_stable_with_new_free_partitions():
    """testStableToStableWithNewPartitions: free partitions are given at once."""
    current = member(S.STABLE, 10, 10, parts((1, 2, 3), (4, 5, 6)))
    after = reconcile(current, 11, parts((1, 2, 3, 4), (4, 5, 6, 7)), held(-1), None)
    assert after == member(S.STABLE, 11, 10, parts((1, 2, 3, 4), (4, 5, 6, 7)))


def test_stable_to_unrevoked_partitions_keeps_the_epoch_until_the_member_revokes():
    """testStableToUnrevokedPartitions: partitions to revoke come first; the epoch waits
    and nothing new is given meanwhile."""
    current = member(S.STABLE, 10, 10, parts((1, 2, 3), (4, 5, 6)))
    after = reconcile(current, 11, parts((2, 3, 4), (5, 6, 7)), held(-1), None)
    assert after == member(S.UNREVOKED_PARTITIONS, 10, 10, parts((2, 3), (5, 6)),
                           parts((1,), (4,)))


def test_stable_to_unreleased_partitions_when_the_new_ones_are_still_held():
    """testStableToUnreleasedPartitions: the member takes the target epoch with what it
    keeps; the partitions another member holds follow later."""
    current = member(S.STABLE, 10, 10, parts((1, 2, 3), (4, 5, 6)))
    after = reconcile(current, 11, parts((1, 2, 3, 4), (4, 5, 6, 7)), held(10), None)
    assert after == member(S.UNRELEASED_PARTITIONS, 11, 10, parts((1, 2, 3), (4, 5, 6)))


def test_partitions_the_member_no_longer_owns_need_no_revocation():
    """testStableToUnreleasedPartitionsWithOwnedPartitionsNotHavingRevokedPartitions: the
    heartbeat says the member owns nothing, so partition 6 is dropped at once."""
    current = member(S.STABLE, 10, 10, parts((1, 2, 3), (4, 5, 6)))
    after = reconcile(current, 11, parts((1, 2, 3), (4, 5, 7)), held(t1=-1, t2=10), {})
    assert after == member(S.UNRELEASED_PARTITIONS, 11, 10, parts((1, 2, 3), (4, 5)))


def test_unrevoked_partitions_to_stable_once_the_heartbeat_no_longer_lists_them():
    """testUnrevokedPartitionsToStable."""
    current = member(S.UNREVOKED_PARTITIONS, 10, 10, parts((2, 3), (5, 6)), parts((1,), (4,)))
    after = reconcile(current, 11, parts((2, 3), (5, 6)), held(-1), parts((2, 3), (5, 6)))
    assert after == member(S.STABLE, 11, 10, parts((2, 3), (5, 6)))


@pytest.mark.parametrize("owned", [
    None,  # the heartbeat did not say: it still owns them
    parts((1, 2, 3), (5, 6)),
    parts((2, 3), (4, 5, 6)),
], ids=["not-said", "still-owns-t1-1", "still-owns-t2-4"])
def test_a_member_that_still_owns_a_revoked_partition_stays_where_it_is(owned):
    """testRemainsInUnrevokedPartitions, even when the target moved on meanwhile."""
    current = member(S.UNREVOKED_PARTITIONS, 10, 10, parts((2, 3), (5, 6)), parts((1,), (4,)))
    assert reconcile(current, 12, parts((3,), (6,)), held(-1), owned) is current


def test_unrevoked_to_unrevoked_when_the_target_moved_on_while_it_revoked():
    """testUnrevokedPartitionsToUnrevokedPartitions: having revoked, the member takes the
    next epoch (its own + 1), and must revoke what the newer target takes too."""
    current = member(S.UNREVOKED_PARTITIONS, 10, 10, parts((2, 3), (5, 6)), parts((1,), (4,)))
    after = reconcile(current, 12, parts((3,), (6,)), held(-1), parts((2, 3), (5, 6)))
    assert after == member(S.UNREVOKED_PARTITIONS, 11, 10, parts((3,), (6,)),
                           parts((2,), (5,)))


def test_unrevoked_to_unreleased_when_the_new_partitions_are_still_held():
    """testUnrevokedPartitionsToUnreleasedPartitions."""
    current = member(S.UNREVOKED_PARTITIONS, 11, 10, parts((2, 3), (5, 6)))
    after = reconcile(current, 11, parts((2, 3, 4), (5, 6, 7)), held(10),
                      parts((2, 3), (5, 6)))
    assert after == member(S.UNRELEASED_PARTITIONS, 11, 11, parts((2, 3), (5, 6)))


def test_unreleased_to_stable_at_a_newer_target_with_the_same_partitions():
    """testUnreleasedPartitionsToStable."""
    current = member(S.UNRELEASED_PARTITIONS, 11, 11, parts((2, 3), (5, 6)))
    after = reconcile(current, 12, parts((2, 3), (5, 6)), held(10), None)
    assert after == member(S.STABLE, 12, 11, parts((2, 3), (5, 6)))


def test_unreleased_to_stable_once_the_partitions_are_released():
    """testUnreleasedPartitionsToStableWithNewPartitions."""
    current = member(S.UNRELEASED_PARTITIONS, 11, 11, parts((2, 3), (5, 6)))
    after = reconcile(current, 11, parts((2, 3, 4), (5, 6, 7)), held(-1), None)
    assert after == member(S.STABLE, 11, 11, parts((2, 3, 4), (5, 6, 7)))


def test_unreleased_stays_unreleased_while_the_partitions_are_held():
    """testUnreleasedPartitionsToUnreleasedPartitions."""
    current = member(S.UNRELEASED_PARTITIONS, 11, 11, parts((2, 3), (5, 6)))
    after = reconcile(current, 11, parts((2, 3, 4), (5, 6, 7)), held(10), None)
    assert after == current


def test_unreleased_to_unrevoked_when_a_newer_target_takes_partitions_away():
    """testUnreleasedPartitionsToUnrevokedPartitions."""
    current = member(S.UNRELEASED_PARTITIONS, 11, 11, parts((2, 3), (5, 6)))
    after = reconcile(current, 12, parts((3,), (6,)), held(10), None)
    assert after == member(S.UNREVOKED_PARTITIONS, 11, 11, parts((3,), (6,)),
                           parts((2,), (5,)))


def test_a_member_in_an_unknown_state_is_fenced_until_it_owns_nothing():
    """testUnknownState: a state this broker does not know (written by a newer one) is
    given up: the member is fenced, and rejoining without partitions it gets its target."""
    current = member(S.UNKNOWN, 11, 11, parts((3,), (6,)), parts((2,), (5,)))
    with pytest.raises(FencedMemberEpoch):
        reconcile(current, 12, parts((3,), (6,)), held(10), None)
    with pytest.raises(FencedMemberEpoch):
        reconcile(current, 12, parts((3,), (6,)), held(10), parts((3,)))
    after = reconcile(current, 12, parts((3,), (6,)), held(11), {})
    assert after == member(S.STABLE, 12, 11, parts((3,), (6,)))


def test_a_new_member_gets_the_free_part_of_its_target_and_waits_for_the_rest():
    joining = ConsumerGroupMember("m")
    after = reconcile(joining, 2, parts((0, 1), (0,)), held(t1=-1, t2=1), {})
    assert after == member(S.UNRELEASED_PARTITIONS, 2, 0, parts((0, 1)))


def test_a_topic_gone_from_the_target_is_revoked_like_any_partition():
    current = member(S.STABLE, 4, 4, parts((0, 1), (0, 1)))
    after = reconcile(current, 5, parts((0, 1)), held(-1), parts((0, 1), (0, 1)))
    assert after == member(S.UNREVOKED_PARTITIONS, 4, 4, parts((0, 1)), parts((), (0, 1)))
    assert reconcile(after, 5, parts((0, 1)), held(-1), parts((0, 1))) == member(
        S.STABLE, 5, 4, parts((0, 1)))


def test_partitions_the_member_holds_itself_never_hold_it_back():
    """Its own partitions are held at its own epoch: only those it lacks can be
    unreleased."""
    current = member(S.STABLE, 1, 0, parts((0, 1)))
    after = reconcile(current, 2, parts((1,)), held(1), parts((1,)))
    assert after == member(S.STABLE, 2, 1, parts((1,)))
