"""Leader elections as Kafka's controller makes them."""

from __future__ import annotations

from odradek.controller.election import (
    Election,
    controlled_shutdown_leader,
    offline_partition_leader,
    preferred_replica_leader,
    reassignment_leader,
)


def test_offline_election_takes_the_first_live_isr_member_in_assignment_order():
    assert offline_partition_leader([1, 2, 3], [3, 2], live={2, 3}, unclean_allowed=False) \
        == Election(2, (3, 2))


def test_offline_election_drops_dead_replicas_from_the_isr():
    assert offline_partition_leader([1, 2, 3], [1, 2, 3], live={2, 3},
                                    unclean_allowed=False) == Election(2, (2, 3))


def test_without_a_live_isr_member_a_clean_election_picks_no_one():
    assert offline_partition_leader([1, 2, 3], [1], live={2, 3}, unclean_allowed=False) is None


def test_an_unclean_election_takes_a_live_replica_outside_the_isr_alone():
    assert offline_partition_leader([1, 2, 3], [1], live={3}, unclean_allowed=True) \
        == Election(3, (3,), unclean=True)


def test_no_live_replica_at_all_leaves_no_leader_even_unclean():
    assert offline_partition_leader([1, 2], [1], live={5}, unclean_allowed=True) is None


def test_the_preferred_replica_leads_only_from_the_isr():
    assert preferred_replica_leader([1, 2, 3], [2, 3, 1], live={1, 2, 3}) == Election(1, (2, 3, 1))
    assert preferred_replica_leader([1, 2, 3], [2, 3], live={1, 2, 3}) is None
    assert preferred_replica_leader([1, 2, 3], [2, 3, 1], live={2, 3}) is None


def test_controlled_shutdown_moves_leadership_and_leaves_the_isr():
    assert controlled_shutdown_leader([1, 2, 3], [1, 2, 3], live={1, 2, 3},
                                      shutting_down={1}) == Election(2, (2, 3))


def test_controlled_shutdown_with_no_other_isr_member_elects_no_one():
    assert controlled_shutdown_leader([1, 2], [1], live={1, 2}, shutting_down={1}) is None


def test_reassignment_takes_the_first_target_replica_in_the_isr():
    assert reassignment_leader([4, 5, 1], [1, 5, 4], live={1, 4, 5}) == Election(4, (1, 5, 4))
    assert reassignment_leader([4, 5], [1], live={1, 4, 5}) is None
