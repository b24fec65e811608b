"""Transactions in one partition's log: transactional batches, COMMIT and ABORT markers, the
last stable offset, the aborted transaction index, and all of it after a restart."""

from __future__ import annotations

import pytest

from odradek.log import LogConfig
from odradek.log.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    decode_snapshot,
    encode_snapshot,
    ProducerStateEntry,
)
from odradek.log.transaction_index import AbortedTxn
from odradek.protocol.control_records import build_end_txn_marker, read_end_txn_marker
from odradek.protocol.records import Record, build_batch, iter_batches

TXN_PRODUCER = 7
OTHER_PRODUCER = 8


def txn_batch(first_seq: int, count: int = 1, *, producer_id: int = TXN_PRODUCER,
              epoch: int = 0) -> bytearray:
    records = [Record(i, 1_000, b"k", b"v") for i in range(count)]
    return bytearray(build_batch(records, base_offset=0, producer_id=producer_id,
                                 producer_epoch=epoch, base_sequence=first_seq,
                                 is_transactional=True))


def plain_batch(count: int = 1) -> bytearray:
    return bytearray(build_batch([Record(i, 1_000, b"k", b"v") for i in range(count)],
                                 base_offset=0))


def marker(commit: bool, *, producer_id: int = TXN_PRODUCER, epoch: int = 0,
           coordinator_epoch: int = 0) -> bytearray:
    return bytearray(build_end_txn_marker(producer_id=producer_id, producer_epoch=epoch,
                                          coordinator_epoch=coordinator_epoch, commit=commit,
                                          timestamp_ms=2_000))


def start(log, batch: bytearray):
    """Appends the first batch of a transaction, as verified by the coordinator."""
    guard = log.producer_state.verification_guard(TXN_PRODUCER if batch is None else
                                                  next(iter_batches(batch)).producer_id)
    return log.append_as_leader(batch, leader_epoch=0, now_ms=1_000, verification_guard=guard)


def append(log, batch: bytearray):
    info = log.append_as_leader(batch, leader_epoch=0, now_ms=1_000)
    log.update_high_watermark(log.log_end_offset)
    return info


def test_a_marker_reads_back_as_written():
    [batch] = iter_batches(marker(True, coordinator_epoch=5))
    assert batch.is_control_batch and batch.is_transactional
    assert read_end_txn_marker(batch).commit and read_end_txn_marker(batch).coordinator_epoch == 5
    [record] = batch.records()
    assert (record.key, record.value) == (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")


def test_a_transactional_batch_needs_a_transaction_here_or_the_coordinator_s_guard(open_log):
    log = open_log()
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(0), leader_epoch=0, now_ms=1_000)
    stale = log.producer_state.verification_guard(TXN_PRODUCER)
    start(log, txn_batch(0))  # the guard is used up by the transaction it started
    log.append_as_leader(txn_batch(1), leader_epoch=0, now_ms=1_000)  # continues it
    append(log, marker(True))
    # A write delayed past the marker, verified before it: the marker voided its guard.
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(2), leader_epoch=0, now_ms=1_000,
                             verification_guard=stale)
    assert log.log_end_offset == 3


def test_the_last_stable_offset_waits_for_the_marker_and_its_replication(open_log):
    log = open_log()
    append(log, plain_batch())                       # 0
    start(log, txn_batch(0, 2))                      # 1..2
    append(log, plain_batch())                       # 3
    log.update_high_watermark(log.log_end_offset)
    assert (log.high_watermark, log.last_stable_offset) == (4, 1)
    log.append_as_leader(marker(False), leader_epoch=0, now_ms=1_000)  # 4
    assert log.last_stable_offset == 1               # the marker is not replicated yet
    log.update_high_watermark(4)
    assert log.last_stable_offset == 1
    log.update_high_watermark(5)
    assert log.last_stable_offset == 5


