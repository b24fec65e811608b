"""The group state table: the transitions Kafka's classic coordinator makes, and no others."""

from __future__ import annotations

import pytest

from odradek.coordinator.group.state import (
    GROUP_TRANSITIONS,
    GroupEvent,
    GroupState,
    IllegalGroupTransition,
    can_rebalance,
    next_state,
)

S, E = GroupState, GroupEvent


@pytest.mark.parametrize(("state", "event", "expected"), [
    (S.EMPTY, E.REBALANCE_TRIGGERED, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, E.MEMBERS_JOINED, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, E.ALL_MEMBERS_LEFT, S.EMPTY),
    (S.COMPLETING_REBALANCE, E.ASSIGNMENT_STORED, S.STABLE),
    (S.COMPLETING_REBALANCE, E.REBALANCE_TRIGGERED, S.PREPARING_REBALANCE),
    (S.STABLE, E.REBALANCE_TRIGGERED, S.PREPARING_REBALANCE),
    *[(state, E.GROUP_REMOVED, S.DEAD) for state in GROUP_TRANSITIONS],
])
def test_each_transition_kafka_makes_is_in_the_table(state, event, expected):
    assert next_state(state, event) is expected


def test_the_table_has_no_other_transition():
    assert sum(len(row) for row in GROUP_TRANSITIONS.values()) == 6 + len(GROUP_TRANSITIONS)


def test_the_table_covers_every_classic_state_and_no_consumer_protocol_state():
    # Assigning and Reconciling are derived from a consumer group's epochs, not a table.
    assert set(GROUP_TRANSITIONS) == set(S) - {S.ASSIGNING, S.RECONCILING}


@pytest.mark.parametrize(("state", "event"), [
    (S.STABLE, E.ASSIGNMENT_STORED),  # only a group waiting for its leader is assigned
    (S.EMPTY, E.MEMBERS_JOINED),  # a join phase ends only in PreparingRebalance
    (S.PREPARING_REBALANCE, E.REBALANCE_TRIGGERED),  # already rebalancing
    (S.DEAD, E.REBALANCE_TRIGGERED),  # a dead group never comes back
])
def test_an_event_outside_the_states_row_is_a_bug(state, event):
    with pytest.raises(IllegalGroupTransition):
        next_state(state, event)


def test_a_rebalance_can_start_from_empty_stable_and_completing_rebalance_only():
    assert {s for s in S if can_rebalance(s)} == {
        S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE}


def test_states_are_spelt_as_kafka_spells_them_on_the_wire():
    assert [str(s) for s in S] == [
        "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Assigning",
        "Reconciling"]
