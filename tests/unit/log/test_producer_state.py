"""Producer state (KIP-98): which batches of an idempotent producer a partition takes, which
it answers as retries, which it refuses; snapshots, rebuilding from the log, expiration.

Batches are built as an idempotent producer sends them and, where offsets matter, appended
to a real `PartitionLog` as the leader does (`append_as_leader` checks them against the
log's producer state).
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.log import LogConfig, PartitionLog
from odradek.log.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    SNAPSHOTS_TO_RETAIN,
    BatchMetadata,
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    snapshot_path,
)
from odradek.protocol.records import Record, RecordBatch, build_batch, iter_batches

PRODUCER_ID = 1000
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
NOW_MS = 1_700_000_000_000
MAX_SEQUENCE = 2**31 - 1


def idempotent_batch(first_seq: int, count: int = 1, *, producer_id: int = PRODUCER_ID,
                     epoch: int = 0, timestamp: int = NOW_MS,
                     transactional: bool = False) -> bytearray:
    """A batch as an idempotent producer sends it: base offset 0, ``count`` records."""
    records = [Record(i, timestamp, b"k", b"seq-%d" % (first_seq + i)) for i in range(count)]
    return bytearray(build_batch(records, base_offset=0, producer_id=producer_id,
                                 producer_epoch=epoch, base_sequence=first_seq,
                                 is_transactional=transactional))


class Leader:
    """A log appended to as the partition leader does: checked, appended unless a retry,
    recorded in the log's producer state."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    @property
    def state(self) -> ProducerStateManager:
        return self.log.producer_state

    def append(self, batch: bytearray, now_ms: int = NOW_MS) -> tuple[int, int]:
        """(first offset, last offset) of the batch in the log (the original's, for a
        retry)."""
        info = self.log.append_as_leader(batch, leader_epoch=0, now_ms=now_ms)
        return info.first_offset, info.last_offset


@pytest.fixture
def leader(open_log) -> Leader:
    return Leader(open_log())


def load(log: PartitionLog, now_ms: int = NOW_MS,
         expiration_ms: int = DAY_MS) -> ProducerStateManager:
    return ProducerStateManager.load(log, now_ms=now_ms, producer_id_expiration_ms=expiration_ms)


def state_of(state: ProducerStateManager) -> dict[int, tuple[int, list[BatchMetadata]]]:
    producers = {}
    for producer_id in (PRODUCER_ID, PRODUCER_ID + 1, PRODUCER_ID + 2):
        entry = state.entry(producer_id)
        if entry is not None:
            producers[producer_id] = (entry.producer_epoch, list(entry.batches))
    return producers


# -- sequences and epochs ----------------------------------------------------------------


def test_batches_in_sequence_are_appended_one_after_the_other(leader):
    assert leader.append(idempotent_batch(0, 3)) == (0, 2)
    assert leader.append(idempotent_batch(3, 2)) == (3, 4)
    assert leader.state.entry(PRODUCER_ID).last_seq == 4


def test_an_unknown_producer_may_start_at_any_sequence(leader):
    # KIP-360: its earlier batches may have been deleted or its state expired.
    assert leader.append(idempotent_batch(41)) == (0, 0)


def test_a_gap_in_the_sequences_is_out_of_order(leader):
    leader.append(idempotent_batch(0, 2))
    with pytest.raises(OutOfOrderSequenceError):
        leader.append(idempotent_batch(3))
    assert leader.log.log_end_offset == 2


@pytest.mark.parametrize("retried", range(NUM_BATCHES_TO_RETAIN))
def test_a_retry_of_one_of_the_last_five_batches_gets_its_original_offsets(leader, retried):
    offsets = [leader.append(idempotent_batch(2 * i, 2)) for i in range(NUM_BATCHES_TO_RETAIN)]

    assert leader.append(idempotent_batch(2 * retried, 2)) == offsets[retried]
    assert leader.log.log_end_offset == 2 * NUM_BATCHES_TO_RETAIN  # nothing written twice


