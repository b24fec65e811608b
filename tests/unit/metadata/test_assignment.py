"""Replica placement: distinct replicas, leaders spread evenly, followers spread, racks."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.metadata.assignment import AssignmentError, assign_replicas
from odradek.metadata.model import BrokerInfo


def brokers(count: int, racks: list[str] | None = None) -> list[BrokerInfo]:
    return [BrokerInfo(i + 1, (), racks[i] if racks else None) for i in range(count)]


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 9), partitions=st.integers(1, 40), data=st.data())
def test_replicas_are_distinct_and_leaders_even(n, partitions, data):
    rf = data.draw(st.integers(1, n))
    assignment = assign_replicas(brokers(n), partitions, rf, rng=random.Random(7))
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf and len(set(replicas)) == rf
        assert set(replicas) <= set(range(1, n + 1))
    leaders = Counter(replicas[0] for replicas in assignment.values())
    # Leaders go round the brokers: no broker leads more than one more than another.
    counts = [leaders.get(b, 0) for b in range(1, n + 1)]
    assert max(counts) - min(counts) <= 1


def test_followers_of_one_leader_spread_over_the_other_brokers():
    assignment = assign_replicas(brokers(4), 12, 2, start_index=0, shift=0)
    followers_of_1 = {replicas[1] for replicas in assignment.values() if replicas[0] == 1}
    assert followers_of_1 == {2, 3, 4}  # not all on its neighbour


@settings(max_examples=200, deadline=None)
@given(per_rack=st.lists(st.integers(1, 3), min_size=2, max_size=4), partitions=st.integers(1, 30),
       data=st.data())
def test_with_racks_a_partition_spans_as_many_racks_as_it_can(per_rack, partitions, data):
    racks = [f"rack-{r}" for r, count in enumerate(per_rack) for _ in range(count)]
    n = len(racks)
    rf = data.draw(st.integers(1, n))
    cluster = brokers(n, racks)
    rack_of = {b.node_id: b.rack for b in cluster}
    assignment = assign_replicas(cluster, partitions, rf, rng=random.Random(3))
    for replicas in assignment.values():
        assert len(set(replicas)) == rf
        assert len({rack_of[r] for r in replicas}) == min(rf, len(per_rack))


def test_new_partitions_continue_the_numbering():
    assignment = assign_replicas(brokers(3), 2, 3, first_partition=4)
    assert sorted(assignment) == [4, 5]


@pytest.mark.parametrize("rf", [0, 4])
def test_impossible_replication_factors_are_refused(rf):
    with pytest.raises(AssignmentError, match="Replication factor"):
        assign_replicas(brokers(3), 1, rf)
