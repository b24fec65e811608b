"""Committed offsets: generation fencing, persistence in __consumer_offsets across a
restart, retention, and deleting offsets and groups."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from group_harness import GROUP, Groups, fetched
from odradek.coordinator.group.offsets_topic import (
    GroupKey,
    OffsetKey,
    decode_key,
    decode_offset_commit_value,
)
from odradek.protocol.topic_partition import TopicPartition

E = ErrorCode
T0, T1, OTHER = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("other", 0)
MINUTE_MS = 60_000


def test_a_simple_commit_without_a_generation_is_stored_with_its_metadata(groups):
    assert groups.commit({T0: 5, T1: 7}) == {T0: E.none, T1: E.none}
    assert fetched(groups, [T0, T1, OTHER]) == {T0: (5, "meta"), T1: (7, "meta"), OTHER: None}
    assert fetched(groups) == {T0: (5, "meta"), T1: (7, "meta")}
    [(key, value), _] = groups.store.records()
    assert decode_key(key) == OffsetKey(GROUP, T0)
    assert decode_offset_commit_value(value).offset == 5


def test_an_unknown_group_has_no_offsets_and_no_error(groups):
    assert fetched(groups, [T0], group="nobody") == {T0: None}
    assert fetched(groups, None, group="nobody") == {}


def test_a_member_commits_with_its_generation_and_is_fenced_with_a_stale_one(groups):
    (leader, follower), generation = groups.form(2)
    assert groups.commit({T0: 1}, member_id=leader, generation=generation) == {T0: E.none}
    assert groups.commit({T0: 2}, member_id=leader, generation=generation - 1) == {
        T0: E.illegal_generation}
    assert groups.commit({T0: 2}, member_id="gone", generation=generation) == {
        T0: E.unknown_member_id}
    # Without a generation, only a group with no members takes commits.
    assert groups.commit({T0: 2}) == {T0: E.unknown_member_id}
    assert groups.commit({T0: 2}, member_id="x", generation=3, group="new-group") == {
        T0: E.illegal_generation}
    assert fetched(groups, [T0]) == {T0: (1, "meta")}


def test_between_join_and_sync_a_commit_is_told_to_wait_for_the_rebalance(groups):
    leader, _ = groups.join_new()
    groups.advance(3_000)
    assert groups.state() == "CompletingRebalance"
    assert groups.commit({T0: 1}, member_id=leader, generation=1) == {
        T0: E.rebalance_in_progress}


def test_a_member_may_still_commit_while_the_group_prepares_a_rebalance(groups):
    (leader, follower), generation = groups.form(2)
    groups.join_new()
    assert groups.state() == "PreparingRebalance"
    assert groups.commit({T0: 9}, member_id=follower, generation=generation) == {T0: E.none}


def test_metadata_over_offset_metadata_max_bytes_is_refused_per_partition():
    groups = Groups(**{"offset.metadata.max.bytes": 3})
    [errors] = groups.send_commit({T0: (1, -1, "long"), T1: (1, -1, "ok")})
    assert errors == {T0: E.offset_metadata_too_large, T1: E.none}


def test_a_failed_append_is_the_commits_error_in_kafkas_terms(groups):
    groups.store.fail_with = E.message_too_large
    assert groups.commit({T0: 1}) == {T0: E.invalid_commit_offset_size}
    groups.store.fail_with = E.kafka_storage_error
    assert groups.commit({T0: 1}) == {T0: E.not_coordinator}
    groups.store.fail_with = None
    assert fetched(groups, [T0]) == {T0: None}


def test_offsets_and_groups_survive_a_restart_and_members_keep_their_generation(groups):
    (leader, follower), generation = groups.form(2)
    groups.commit({T0: 10, T1: 20}, member_id=leader, generation=generation)
    groups.commit({T0: 11}, member_id=follower, generation=generation)
    groups.commit({OTHER: 3}, group="simple")

    restarted = groups.restart()

    assert fetched(restarted, [T0, T1]) == {T0: (11, "meta"), T1: (20, "meta")}
    assert fetched(restarted, group="simple") == {OTHER: (3, "meta")}
    assert restarted.state() == "Stable"
    assert restarted.heartbeat(follower, generation) is E.none
    [sync] = restarted.sync(follower, generation)
    assert sync.assignment == follower.encode()
    assert restarted.state("simple") == "Empty"


def test_a_member_that_never_comes_back_after_a_restart_expires_as_before(groups):
    (leader, follower), generation = groups.form(2)
    restarted = groups.restart()
    restarted.advance(5_000)
    assert restarted.heartbeat(leader, generation) is E.none
    restarted.advance(5_000)
    assert restarted.state() == "PreparingRebalance"  # the follower's session ended


def test_deleting_a_group_needs_it_empty_and_leaves_nothing_after_a_restart(groups):
    (leader, follower), generation = groups.form(2)
    groups.commit({T0: 1}, member_id=leader, generation=generation)
    assert groups.delete_groups([GROUP, "nobody"]) == {
        GROUP: E.non_empty_group, "nobody": E.group_id_not_found}
    groups.coordinator.leave_group(GROUP, [(leader, None), (follower, None)])

    assert groups.delete_groups([GROUP]) == {GROUP: E.none}

    assert groups.state() == "Dead"
    tombstones = [decode_key(k) for k, v in groups.store.records() if v is None]
    assert tombstones == [OffsetKey(GROUP, T0), GroupKey(GROUP)]
    restarted = groups.restart()
    assert restarted.state() == "Dead" and fetched(restarted, [T0]) == {T0: None}


def test_offsets_of_subscribed_topics_cannot_be_deleted_while_the_group_has_members(groups):
    (leader, _), generation = groups.form(2)
    groups.commit({T0: 1, OTHER: 2}, member_id=leader, generation=generation)

    error, errors = groups.delete_offsets([T0, OTHER])

    assert (error, errors) == (E.none, {T0: E.group_subscribed_to_topic, OTHER: E.none})
    assert fetched(groups.restart(), [T0, OTHER]) == {T0: (1, "meta"), OTHER: None}
    assert groups.delete_offsets([T0], group="nobody") == (E.group_id_not_found, {})


def test_offsets_of_an_empty_group_expire_after_the_retention_since_it_became_empty(groups):
    (leader, follower), generation = groups.form(2)
    groups.commit({T0: 1}, member_id=leader, generation=generation)
    groups.advance(20 * MINUTE_MS - 10_000)  # committed long ago, but the group was active
    for member in (leader, follower):
        groups.heartbeat(member, generation)
    groups.coordinator.leave_group(GROUP, [(leader, None), (follower, None)])

    groups.advance(10 * MINUTE_MS - 1_000)
    assert fetched(groups, [T0]) == {T0: (1, "meta")}
    groups.advance(1_000)

    assert fetched(groups, [T0]) == {T0: None}
    assert groups.state() == "Dead"
    assert groups.restart().state() == "Dead"


def test_offsets_of_topics_a_stable_group_no_longer_reads_expire_after_their_commit(groups):
    (leader, follower), generation = groups.form(2)
    groups.commit({T0: 1, OTHER: 1}, member_id=leader, generation=generation)
    for _ in range(11):
        groups.advance(MINUTE_MS // 12)  # keep the members alive
        for member in (leader, follower):
            groups.heartbeat(member, generation)
    assert fetched(groups, [T0, OTHER]) == {T0: (1, "meta"), OTHER: (1, "meta")}
    for _ in range(12 * 10):
        groups.advance(MINUTE_MS // 12)
        for member in (leader, follower):
            groups.heartbeat(member, generation)
    assert fetched(groups, [T0, OTHER]) == {T0: (1, "meta"), OTHER: None}  # KIP-496


def test_a_deleted_topics_offsets_leave_every_group_and_do_not_come_back_after_a_restart(
        groups):
    (leader, _), generation = groups.form(2)
    groups.commit({T0: 1, T1: 2, OTHER: 3}, member_id=leader, generation=generation)
    groups.commit({T0: 4, OTHER: 5}, group="simple")
    groups.commit({T1: 6}, group="only-t")

    groups.coordinator.on_partitions_deleted([T0, T1])

    assert fetched(groups) == {OTHER: (3, "meta")}
    assert groups.state() == "Stable"  # members keep their group
    assert fetched(groups, group="simple") == {OTHER: (5, "meta")}
    assert groups.state("only-t") == "Dead"  # empty, with no offsets left
    tombstones = {decode_key(k) for k, v in groups.store.records() if v is None}
    assert tombstones == {OffsetKey(GROUP, T0), OffsetKey(GROUP, T1), OffsetKey("simple", T0),
                          OffsetKey("only-t", T1)}
    restarted = groups.restart()
    assert fetched(restarted) == {OTHER: (3, "meta")}
    assert fetched(restarted, group="simple") == {OTHER: (5, "meta")}
    assert restarted.state("only-t") == "Dead"


def test_offsets_of_a_deleted_topic_stay_while_their_tombstones_cannot_be_written(groups):
    groups.commit({T0: 1})
    groups.store.fail_with = E.kafka_storage_error

    groups.coordinator.on_partitions_deleted([T0])

    assert fetched(groups) == {T0: (1, "meta")}  # as the log still has them
    groups.store.fail_with = None
    assert fetched(groups.restart()) == {T0: (1, "meta")}


def test_a_resigned_partition_unloads_its_groups_and_an_elected_one_loads_them_again(groups):
    partition = groups.coordinator.manager.partition_for(GROUP)
    groups.commit({T0: 5})
    member, responses = groups.join_new()
    groups.coordinator.on_resigned(partition)
    # The member waiting in the join phase is sent to find the new coordinator.
    assert [r.error for r in responses] == [E.not_coordinator]
    assert groups.coordinator.fetch_offsets(GROUP, [T0])[0] is E.not_coordinator
    assert groups.commit({T0: 6}) == {T0: E.not_coordinator}
    groups.coordinator.on_elected(partition)
    assert fetched(groups, [T0]) == {T0: (5, "meta")}


def test_resigning_one_partition_keeps_the_groups_of_the_others(groups):
    other = next(g for g in (f"g{i}" for i in range(100))
                 if groups.coordinator.manager.partition_for(g)
                 != groups.coordinator.manager.partition_for(GROUP))
    groups.commit({T0: 5})
    groups.commit({T0: 9}, group=other)
    groups.coordinator.on_resigned(groups.coordinator.manager.partition_for(GROUP))
    assert fetched(groups, [T0], group=other) == {T0: (9, "meta")}