def test_an_abort_is_indexed_with_the_stable_offset_of_the_other_transactions(open_log):
    log = open_log()
    start(log, txn_batch(0, 2))                                       # 7: 0..1
    guard = log.producer_state.verification_guard(OTHER_PRODUCER)
    log.append_as_leader(txn_batch(0, producer_id=OTHER_PRODUCER), leader_epoch=0,
                         now_ms=1_000, verification_guard=guard)     # 8: 2
    append(log, marker(False))                                        # 3
    assert log.collect_aborted_transactions(0, 4) == [AbortedTxn(TXN_PRODUCER, 0, 3, 2)]
    assert log.last_stable_offset == 2  # producer 8's transaction is still open
    append(log, marker(True, producer_id=OTHER_PRODUCER))            # 4
    assert log.last_stable_offset == 5
    assert log.collect_aborted_transactions(4, 5) == []


def test_markers_check_the_producer_and_coordinator_epochs(open_log):
    log = open_log()
    start(log, txn_batch(0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(marker(True, epoch=2), leader_epoch=0, now_ms=1_000)
    append(log, marker(True, epoch=3, coordinator_epoch=4))
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_as_leader(marker(True, epoch=3, coordinator_epoch=3), leader_epoch=0,
                             now_ms=1_000)


def test_an_epoch_bumped_by_a_marker_starts_the_next_transaction_at_sequence_zero(open_log):
    """Transactions v2: the coordinator ends each transaction with the next epoch."""
    log = open_log()
    start(log, txn_batch(0, 2, epoch=0))
    append(log, marker(True, epoch=1))
    late = txn_batch(2, epoch=0)  # the ended transaction's write, arriving late
    guard = log.producer_state.verification_guard(TXN_PRODUCER)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(late, leader_epoch=0, now_ms=1_000, verification_guard=guard)
    with pytest.raises(OutOfOrderSequenceError):
        start(log, txn_batch(2, epoch=1))
    start(log, txn_batch(0, epoch=1))
    assert log.producer_state.ongoing_transaction(TXN_PRODUCER, 1)


def test_transactions_survive_a_restart_clean_or_not(open_log, log_dir):
    log = open_log(LogConfig(segment_bytes=300))
    start(log, txn_batch(0))                     # 0
    append(log, marker(False))                   # 1
    start(log, txn_batch(1))                     # 2, open at the stop
    log.update_high_watermark(log.log_end_offset)
    log.close()
    for clean in (True, False):
        if not clean:
            for path in log_dir.glob("*.snapshot"):
                path.unlink()  # replayed from the log instead
            for path in log_dir.glob("*.txnindex"):
                path.unlink()  # and the lost abort entry written again
        reopened = open_log(LogConfig(segment_bytes=300), high_watermark=3,
                            had_clean_shutdown=clean)
        assert reopened.producer_state.ongoing_transaction(TXN_PRODUCER, 0)
        assert reopened.last_stable_offset == 2
        assert reopened.collect_aborted_transactions(0, 3) == [AbortedTxn(TXN_PRODUCER, 0, 1, 2)]
        reopened.close()


def test_truncation_forgets_a_marker_cut_away(open_log):
    log = open_log()
    start(log, txn_batch(0, 2))
    append(log, marker(False))
    log.truncate_to(2)
    assert log.producer_state.ongoing_transaction(TXN_PRODUCER, 0)
    assert log.collect_aborted_transactions(0, 3) == []
    assert log.last_stable_offset == 0


def test_a_producer_with_a_transaction_going_does_not_expire(open_log):
    log = open_log()
    start(log, txn_batch(0))
    assert log.producer_state.remove_expired_producers(10**12, 1) == 0
    append(log, marker(True))
    assert log.producer_state.remove_expired_producers(10**12, 1) == 1


def test_snapshots_keep_transactions_and_read_the_older_format():
    entry = ProducerStateEntry(TXN_PRODUCER, 2, coordinator_epoch=4, current_txn_first_offset=9,
                               last_timestamp=1_234)
    [decoded] = decode_snapshot(encode_snapshot([entry]))
    assert (decoded.producer_epoch, decoded.coordinator_epoch, decoded.current_txn_first_offset,
            decoded.last_timestamp, len(decoded.batches)) == (2, 4, 9, 1_234, 0)