def test_a_retry_older_than_the_last_five_batches_is_out_of_order(leader):
    for seq in range(NUM_BATCHES_TO_RETAIN + 1):
        leader.append(idempotent_batch(seq))
    # Kafka no longer answers DUPLICATE_SEQUENCE_NUMBER: the broker cannot tell it from a gap.
    with pytest.raises(OutOfOrderSequenceError):
        leader.append(idempotent_batch(0))


def test_a_retry_with_a_different_sequence_range_is_not_a_duplicate(leader):
    leader.append(idempotent_batch(0, 3))
    with pytest.raises(OutOfOrderSequenceError):
        leader.append(idempotent_batch(0, 2))


def test_an_older_epoch_is_fenced(leader):
    leader.append(idempotent_batch(0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        leader.append(idempotent_batch(1, epoch=2))


def test_a_new_epoch_starts_at_sequence_zero(leader):
    leader.append(idempotent_batch(0, 5, epoch=0))
    with pytest.raises(OutOfOrderSequenceError):
        leader.append(idempotent_batch(5, epoch=1))
    assert leader.append(idempotent_batch(0, epoch=1)) == (5, 5)
    # The old epoch's batches are no longer retries but a fenced producer's.
    with pytest.raises(InvalidProducerEpochError):
        leader.append(idempotent_batch(0, 5, epoch=0))


def test_sequences_wrap_from_integer_max_value_to_zero(leader):
    leader.append(idempotent_batch(MAX_SEQUENCE - 1, 2))
    assert leader.append(idempotent_batch(0)) == (2, 2)


def test_a_batch_across_the_wrap_is_recognised_when_retried(leader):
    first = leader.append(idempotent_batch(MAX_SEQUENCE - 1, 4))  # sequences MAX-1, MAX, 0, 1
    assert leader.state.entry(PRODUCER_ID).batches[-1].first_seq == MAX_SEQUENCE - 1
    assert leader.append(idempotent_batch(MAX_SEQUENCE - 1, 4)) == first
    assert leader.append(idempotent_batch(2)) == (4, 4)


def test_producers_are_independent(leader):
    leader.append(idempotent_batch(0, producer_id=PRODUCER_ID))
    leader.append(idempotent_batch(7, producer_id=PRODUCER_ID + 1))
    assert leader.append(idempotent_batch(1, producer_id=PRODUCER_ID)) == (2, 2)
    assert leader.append(idempotent_batch(8, producer_id=PRODUCER_ID + 1)) == (3, 3)


def test_transactional_batches_are_refused_until_transactions_exist(leader):
    with pytest.raises(InvalidTxnStateError):
        leader.append(idempotent_batch(0, transactional=True))


# -- expiration --------------------------------------------------------------------------


def test_a_producer_idle_for_the_expiration_time_is_forgotten(leader):
    leader.append(idempotent_batch(0, producer_id=PRODUCER_ID, timestamp=NOW_MS))
    leader.append(idempotent_batch(0, producer_id=PRODUCER_ID + 1, timestamp=NOW_MS + HOUR_MS))

    assert leader.state.remove_expired_producers(NOW_MS + DAY_MS - 1, DAY_MS) == 0
    assert leader.state.remove_expired_producers(NOW_MS + DAY_MS, DAY_MS) == 1
    assert leader.state.entry(PRODUCER_ID) is None
    assert leader.state.entry(PRODUCER_ID + 1) is not None
    # Forgotten, it is an unknown producer again: any sequence starts it afresh.
    assert leader.append(idempotent_batch(9, producer_id=PRODUCER_ID)) == (2, 2)


def test_expired_producers_are_not_loaded(open_log):
    log = open_log()
    leader = Leader(log)
    leader.append(idempotent_batch(0, timestamp=NOW_MS))
    assert load(log, now_ms=NOW_MS + DAY_MS - 1).entry(PRODUCER_ID) is not None
    assert load(log, now_ms=NOW_MS + DAY_MS).entry(PRODUCER_ID) is None


# -- snapshots and loading ---------------------------------------------------------------


def test_a_snapshot_round_trips_every_retained_batch(leader):
    for seq in range(7):
        leader.append(idempotent_batch(seq, producer_id=PRODUCER_ID))
    leader.append(idempotent_batch(0, 3, producer_id=PRODUCER_ID + 1, epoch=4))

    producers = decode_snapshot(encode_snapshot(
        [leader.state.entry(PRODUCER_ID), leader.state.entry(PRODUCER_ID + 1)]))

    assert [(p.producer_id, p.producer_epoch, list(p.batches)) for p in producers] == [
        (PRODUCER_ID, 0, list(leader.state.entry(PRODUCER_ID).batches)),
        (PRODUCER_ID + 1, 4, [BatchMetadata(2, 9, 2, NOW_MS)]),
    ]
    assert len(producers[0].batches) == NUM_BATCHES_TO_RETAIN


@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "append", "empty"])
def test_a_damaged_snapshot_is_refused(leader, damage):
    leader.append(idempotent_batch(0))
    data = bytearray(encode_snapshot([leader.state.entry(PRODUCER_ID)]))
    if damage == "flip a byte":
        data[-3] ^= 0x40
    elif damage == "truncate":
        del data[-1:]
    elif damage == "append":
        data += b"\0"
    else:
        data = bytearray()
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data))


