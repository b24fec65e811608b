"""What replication needs of a PartitionLog: a follower's append with the leader's offsets and
epochs, the high watermark it moves, and truncation taking the producer state with the
records."""

from __future__ import annotations

import pytest

from odradek.log import (
    LogConfig,
    OffsetsOutOfOrderError,
    UnexpectedAppendOffsetError,
)
from odradek.log.producer_state import snapshot_path
from odradek.protocol.records import CorruptRecordError, Record, build_batch, iter_batches

PRODUCER_ID = 7


def replicated(base_offset: int, count: int = 1, *, epoch: int = 3, first_seq: int | None = None,
               last_offset: int | None = None) -> bytearray:
    """A batch as the leader stored it: its offsets, its epoch, maybe a producer's."""
    producer = {} if first_seq is None else {
        "producer_id": PRODUCER_ID, "producer_epoch": 0, "base_sequence": first_seq}
    records = [Record(base_offset + i, 1_000, b"k", b"v" * 40) for i in range(count)]
    return bytearray(build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch,
                                 last_offset=last_offset, **producer))


def idempotent(first_seq: int, count: int = 1) -> bytearray:
    records = [Record(i, 1_000, b"k", b"v" * 40) for i in range(count)]
    return bytearray(build_batch(records, base_offset=0, producer_id=PRODUCER_ID,
                                 producer_epoch=0, base_sequence=first_seq))


# -- the follower's append -----------------------------------------------------------------


def test_a_follower_keeps_the_offsets_and_epochs_the_leader_gave_its_batches(open_log):
    log = open_log()
    records = replicated(0, 3, epoch=2) + replicated(3, 2, epoch=4)
    info = log.append_as_follower(bytearray(records), now_ms=0)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 4, 5)
    stored = log.read(0, 10_000).records
    assert stored == bytes(records)
    assert [(b.base_offset, b.partition_leader_epoch) for b in iter_batches(stored)] == [
        (0, 2), (3, 4)]


def test_a_follower_accepts_the_gaps_a_compacted_leader_sends(open_log):
    log = open_log()
    log.append_as_follower(replicated(0, 2), now_ms=0)
    # Offsets 2..4 were cleaned away on the leader; the batch at 5 ends at 9 though its
    # last records went too.
    log.append_as_follower(replicated(5, 2, last_offset=9), now_ms=0)
    assert log.log_end_offset == 10
    assert [b.base_offset for b in iter_batches(log.read(3, 10_000).records)] == [5]


def test_a_follower_refuses_records_starting_below_its_log_end_offset(open_log):
    log = open_log()
    log.append_as_follower(replicated(0, 3), now_ms=0)
    with pytest.raises(UnexpectedAppendOffsetError) as refused:
        log.append_as_follower(replicated(2, 2), now_ms=0)
    assert (refused.value.first_offset, refused.value.log_end_offset) == (2, 3)
    assert log.log_end_offset == 3


