"""Algorithm R: the sample's size, its records, and that every record is equally likely to
be in it, also when the stream comes in micro-batches each with its own random source."""

from __future__ import annotations

import random

import pytest

from odradek.pipelines.reservoir import Reservoir, offer
from odradek.pipelines.reservoir_sample import batch_rng, pack_slots, unpack_slots


def test_the_first_records_fill_the_slots_in_order():
    reservoir = offer(Reservoir(3), ["a", "b"], random.Random(0))
    assert (reservoir.seen, reservoir.slots, reservoir.changed) == (2, ("a", "b"), {0, 1})
    reservoir = offer(reservoir, ["c"], random.Random(0))
    assert (reservoir.seen, reservoir.slots, reservoir.changed) == (3, ("a", "b", "c"), {2})


def test_a_full_reservoir_keeps_its_size_and_holds_distinct_records_of_the_stream():
    stream = list(range(1000))
    reservoir = offer(Reservoir(10), stream, random.Random(1))
    assert reservoir.seen == 1000
    assert len(set(reservoir.slots)) == 10
    assert set(reservoir.slots) <= set(stream)


def test_changed_names_exactly_the_slots_that_were_written():
    before = offer(Reservoir(5), range(5), random.Random(2))
    after = offer(before, range(5, 40), random.Random(3))
    written = {slot for slot in range(5) if after.slots[slot] != before.slots[slot]}
    assert after.changed == written
    assert offer(after, [], random.Random(4)).changed == frozenset()


def test_the_same_state_and_random_source_make_the_same_sample():
    state = offer(Reservoir(4), range(20), random.Random(5))
    replays = {offer(state, range(20, 60), batch_rng(9, state.seen)).slots for _ in range(3)}
    assert len(replays) == 1


# Chi-square critical value for 19 degrees of freedom at p = 0.001: a uniform sampler
# fails this check once in a thousand seeds, and the seed below is fixed.
CHI_SQUARE_19_DOF_P001 = 43.82


@pytest.mark.parametrize("batch_size", [1, 7, 20], ids=lambda n: f"batches-of-{n}")
def test_every_record_is_sampled_with_probability_size_over_n(batch_size):
    stream, size, runs = list(range(20)), 5, 4000
    times_sampled = dict.fromkeys(stream, 0)
    for run in range(runs):
        reservoir = Reservoir(size)
        for start in range(0, len(stream), batch_size):
            batch = stream[start:start + batch_size]
            reservoir = offer(reservoir, batch, batch_rng(run, reservoir.seen))
        for record in reservoir.slots:
            times_sampled[record] += 1
    expected = runs * size / len(stream)  # 1000
    chi_square = sum((count - expected) ** 2 / expected for count in times_sampled.values())
    assert chi_square < CHI_SQUARE_19_DOF_P001, times_sampled
    assert min(times_sampled.values()) > 0.85 * expected
    assert max(times_sampled.values()) < 1.15 * expected


def test_packed_slots_read_back_as_written():
    slots = (b"", b"x", bytes(range(256)) * 3, b'{"event_id":7}')
    assert unpack_slots(pack_slots(slots)) == slots
    assert unpack_slots(pack_slots(())) == ()
