"""The classic group protocol, as clients drive it: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, with sessions and rebalance timeouts on a fake clock."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from group_harness import (
    GROUP,
    REBALANCE_MS,
    SESSION_MS,
    Groups,
    MemoryStore,
    static_group,
    subscription,
)

E = ErrorCode


def test_a_new_member_first_gets_its_id_then_joins_after_the_initial_delay(groups):
    [required] = groups.join(client_id="app")
    assert required.error is E.member_id_required
    assert required.member_id.startswith("app-")

    responses = groups.join(required.member_id)
    groups.advance(2_999)
    assert responses == []  # group.initial.rebalance.delay.ms: waiting for more members
    groups.advance(1)

    [joined] = responses
    assert (joined.error, joined.generation_id, joined.leader_id) == (
        E.none, 1, required.member_id)
    assert joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [required.member_id]
    assert groups.state() == "CompletingRebalance"


def test_members_starting_together_join_one_generation_and_only_the_leader_gets_members(groups):
    ids, generation = groups.form(3)
    assert generation == 1
    assert groups.state() == "Stable"


def test_the_leaders_assignment_reaches_every_member_and_is_written_first(groups):
    first, first_joined = groups.join_new()
    second, second_joined = groups.join_new()
    groups.advance(3_000)  # the second member came during the delay: one more delay
    assert first_joined == []
    groups.advance(3_000)
    leader = first_joined[0].leader_id
    follower = second if leader == first else first
    assert len(first_joined[0].members) + len(second_joined[0].members) == 2

    follower_sync = groups.sync(follower, 1)
    assert follower_sync == []  # waits for the leader
    leader_sync = groups.sync(leader, 1, {leader: b"A", follower: b"B"})

    assert leader_sync[0].assignment == b"A" and follower_sync[0].assignment == b"B"
    assert follower_sync[0].protocol_name == "range"
    assert groups.state() == "Stable"
    assert groups.store.records()  # the generation is in __consumer_offsets
    assert groups.sync(follower, 1)[0].assignment == b"B"  # asked again while Stable


def test_a_member_joining_a_stable_group_makes_the_others_rejoin_through_heartbeats(groups):
    (leader, follower), generation = groups.form(2)
    newcomer, newcomer_joined = groups.join_new()
    assert groups.state() == "PreparingRebalance"

    assert groups.heartbeat(follower, generation) is E.rebalance_in_progress
    follower_joined = groups.join(follower)
    assert newcomer_joined == [] and follower_joined == []  # the leader has not rejoined
    leader_joined = groups.join(leader)

    assert [r[0].generation_id for r in (leader_joined, follower_joined, newcomer_joined)] == [
        generation + 1] * 3
    assert len(leader_joined[0].members) == 3
    assert groups.heartbeat(follower, generation) is E.illegal_generation


def test_a_member_whose_session_expires_is_removed_and_the_group_rebalances(groups):
    (leader, follower), generation = groups.form(2)
    groups.advance(SESSION_MS - 1)
    assert groups.heartbeat(leader, generation) is E.none
    groups.advance(1)  # the follower sent nothing for a whole session timeout
    assert groups.state() == "PreparingRebalance"
    assert groups.heartbeat(follower, generation) is E.unknown_member_id
    [rejoined] = groups.join(leader)
    assert (rejoined.generation_id, [m.member_id for m in rejoined.members]) == (
        generation + 1, [leader])


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed(groups):
    (leader, follower), generation = groups.form(2)
    [newcomer_required] = groups.join()
    newcomer = groups.join(newcomer_required.member_id)
    leader_joined = groups.join(leader)
    # The follower keeps heartbeating but never rejoins (stuck in its poll loop).
    for _ in range(REBALANCE_MS // 5_000 - 1):
        groups.advance(5_000)
        assert groups.heartbeat(follower, generation) is E.rebalance_in_progress
    assert leader_joined == []
    groups.advance(5_000)
    assert leader_joined and newcomer
    assert {m.member_id for m in leader_joined[0].members} == {
        leader, newcomer_required.member_id}
    assert groups.heartbeat(follower, generation) is E.unknown_member_id


def test_members_that_join_but_never_sync_are_removed_after_the_rebalance_timeout(groups):
    (leader, follower), generation = groups.form(2)
    groups.join(leader)  # a leader's JoinGroup always rebalances
    [follower_joined] = groups.join(follower)
    groups.sync(leader, generation + 1, {})
    for _ in range(REBALANCE_MS // 5_000 - 1):
        groups.advance(5_000)
        assert groups.heartbeat(follower, generation + 1) is E.none
        assert groups.heartbeat(leader, generation + 1) is E.none
    assert groups.state() == "Stable"
    groups.advance(5_000)  # the follower never sent its SyncGroup
    assert groups.state() == "PreparingRebalance"
    assert follower not in groups.coordinator.manager.groups[GROUP].members


def test_a_leaving_member_triggers_a_rebalance_and_the_last_one_empties_the_group(groups):
    (leader, follower), generation = groups.form(2)
    assert groups.coordinator.leave_group(GROUP, [(follower, None)]) == (E.none, [E.none])
    assert groups.state() == "PreparingRebalance"
    [rejoined] = groups.join(leader)
    assert rejoined.generation_id == generation + 1
    groups.sync(leader, generation + 1, {leader: b"all"})

    assert groups.coordinator.leave_group(GROUP, [(leader, None), ("ghost", None)]) == (
        E.none, [E.none, E.unknown_member_id])
    assert groups.state() == "Empty"
    assert groups.coordinator.manager.groups[GROUP].generation_id == generation + 2


def test_a_static_member_rejoining_a_stable_group_keeps_its_place_without_a_rebalance(groups):
    dynamic, static = static_group(groups)

    # The pod restarts: it knows its instance id, not its member id.
    [rejoined] = groups.join(instance="pod-1")

    assert rejoined.error is E.none and rejoined.member_id != static
    assert rejoined.generation_id == 1  # no rebalance
    assert groups.state() == "Stable"
    assert groups.sync(rejoined.member_id, 1, instance="pod-1")[0].assignment == b"S"
    assert groups.heartbeat(dynamic, 1) is E.none  # the other member saw nothing
    # The old member id is fenced.
    assert groups.heartbeat(static, 1, instance="pod-1") is E.fenced_instance_id
    assert groups.heartbeat(rejoined.member_id, 1, instance="pod-1") is E.none
    # And the replacement was written: a restart knows the new member id.
    restarted = groups.restart()
    assert restarted.heartbeat(rejoined.member_id, 1, instance="pod-1") is E.none


def test_a_static_leader_rejoining_learns_it_leads_but_skips_the_assignment(groups):
    static, responses = groups.join_new(instance="pod-0")
    groups.advance(3_000)
    groups.sync(static, 1, {static: b"x"})

    [v9] = groups.join(instance="pod-0", version=9)
    assert (v9.leader_id, v9.skip_assignment) == (v9.member_id, True)
    assert [m.member_id for m in v9.members] == [v9.member_id]
    [v8] = groups.join(instance="pod-0", version=8)
    assert v8.leader_id == v9.member_id != v8.member_id  # before v9: the old leader id
    assert groups.state() == "Stable"


def test_the_protocol_is_chosen_by_the_members_votes_among_those_all_support(groups):
    a, b = subscription("t"), subscription("t")
    joined = [groups.join_new(protocols=protocols)[1] for protocols in (
        (("cooperative-sticky", a), ("range", a)),
        (("range", b), ("cooperative-sticky", b)),
        (("range", b), ("roundrobin", b)),
    )]
    for _ in range(3):
        groups.advance(3_000)
    assert {r[0].protocol_name for r in joined} == {"range"}  # the only common one


def test_a_member_with_no_protocol_in_common_is_refused(groups):
    groups.form(1)
    [required] = groups.join()
    [refused] = groups.join(required.member_id, protocols=(("roundrobin", b""),))
    assert refused.error is E.inconsistent_group_protocol


def test_session_timeouts_outside_the_brokers_bounds_are_refused(groups):
    [refused] = groups.join(session_ms=999)
    assert refused.error is E.invalid_session_timeout


def test_requests_for_unknown_members_and_groups_say_so():
    groups = Groups()
    assert groups.heartbeat("nobody", 1) is E.unknown_member_id
    assert groups.join("nobody")[0].error is E.unknown_member_id
    assert groups.sync("nobody", 1)[0].error is E.unknown_member_id
    assert groups.join(group="")[0].error is E.invalid_group_id


def test_a_coordinator_without_its_partition_answers_not_coordinator():
    class LeadingNothing(MemoryStore):
        def hosted_partitions(self):
            return []

    assert Groups(LeadingNothing()).join()[0].error is E.not_coordinator


def test_a_member_waiting_in_join_group_is_answered_when_the_broker_stops(groups):
    (leader, follower), generation = groups.form(2)
    waiting = groups.join(leader)  # waits for the follower to rejoin
    groups.coordinator.shutdown()
    assert waiting[0].error is E.not_coordinator


def test_a_failed_write_of_the_assignment_sends_members_back_to_join(groups):
    first, _ = groups.join_new()
    groups.advance(3_000)
    groups.store.fail_with = E.not_enough_replicas
    [failed] = groups.sync(first, 1, {first: b"x"})
    assert failed.error is E.coordinator_not_available
    assert groups.state() == "PreparingRebalance"
