"""Cutting offset ranges into tasks and micro-batches, as Spark's Kafka source does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from odradek.spark.offsets import (
    OffsetRange,
    from_positions,
    rate_limit,
    split_ranges,
    to_positions,
)


def test_positions_are_checkpointed_with_partitions_as_strings():
    offsets = {("a", 1): 5, ("a", 0): 3, ("b", 0): 7}
    assert to_positions(offsets) == {"a": {"0": 3, "1": 5}, "b": {"0": 7}}
    assert from_positions(to_positions(offsets)) == offsets


def test_without_min_partitions_each_partition_is_one_task_and_empty_ones_none():
    ranges = [OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 5, 5)]
    assert split_ranges(ranges, None) == [OffsetRange("a", 0, 0, 10)]


def test_min_partitions_cuts_ranges_in_proportion_to_their_size():
    ranges = [OffsetRange("a", 0, 0, 300), OffsetRange("a", 1, 0, 100)]
    split = split_ranges(ranges, 4)
    assert [(r.partition, r.start, r.end) for r in split] == [
        (0, 0, 100), (0, 100, 200), (0, 200, 300), (1, 0, 100)]


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=8), st.integers(1, 64))
def test_split_ranges_cover_every_offset_once(sizes, min_partitions):
    ranges = [OffsetRange("t", p, 1000, 1000 + size) for p, size in enumerate(sizes)]
    split = split_ranges(ranges, min_partitions)
    covered = sorted((r.partition, o) for r in split for o in range(r.start, r.end))
    assert covered == [(p, o) for p, size in enumerate(sizes) for o in range(1000, 1000 + size)]


def test_the_rate_limit_shares_a_micro_batch_in_proportion_to_what_waits():
    start = {("a", 0): 0, ("a", 1): 100, ("a", 2): 50}
    latest = {("a", 0): 300, ("a", 1): 200, ("a", 2): 50}
    assert rate_limit(start, latest, 40) == {("a", 0): 30, ("a", 1): 110, ("a", 2): 50}
    assert rate_limit(start, latest, 1000) == latest


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1,
                max_size=6), st.integers(1, 500))
def test_the_rate_limit_never_goes_back_or_past_the_end_and_always_progresses(
        pairs, max_rows):
    start = {("t", p): a for p, (a, _) in enumerate(pairs)}
    latest = {("t", p): a + b for p, (a, b) in enumerate(pairs)}
    end = rate_limit(start, latest, max_rows)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)
    if latest != start:
        assert end != start
