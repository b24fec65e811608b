"""A share-partition's in-flight records: acquiring, acknowledging, releasing, lock expiry,
the start offset's moves and the durable state, then the whole against a per-offset model."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from kio.schema.errors import ErrorCode

from odradek.coordinator.share.partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    InFlightRecords,
    SharePartition,
)
from odradek.coordinator.share.state_records import (
    RecordState,
    ShareSnapshot,
    ShareState,
    ShareUpdate,
    StateBatch,
    combine,
)

E = ErrorCode
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (
    RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
GAP, ACCEPT, RELEASE, REJECT = AcknowledgeType
SETTLED = (ACKNOWLEDGED, ARCHIVED)
LOCK_MS = 1_000


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def new(clock: Clock, start_offset: int = 0, **settings: int) -> SharePartition:
    return SharePartition.new(start_offset, clock, lock_duration_ms=LOCK_MS, **settings)


def ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, types)


def acquired(first: int, last: int, count: int, member: str = "a",
             deadline: int = LOCK_MS) -> InFlightRecords:
    return InFlightRecords(first, last, ACQUIRED, count, member, deadline)


def settled(first: int, last: int, state: RecordState, count: int = 1) -> InFlightRecords:
    return InFlightRecords(first, last, state, count, None, None)


# -- acquiring -------------------------------------------------------------------------


def test_a_new_share_partition_has_nothing_in_flight_and_fetches_from_its_start(clock):
    partition = new(clock, 42)
    assert (partition.start_offset, partition.end_offset, partition.in_flight_count()) == (
        42, 42, 0)
    assert partition.next_fetch_offset() == 42
    assert partition.next_lock_deadline() is None
    assert partition.state() == ShareState(0, 42, ())


def test_new_records_are_acquired_for_the_member_with_a_lock(clock):
    partition = new(clock)
    clock.now = 500
    assert partition.acquire("a", 0, 9, 100) == [AcquiredRecords(0, 9, 1)]
    assert partition.in_flight() == (acquired(0, 9, 1, deadline=500 + LOCK_MS),)
    assert (partition.end_offset, partition.next_fetch_offset()) == (10, 10)
    assert partition.next_lock_deadline() == 500 + LOCK_MS


def test_at_most_max_records_are_acquired(clock):
    partition = new(clock)
    assert partition.acquire("a", 0, 9, 4) == [AcquiredRecords(0, 3, 1)]
    assert partition.next_fetch_offset() == 4
    assert partition.acquire("a", 0, 9, 0) == []


def test_records_already_acquired_are_not_acquired_again(clock):
    partition = new(clock)
    partition.acquire("a", 0, 4, 100)
    # A fetch returns whole log batches: its data may begin before the fetch offset.
    assert partition.acquire("b", 2, 7, 100) == [AcquiredRecords(5, 7, 1)]
    assert partition.in_flight() == (acquired(0, 4, 1), acquired(5, 7, 1, "b"))


def test_fetched_data_below_the_start_offset_acquires_nothing_there(clock):
    partition = new(clock, 10)
    assert partition.acquire("a", 5, 12, 100) == [AcquiredRecords(10, 12, 1)]


def test_new_records_stop_at_the_in_flight_limit_but_redelivery_does_not(clock):
    partition = new(clock, max_in_flight_records=10)
    assert partition.acquire("a", 0, 19, 100) == [AcquiredRecords(0, 9, 1)]
    assert partition.acquire("b", 10, 19, 100) == []
    assert partition.acknowledge("a", [ack(5, 9, RELEASE)]) == E.none
    assert partition.next_fetch_offset() == 5
    assert partition.acquire("b", 5, 19, 100) == [AcquiredRecords(5, 9, 2)]
    # Settling the first records makes room.
    assert partition.acknowledge("a", [ack(0, 2, ACCEPT)]) == E.none
    assert partition.acquire("b", 10, 19, 100) == [AcquiredRecords(10, 12, 1)]
    assert partition.in_flight_count() == 10


def test_offsets_skipped_by_a_fetch_are_archived_or_passed_over(clock):
    partition = new(clock)
    # Nothing in flight: the start moves to the first record found.
    assert partition.acquire("a", 5, 6, 100) == [AcquiredRecords(5, 6, 1)]
    assert partition.start_offset == 5
    # Something in flight: the offsets between hold no record, and are archived.
    assert partition.acquire("a", 10, 11, 100) == [AcquiredRecords(10, 11, 1)]
    assert partition.in_flight() == (
        acquired(5, 6, 1), settled(7, 9, ARCHIVED, 0), acquired(10, 11, 1))
    assert partition.acknowledge("a", [ack(5, 6, ACCEPT)]) == E.none
    assert partition.start_offset == 10


def test_acquiring_a_large_batch_keeps_one_run_and_a_partial_ack_splits_it_at_its_edges(clock):
    partition = new(clock, max_in_flight_records=200_000)
    assert partition.acquire("a", 0, 99_999, 100_000) == [AcquiredRecords(0, 99_999, 1)]
    assert len(partition.in_flight()) == 1
    assert partition.acknowledge("a", [ack(500, 599, ACCEPT)]) == E.none
    assert partition.in_flight() == (
        acquired(0, 499, 1), settled(500, 599, ACKNOWLEDGED), acquired(600, 99_999, 1))
    assert partition.count_by_state() == {
        AVAILABLE: 0, ACQUIRED: 99_900, ACKNOWLEDGED: 100, ARCHIVED: 0}


# -- acknowledging ---------------------------------------------------------------------


def test_accept_acknowledges_and_the_start_moves_past_settled_records(clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    assert partition.acknowledge("a", [ack(0, 9, ACCEPT)]) == E.none
    assert (partition.start_offset, partition.end_offset, partition.in_flight()) == (10, 10, ())
    assert partition.next_lock_deadline() is None


def test_the_start_moves_only_past_a_settled_prefix(clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    assert partition.acknowledge("a", [ack(3, 5, ACCEPT)]) == E.none
    assert partition.start_offset == 0
    assert partition.acknowledge("a", [ack(0, 1, REJECT)]) == E.none
    assert partition.start_offset == 2
    assert partition.acknowledge("a", [ack(2, 2, GAP)]) == E.none
    assert partition.start_offset == 6
    assert partition.in_flight() == (acquired(6, 9, 1),)


def test_released_records_go_to_another_member_with_their_delivery_count_raised(clock):
    partition = new(clock)
    partition.acquire("a", 0, 4, 100)
    assert partition.acknowledge("a", [ack(0, 4, RELEASE)]) == E.none
    assert partition.in_flight() == (settled(0, 4, AVAILABLE, 1),)
    assert partition.next_fetch_offset() == 0
    clock.now = 10
    assert partition.acquire("b", 0, 4, 100) == [AcquiredRecords(0, 4, 2)]
    assert partition.in_flight() == (acquired(0, 4, 2, "b", 10 + LOCK_MS),)


def test_redelivery_comes_first_in_offset_order_then_new_records(clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    partition.acknowledge("a", [ack(2, 3, RELEASE), ack(6, 6, RELEASE)])
    assert partition.acquire("b", 2, 12, 100) == [
        AcquiredRecords(2, 3, 2), AcquiredRecords(6, 6, 2), AcquiredRecords(10, 12, 1)]


def test_reject_and_gap_archive(clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    assert partition.acknowledge("a", [ack(4, 5, REJECT), ack(6, 7, GAP)]) == E.none
    assert partition.in_flight() == (
        acquired(0, 3, 1), settled(4, 7, ARCHIVED), acquired(8, 9, 1))


def test_a_release_at_the_delivery_limit_archives(clock):
    partition = new(clock, delivery_count_limit=2)
    partition.acquire("a", 0, 0, 100)
    partition.acknowledge("a", [ack(0, 0, RELEASE)])
    assert partition.acquire("b", 0, 0, 100) == [AcquiredRecords(0, 0, 2)]
    assert partition.acknowledge("b", [ack(0, 0, RELEASE)]) == E.none
    assert (partition.start_offset, partition.in_flight()) == (1, ())
    assert partition.acquire("c", 0, 0, 100) == []


def test_a_type_per_offset_settles_each_offset_of_one_acquired_range(clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    assert partition.acknowledge("a", [ack(3, 8, ACCEPT, ACCEPT, RELEASE, REJECT, GAP,
                                           ACCEPT)]) == E.none
    assert partition.in_flight() == (
        acquired(0, 2, 1), settled(3, 4, ACKNOWLEDGED), settled(5, 5, AVAILABLE),
        settled(6, 7, ARCHIVED), settled(8, 8, ACKNOWLEDGED), acquired(9, 9, 1))


def test_a_member_cannot_acknowledge_records_another_holds(clock):
    partition = new(clock)
    partition.acquire("a", 0, 4, 100)
    partition.acquire("b", 5, 9, 100)
    assert partition.acknowledge("b", [ack(3, 6, ACCEPT)]) == E.invalid_record_state
    assert partition.acknowledge("b", [ack(0, 4, ACCEPT)]) == E.invalid_record_state
    assert partition.acknowledge("b", [ack(5, 9, ACCEPT)]) == E.none


@pytest.mark.parametrize("batch", [
    ack(0, 0, ACCEPT),  # AVAILABLE: released before
    ack(1, 1, ACCEPT),  # ACKNOWLEDGED already
    ack(3, 5, ACCEPT),  # 5 is past the end: never fetched
    ack(7, 9, ACCEPT),
])
def test_only_acquired_records_can_be_acknowledged(clock, batch):
    partition = new(clock)
    partition.acquire("a", 0, 4, 100)
    partition.acknowledge("a", [ack(0, 0, RELEASE), ack(1, 1, ACCEPT)])
    before = partition.in_flight()
    assert partition.acknowledge("a", [batch]) == E.invalid_record_state
    assert partition.in_flight() == before


def test_acknowledging_offsets_below_the_start_is_no_error_and_does_nothing_there(clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    partition.update_log_start_offset(5)  # retention took 0..4 while "a" held them
    assert partition.acknowledge("a", [ack(0, 6, ACCEPT)]) == E.none
    assert (partition.start_offset, partition.in_flight()) == (7, (acquired(7, 9, 1),))
    assert partition.acknowledge("b", [ack(0, 6, REJECT)]) == E.none


def test_a_bad_batch_changes_nothing_of_the_good_ones_before_it(clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    partition.acquire("b", 10, 19, 100)
    before = partition.in_flight()
    assert partition.acknowledge("a", [ack(0, 4, ACCEPT), ack(8, 12, ACCEPT)]) == (
        E.invalid_record_state)
    assert partition.in_flight() == before
    assert partition.acknowledge("a", [ack(0, 4, ACCEPT), ack(6, 7, 9)]) == E.invalid_request
    assert partition.in_flight() == before


@pytest.mark.parametrize("batches", [
    [ack(5, 4, ACCEPT)],  # first past last
    [ack(0, 3, ACCEPT, REJECT)],  # neither one type nor one per offset
    [ack(0, 1)],  # no type
    [ack(0, 0, 4)],  # no such type
    [ack(0, 0, -1)],
    [ack(0, 3, ACCEPT), ack(3, 5, ACCEPT)],  # overlapping
    [ack(4, 5, ACCEPT), ack(0, 1, ACCEPT)],  # out of order
])
def test_malformed_batches_are_an_invalid_request(clock, batches):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    assert partition.acknowledge("a", batches) == E.invalid_request


def test_no_batches_is_nothing_to_do(clock):
    assert new(clock).acknowledge("a", []) == E.none


# -- releasing -------------------------------------------------------------------------


def test_a_member_that_leaves_releases_what_it_holds_and_only_that(clock):
    partition = new(clock, delivery_count_limit=1)
    partition.acquire("a", 0, 4, 100)
    partition.acquire("b", 5, 9, 100)
    assert partition.release_member("a") is True
    # Delivered once, the limit: archived, and the start moves past them.
    assert partition.in_flight() == (acquired(5, 9, 1, "b"),)
    assert partition.release_member("a") is False
    assert partition.release_member("nobody") is False


def test_a_released_member_s_records_are_redelivered_below_the_limit(clock):
    partition = new(clock)
    partition.acquire("a", 0, 4, 100)
    partition.acknowledge("a", [ack(0, 0, ACCEPT)])
    partition.release_member("a")
    assert partition.in_flight() == (settled(1, 4, AVAILABLE),)
    assert partition.next_fetch_offset() == 1


def test_locks_expire_at_their_deadline(clock):
    partition = new(clock)
    partition.acquire("a", 0, 4, 100)
    clock.now = 300
    partition.acquire("b", 5, 9, 100)
    assert partition.next_lock_deadline() == LOCK_MS
    clock.now = LOCK_MS - 1
    assert partition.expire_locks() is False
    clock.now = LOCK_MS
    assert partition.expire_locks() is True
    assert partition.in_flight() == (settled(0, 4, AVAILABLE), acquired(5, 9, 1, "b", 1_300))
    assert partition.next_lock_deadline() == 1_300
    # The member whose lock expired can no longer acknowledge.
    assert partition.acknowledge("a", [ack(0, 4, ACCEPT)]) == E.invalid_record_state
    clock.now = 5_000
    assert partition.expire_locks() is True
    assert partition.next_lock_deadline() is None


def test_an_expired_lock_at_the_delivery_limit_archives(clock):
    partition = new(clock, delivery_count_limit=1)
    partition.acquire("a", 0, 4, 100)
    clock.now = LOCK_MS
    assert partition.expire_locks() is True
    assert (partition.start_offset, partition.in_flight()) == (5, ())


# -- moving the start ------------------------------------------------------------------


def test_the_log_start_moving_up_drops_what_is_below_it(clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    partition.update_log_start_offset(4)
    assert (partition.start_offset, partition.in_flight()) == (4, (acquired(4, 9, 1),))
    partition.update_log_start_offset(2)  # not a move up
    assert partition.start_offset == 4
    partition.update_log_start_offset(15)
    assert (partition.start_offset, partition.end_offset, partition.in_flight()) == (15, 15, ())
    assert partition.next_fetch_offset() == 15


def test_a_log_start_that_leaves_a_settled_prefix_moves_past_it(clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    partition.acknowledge("a", [ack(3, 5, ACCEPT)])
    partition.update_log_start_offset(2)
    assert partition.start_offset == 2
    partition.update_log_start_offset(3)
    assert partition.start_offset == 6


def test_resetting_the_start_clears_everything_in_a_new_state_epoch(clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    with pytest.raises(RuntimeError):
        partition.reset_start_offset(0)
    partition.release_member("a")
    partition.reset_start_offset(3)
    assert (partition.start_offset, partition.end_offset, partition.in_flight()) == (3, 3, ())
    assert partition.state() == ShareState(1, 3, ())
    assert partition.acquire("b", 0, 5, 100) == [AcquiredRecords(3, 5, 1)]


# -- the durable state -----------------------------------------------------------------


def test_the_state_writes_acquired_records_as_available_and_merges_alike_neighbours(clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    partition.acknowledge("a", [ack(2, 3, RELEASE), ack(6, 7, REJECT)])
    partition.acquire("b", 2, 2, 100)  # 2 is now ACQUIRED with count 2, 3 AVAILABLE with 1
    assert partition.state() == ShareState(0, 0, (
        StateBatch(0, 1, AVAILABLE, 1), StateBatch(2, 2, AVAILABLE, 2),
        StateBatch(3, 5, AVAILABLE, 1), StateBatch(6, 7, ARCHIVED, 1),
        StateBatch(8, 9, AVAILABLE, 1)))


def test_a_restored_share_partition_gives_the_same_state_and_fetches_its_available_records(
        clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    partition.acknowledge("a", [ack(0, 1, ACCEPT), ack(4, 4, RELEASE), ack(5, 6, REJECT)])
    state = partition.state()
    restored = SharePartition.from_state(state, clock, lock_duration_ms=LOCK_MS)
    assert restored.state() == state
    assert (restored.start_offset, restored.end_offset) == (2, 10)
    # What was acquired is delivered again, its delivery counted.
    assert restored.next_fetch_offset() == 2
    assert restored.acquire("b", 2, 12, 100) == [
        AcquiredRecords(2, 4, 2), AcquiredRecords(7, 9, 2), AcquiredRecords(10, 12, 1)]


def test_offsets_no_batch_covers_are_restored_as_never_delivered(clock):
    state = ShareState(4, 10, (StateBatch(12, 12, ARCHIVED, 1), StateBatch(14, 15, AVAILABLE, 2)))
    restored = SharePartition.from_state(state, clock)
    assert restored.state_epoch == 4
    assert restored.in_flight() == (
        settled(10, 11, AVAILABLE, 0), settled(12, 12, ARCHIVED), settled(13, 13, AVAILABLE, 0),
        settled(14, 15, AVAILABLE, 2))
    assert restored.state() == state
    assert restored.acquire("a", 10, 20, 100) == [
        AcquiredRecords(10, 11, 1), AcquiredRecords(13, 13, 1), AcquiredRecords(14, 15, 3),
        AcquiredRecords(16, 20, 1)]


def test_a_restored_state_that_starts_settled_moves_its_start(clock):
    restored = SharePartition.from_state(ShareState(0, 0, (
        StateBatch(0, 4, ACKNOWLEDGED, 1), StateBatch(5, 6, AVAILABLE, 1))), clock)
    assert restored.start_offset == 5
    assert SharePartition.from_state(ShareState(0, 0, (
        StateBatch(0, 4, ARCHIVED, 1),)), clock).in_flight() == ()


def test_a_record_restored_at_the_delivery_limit_is_archived_not_delivered(clock):
    partition = new(clock, delivery_count_limit=2)
    partition.acquire("a", 0, 1, 100)
    partition.acknowledge("a", [ack(0, 1, RELEASE)])
    partition.acquire("b", 0, 1, 100)  # the second delivery, the last: then a failover
    restored = SharePartition.from_state(partition.state(), clock, delivery_count_limit=2)
    assert restored.in_flight() == (settled(0, 1, AVAILABLE, 2),)
    assert restored.acquire("c", 0, 3, 100) == [AcquiredRecords(2, 3, 1)]
    assert restored.start_offset == 2


def test_a_lowered_delivery_limit_applies_from_the_next_release_or_acquisition(clock):
    partition = new(clock)
    partition.acquire("a", 0, 3, 100)
    partition.acknowledge("a", [ack(0, 1, RELEASE)])
    partition.delivery_count_limit = 1
    assert partition.acknowledge("a", [ack(2, 3, RELEASE)]) == E.none
    assert partition.in_flight() == (settled(0, 1, AVAILABLE), settled(2, 3, ARCHIVED))
    assert partition.acquire("b", 0, 3, 100) == []
    assert partition.in_flight() == ()


@pytest.mark.parametrize("batches", [
    (StateBatch(9, 12, AVAILABLE, 1),),  # below the start
    (StateBatch(10, 12, AVAILABLE, 1), StateBatch(12, 13, ARCHIVED, 1)),  # overlapping
    (StateBatch(12, 11, AVAILABLE, 1),),  # first past last
    (StateBatch(10, 12, ACQUIRED, 1),),  # never written
    (StateBatch(10, 12, AVAILABLE, -1),),
])
def test_a_state_that_no_share_partition_writes_is_refused(clock, batches):
    with pytest.raises(ValueError):
        SharePartition.from_state(ShareState(0, 10, batches), clock)


def test_states_written_as_a_snapshot_then_updates_combine_to_the_current_state(clock):
    partition = new(clock)
    partition.acquire("a", 0, 9, 100)
    first = ShareSnapshot(0, 0, partition.state())
    updates = []
    partition.acknowledge("a", [ack(0, 2, ACCEPT), ack(5, 6, RELEASE)])
    partition.acquire("b", 5, 12, 100)
    updates.append(ShareUpdate(0, -1, partition.start_offset, partition.state().batches))
    partition.acknowledge("b", [ack(5, 12, REJECT)])
    partition.release_member("a")
    updates.append(ShareUpdate(0, -1, partition.start_offset, partition.state().batches))
    assert combine(first, updates).state == partition.state()


def test_settings_must_be_positive(clock):
    with pytest.raises(ValueError):
        new(clock, delivery_count_limit=0)


# -- against a per-offset model --------------------------------------------------------

MEMBERS = ("a", "b", "c")
LIMIT = 3
MAX_IN_FLIGHT = 12
LOG_END = 60  # the log holds offsets 0..59
SETTINGS = {"lock_duration_ms": LOCK_MS, "delivery_count_limit": LIMIT,
            "max_in_flight_records": MAX_IN_FLIGHT}


@dataclass
class ModelRecord:
    state: RecordState
    count: int
    member: str | None = None
    deadline: int | None = None

    def leave(self, state: RecordState) -> None:
        self.state, self.member, self.deadline = state, None, None

    def released(self) -> RecordState:
        return ARCHIVED if self.count >= LIMIT else AVAILABLE


def per_offset(partition: SharePartition) -> dict[int, tuple]:
    return {offset: (run.state, run.delivery_count, run.member_id, run.lock_deadline_ms)
            for run in partition.in_flight()
            for offset in range(run.first_offset, run.last_offset + 1)}


class SharePartitionMachine(RuleBasedStateMachine):
    """The share-partition does what a plain dict of offsets does, one offset at a time."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.partition = SharePartition.new(0, self.clock, **SETTINGS)
        self.records: dict[int, ModelRecord] = {}  # spso..speo - 1
        self.spso = self.speo = self.epoch = 0
        self.before = per_offset(self.partition)
        self.spso_before = 0

    # -- the model ------------------------------------------------------------------------

    def advance(self) -> None:
        while self.spso < self.speo and self.records[self.spso].state in SETTLED:
            del self.records[self.spso]
            self.spso += 1
        # Every offset below SPSO is settled: the model moves only past settled records,
        # and the share-partition's SPSO is checked against the model's.

    def model_acquire(self, member: str, first: int, last: int,
                      max_records: int) -> list[tuple[int, int]]:
        deadline = self.clock.now + LOCK_MS
        got = []
        offset = max(first, self.spso)
        while len(got) < max_records and offset <= min(last, self.speo - 1):
            record = self.records[offset]
            if record.state is AVAILABLE and record.count >= LIMIT:
                record.leave(ARCHIVED)
            elif record.state is AVAILABLE:
                record.state, record.member, record.deadline = ACQUIRED, member, deadline
                record.count += 1
                got.append((offset, record.count))
            offset += 1
        self.advance()
        start = max(first, self.speo)
        if len(got) < max_records and last >= start:
            if start > self.speo and not self.records:
                self.spso = self.speo = start
            count = min(max_records - len(got), last - start + 1,
                        MAX_IN_FLIGHT - (start - self.spso))
            if count > 0:
                for offset in range(self.speo, start):
                    self.records[offset] = ModelRecord(ARCHIVED, 0)
                for offset in range(start, start + count):
                    self.records[offset] = ModelRecord(ACQUIRED, 1, member, deadline)
                    got.append((offset, 1))
                self.speo = start + count
        return got

    def model_acknowledge(self, member: str, batches: list[AcknowledgementBatch]) -> ErrorCode:
        previous_last = None
        for batch in batches:
            size = batch.last_offset - batch.first_offset + 1
            if (size < 1 or len(batch.ack_types) not in (1, size)
                    or not all(0 <= t <= 3 for t in batch.ack_types)
                    or (previous_last is not None and batch.first_offset <= previous_last)):
                return E.invalid_request
            previous_last = batch.last_offset
        for batch in batches:
            for offset in range(max(batch.first_offset, self.spso), batch.last_offset + 1):
                record = self.records.get(offset)
                if record is None or record.state is not ACQUIRED or record.member != member:
                    return E.invalid_record_state
        for batch in batches:
            for i, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
                if offset >= self.spso:
                    ack_type = batch.ack_types[0 if len(batch.ack_types) == 1 else i]
                    record = self.records[offset]
                    record.leave({GAP: ARCHIVED, ACCEPT: ACKNOWLEDGED, REJECT: ARCHIVED}.get(
                        ack_type, record.released()))
        self.advance()
        return E.none

    def model_release(self, matches) -> bool:
        released = [r for r in self.records.values() if r.state is ACQUIRED and matches(r)]
        for record in released:
            record.leave(record.released())
        self.advance()
        return bool(released)

    # -- rules ----------------------------------------------------------------------------

    @rule(member=st.sampled_from(MEMBERS), back=st.integers(0, 2), skip=st.integers(0, 3),
          length=st.integers(1, 15), max_records=st.integers(1, 20))
    def acquire(self, member, back, skip, length, max_records):
        first = max(self.partition.next_fetch_offset() - back, 0) + skip
        last = min(first + length - 1, LOG_END - 1)
        if first > last:
            return
        got = self.partition.acquire(member, first, last, max_records)
        offsets = [(o, r.delivery_count) for r in got
                   for o in range(r.first_offset, r.last_offset + 1)]
        # Nothing acquired is held by anyone else, or settled.
        assert all(self.before.get(o, (AVAILABLE,))[0] is AVAILABLE for o, _ in offsets)
        assert offsets == self.model_acquire(member, first, last, max_records)

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge(self, member, data):
        batches = []
        first = data.draw(st.integers(self.spso - 3, self.speo + 2))
        for _ in range(data.draw(st.integers(1, 3))):
            size = data.draw(st.integers(1, 6))
            count = data.draw(st.sampled_from([1, size, size + 1]))  # the last is malformed
            types = data.draw(st.lists(st.integers(0, 3), min_size=count, max_size=count))
            batches.append(AcknowledgementBatch(first, first + size - 1, tuple(types)))
            first += size + data.draw(st.integers(-1, 2))
        self.check_acknowledge(member, batches)

    @precondition(lambda self: any(r.state is ACQUIRED for r in self.records.values()))
    @rule(data=st.data())
    def acknowledge_held(self, data):
        first, member = data.draw(st.sampled_from(sorted(
            (o, r.member) for o, r in self.records.items() if r.state is ACQUIRED)))
        end = first
        while (end + 1 in self.records and self.records[end + 1].state is ACQUIRED
               and self.records[end + 1].member == member):
            end += 1
        last = data.draw(st.integers(first, end))
        size = last - first + 1
        types = data.draw(st.lists(st.sampled_from(AcknowledgeType), min_size=1, max_size=1)
                          | st.lists(st.sampled_from(AcknowledgeType),
                                     min_size=size, max_size=size))
        self.check_acknowledge(member, [AcknowledgementBatch(first, last, tuple(types))])

    def check_acknowledge(self, member: str, batches: list[AcknowledgementBatch]) -> None:
        assert self.partition.acknowledge(member, batches) == self.model_acknowledge(
            member, batches)

    @rule(member=st.sampled_from(MEMBERS))
    def release_member(self, member):
        assert self.partition.release_member(member) == self.model_release(
            lambda r: r.member == member)

    @rule(ms=st.integers(0, 2 * LOCK_MS))
    def expire_locks(self, ms):
        self.clock.now += ms
        now = self.clock.now
        assert self.partition.expire_locks() == self.model_release(lambda r: r.deadline <= now)

    @rule(delta=st.integers(0, 6))
    def update_log_start_offset(self, delta):
        log_start = self.spso + delta
        self.partition.update_log_start_offset(log_start)
        if log_start > self.spso:
            self.records = {o: r for o, r in self.records.items() if o >= log_start}
            self.speo = max(self.speo, log_start)
            self.spso = log_start
            self.advance()
        self.before = {o: v for o, v in self.before.items() if o >= log_start}

    @rule()
    def fail_over(self):
        state = self.partition.state()
        self.partition = SharePartition.from_state(state, self.clock, **SETTINGS)
        assert self.partition.state() == state
        for record in self.records.values():
            if record.state is ACQUIRED:
                record.leave(AVAILABLE)
        self.advance()

    @rule(offset=st.integers(0, LOG_END))
    def reset_start_offset(self, offset):
        if any(r.state is ACQUIRED for r in self.records.values()):
            with pytest.raises(RuntimeError):
                self.partition.reset_start_offset(offset)
            return
        self.partition.reset_start_offset(offset)
        self.records.clear()
        self.spso = self.speo = self.spso_before = offset
        self.epoch += 1
        self.before = {}

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def matches_the_model(self):
        partition = self.partition
        assert (partition.start_offset, partition.end_offset, partition.state_epoch) == (
            self.spso, self.speo, self.epoch)
        assert per_offset(partition) == {
            o: (r.state, r.count, r.member, r.deadline) for o, r in self.records.items()}

    @invariant()
    def runs_are_contiguous_fewest_and_start_unsettled(self):
        runs = self.partition.in_flight()
        assert runs == () or runs[0].state not in SETTLED
        offset = self.partition.start_offset
        for i, run in enumerate(runs):
            assert run.first_offset == offset <= run.last_offset
            offset = run.last_offset + 1
            if i:
                previous = runs[i - 1]
                assert (previous.state, previous.delivery_count, previous.member_id,
                        previous.lock_deadline_ms) != (run.state, run.delivery_count,
                                                       run.member_id, run.lock_deadline_ms)
        assert offset == self.partition.end_offset

    @invariant()
    def nothing_goes_back(self):
        now = per_offset(self.partition)
        assert self.partition.start_offset >= self.spso_before
        for offset, (state, count, _, _) in now.items():
            if offset in self.before:
                state_before, count_before = self.before[offset][:2]
                assert count >= count_before
                if state_before in SETTLED:
                    assert state is state_before
        self.before = now
        self.spso_before = self.partition.start_offset


SharePartitionMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSharePartitionAgainstModel = SharePartitionMachine.TestCase