@pytest.mark.parametrize("second_base_offset", [0, 2])
def test_a_follower_refuses_batches_whose_offsets_do_not_increase(open_log, second_base_offset):
    log = open_log()
    with pytest.raises(OffsetsOutOfOrderError):
        log.append_as_follower(replicated(0, 3) + replicated(second_base_offset), now_ms=0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_a_follower_refuses_a_corrupt_batch(open_log):
    log = open_log()
    batch = replicated(0, 3)
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(batch, now_ms=0)


def test_a_follower_records_producers_without_checking_their_sequences(open_log):
    log = open_log()
    log.append_as_follower(replicated(0, 2, first_seq=10), now_ms=0)
    log.append_as_follower(replicated(2, 1, first_seq=40), now_ms=0)  # a gap: the leader's
    entry = log.producer_state.entry(PRODUCER_ID)
    assert [(b.first_seq, b.last_seq, b.first_offset) for b in entry.batches] == [
        (10, 11, 0), (40, 40, 2)]


def test_a_gap_too_wide_for_the_segment_starts_a_segment_at_the_first_offset(open_log):
    log = open_log()
    log.append_as_follower(replicated(0), now_ms=0)
    log.append_as_follower(replicated(2**31 + 5), now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 2**31 + 5]


# -- the high watermark --------------------------------------------------------------------


def test_the_high_watermark_moves_within_the_log(open_log, make_batch):
    log = open_log()
    for _ in range(4):
        log.append_as_leader(make_batch(), leader_epoch=0, now_ms=0)
    assert log.high_watermark == 0  # the replication layer moves it
    assert log.update_high_watermark(3) == 3
    assert log.update_high_watermark(99) == 4
    log.delete_records_before(2)
    assert log.update_high_watermark(0) == 2


def test_a_log_opens_with_the_high_watermark_it_is_given_within_its_offsets(open_log,
                                                                           make_batch):
    log = open_log()
    for _ in range(4):
        log.append_as_leader(make_batch(), leader_epoch=0, now_ms=0)
    log.close()
    assert open_log(high_watermark=3).high_watermark == 3
    assert open_log(high_watermark=40).high_watermark == 4
    assert open_log(log_start_offset=2).high_watermark == 2  # none: the log start offset


# -- truncation takes the producer state with it ---------------------------------------------


def test_truncation_rebuilds_the_producer_state_as_of_the_new_end(open_log, log_dir):
    log = open_log(LogConfig(segment_bytes=300))  # two batches per segment
    for seq in range(6):
        log.append_as_leader(idempotent(seq), leader_epoch=0, now_ms=0)
    assert log.producer_state.snapshot_offsets() == [2, 4]  # at the rolls

    log.truncate_to(3)

    assert log.producer_state.entry(PRODUCER_ID).last_seq == 2
    assert log.producer_state.snapshot_offsets() == [2]
    # The producer continues from the state the truncated log holds.
    assert log.append_as_leader(idempotent(3), leader_epoch=1, now_ms=0).first_offset == 3


def test_truncating_fully_forgets_every_producer_and_snapshot(open_log, log_dir):
    log = open_log(LogConfig(segment_bytes=300))
    for seq in range(6):
        log.append_as_leader(idempotent(seq), leader_epoch=0, now_ms=0)
    log.truncate_fully_and_start_at(1_000)
    assert log.producer_state.entry(PRODUCER_ID) is None
    assert log.producer_state.snapshot_offsets() == []
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (1_000,) * 3
    assert log.append_as_leader(idempotent(41), leader_epoch=1, now_ms=0).first_offset == 1_000


def test_a_clean_close_snapshots_the_producer_state_at_the_log_end(open_log, log_dir):
    log = open_log()
    log.append_as_leader(idempotent(0, 3), leader_epoch=0, now_ms=0)
    log.close()
    assert snapshot_path(log_dir, 3).exists()
    log.close()  # a second close writes nothing new
    assert log.producer_state.snapshot_offsets() == [3]
    assert open_log().producer_state.entry(PRODUCER_ID).last_seq == 2


# -- the leader epoch checkpoint across a crash --------------------------------------------


def test_a_flush_makes_the_leader_epoch_checkpoint_durable_with_the_records(open_log, log_dir,
                                                                           monkeypatch):
    synced = []
    monkeypatch.setattr("odradek.log.leader_epoch.fsync_path", synced.append)
    log = open_log()
    log.append_as_follower(replicated(0, 2, epoch=1), now_ms=0)
    assert synced == []  # not on the append: the event loop never waits for it
    log.flush_to(log.log_end_offset)
    assert synced == [log_dir / "leader-epoch-checkpoint"]
    log.flush_to(log.log_end_offset + 1)
    assert len(synced) == 1  # unchanged since: nothing to sync


def test_a_crash_that_lost_the_latest_epochs_gets_them_back_from_the_recovered_batches(
        open_log, log_dir):
    log = open_log()
    log.append_as_follower(replicated(0, 2, epoch=1), now_ms=0)
    log.flush_to(log.log_end_offset)
    stale = (log_dir / "leader-epoch-checkpoint").read_bytes()
    log.append_as_follower(replicated(2, 2, epoch=3) + replicated(4, 1, epoch=5), now_ms=0)
    # The crash: the records reached the disk, the checkpoint's last version did not.
    (log_dir / "leader-epoch-checkpoint").write_bytes(stale)

    reopened = open_log(recovery_point=2, had_clean_shutdown=False)

    assert reopened.leader_epoch_cache.entries == [(1, 0), (3, 2), (5, 4)]