def test_the_state_is_rebuilt_from_the_log_without_a_snapshot(open_log, log_dir):
    leader = Leader(open_log())
    for i in range(8):
        leader.append(idempotent_batch(i // 2, producer_id=PRODUCER_ID + i % 2))
    expected = state_of(leader.state)

    assert state_of(load(open_log())) == expected


def test_the_state_is_loaded_from_the_snapshot_then_the_log_after_it(open_log, log_dir):
    log = open_log()
    leader = Leader(log)
    for seq in range(3):
        leader.append(idempotent_batch(seq))
    leader.state.take_snapshot(log.log_end_offset)
    for seq in range(3, 6):
        leader.append(idempotent_batch(seq))
    expected = state_of(leader.state)
    # DeleteRecords hides the batches before the snapshot: only the snapshot knows them now.
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(3)

    assert state_of(load(log)) == expected
    snapshot_path(log_dir, 3).unlink()
    assert [b.last_seq for b in load(log).entry(PRODUCER_ID).batches] == [3, 4, 5]


def test_the_newest_snapshot_not_beyond_the_log_end_is_used(open_log, log_dir):
    log = open_log()
    leader = Leader(log)
    leader.append(idempotent_batch(0))
    leader.state.take_snapshot(1)
    leader.append(idempotent_batch(1))
    leader.state.take_snapshot(2)
    log.truncate_to(1)  # a follower truncating: the snapshot at 2 describes a lost batch

    state = load(log)

    assert state.entry(PRODUCER_ID).last_seq == 0
    assert state.snapshot_offsets() == [1]


def test_a_corrupt_snapshot_is_deleted_and_the_previous_one_used(open_log, log_dir):
    log = open_log()
    leader = Leader(log)
    leader.append(idempotent_batch(0))
    leader.state.take_snapshot(1)
    leader.append(idempotent_batch(1))
    leader.state.take_snapshot(2)
    snapshot_path(log_dir, 2).write_bytes(b"torn")

    state = load(log)

    assert state.entry(PRODUCER_ID).last_seq == 1  # snapshot at 1, then the log replayed
    assert state.snapshot_offsets() == [1]


def test_only_the_newest_snapshots_are_kept(open_log, log_dir):
    log = open_log()
    leader = Leader(log)
    for seq in range(5):
        leader.append(idempotent_batch(seq))
        leader.state.take_snapshot(log.log_end_offset)
    assert leader.state.snapshot_offsets() == [4, 5]
    assert SNAPSHOTS_TO_RETAIN == 2


def test_a_snapshot_left_half_written_is_removed_at_load(open_log, log_dir):
    log = open_log()
    (log_dir / "00000000000000000000.snapshot.tmp").write_bytes(b"half")
    load(log)
    assert not list(log_dir.glob("*.tmp"))


def test_the_log_is_replayed_across_segments(open_log):
    log = open_log(LogConfig(segment_bytes=400))
    leader = Leader(log)
    for i in range(21):
        if i == 5:
            leader.state.take_snapshot(log.log_end_offset)
        leader.append(idempotent_batch(i // 3, producer_id=PRODUCER_ID + i % 3))
    assert len(log.segments) > 2
    expected = state_of(leader.state)

    assert state_of(load(log)) == expected


# -- a producer retrying through lost responses ------------------------------------------


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_retries_through_lost_responses_write_every_batch_exactly_once(tmp_path_factory, data):
    """A model of an idempotent producer on one connection: at most five requests in flight,
    requests reach the broker in order, and a dropped connection loses the requests not yet
    read and the responses not yet delivered; the producer then resends everything it has no
    answer for, in order. Whatever the interleaving, every batch is in the log once, in
    sequence order, and each acknowledgement names where it is."""
    directory: Path = tmp_path_factory.mktemp("orders") / "orders-0"
    log = PartitionLog.open(directory, LogConfig(), now_ms=NOW_MS)
    try:
        leader = Leader(log)
        sizes = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=25), label="sizes")
        first_seqs = [sum(sizes[:i]) for i in range(len(sizes))]
        unacked: deque[int] = deque()  # sent, no answer yet (at most five)
        wire: deque[int] = deque()  # sent, not yet read by the broker
        answers: deque[tuple[int, tuple[int, int]]] = deque()  # answered, not yet delivered
        acked: dict[int, tuple[int, int]] = {}
        next_batch = 0
        for _ in range(400):
            if len(acked) == len(sizes):
                break
            actions = []
            if next_batch < len(sizes) and len(unacked) < NUM_BATCHES_TO_RETAIN:
                actions.append("send")
            if wire:
                actions.append("broker reads")
            if answers:
                actions.append("answer arrives")
            if unacked:
                actions.append("connection drops")
            action = data.draw(st.sampled_from(actions)) if len(actions) > 1 else actions[0]
            if action == "send":
                unacked.append(next_batch)
                wire.append(next_batch)
                next_batch += 1
            elif action == "broker reads":
                index = wire.popleft()
                offsets = leader.append(idempotent_batch(first_seqs[index], sizes[index]))
                answers.append((index, offsets))
            elif action == "answer arrives":
                index, offsets = answers.popleft()
                assert index == unacked.popleft()
                acked[index] = offsets
            else:
                wire.clear()
                answers.clear()
                wire.extend(unacked)
        while len(acked) < len(sizes):  # no more drops: everything gets through
            if next_batch < len(sizes) and len(unacked) < NUM_BATCHES_TO_RETAIN:
                unacked.append(next_batch)
                wire.append(next_batch)
                next_batch += 1
            while wire:
                index = wire.popleft()
                answers.append((index, leader.append(
                    idempotent_batch(first_seqs[index], sizes[index]))))
            while answers:
                index, offsets = answers.popleft()
                assert index == unacked.popleft()
                acked[index] = offsets

        stored = [(b.base_sequence, b.base_offset, b.last_offset)
                  for b in _batches(log)]
        expected_offsets = [(first, first + size - 1) for first, size in zip(first_seqs, sizes)]
        assert stored == [(seq, first, last)
                          for seq, (first, last) in zip(first_seqs, expected_offsets)]
        assert [acked[i] for i in range(len(sizes))] == expected_offsets
    finally:
        log.close()


def _batches(log: PartitionLog) -> list[RecordBatch]:
    return list(iter_batches(log.read(0, 2**31 - 1).records))
