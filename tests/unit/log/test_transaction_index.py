"""The transaction index (``.txnindex``): Kafka's 34-byte AbortedTxn entries, a file that
exists only once a transaction was aborted, the search a READ_COMMITTED fetch makes, and the
index following its segment through truncation, deletion, the cleaner's renames and a
restart."""

from __future__ import annotations

import pytest

from odradek.log import AbortedTxn, LogConfig, TransactionIndex
from odradek.log.segment import DELETED_FILE_SUFFIX, SWAP_FILE_SUFFIX, TXN_INDEX_SUFFIX
from odradek.log.transaction_index import ABORTED_TXN, CorruptTransactionIndexError


def test_an_entry_is_kafkas_34_byte_aborted_txn(tmp_path):
    path = tmp_path / "00000000000000000120.txnindex"
    TransactionIndex(path, 120).append(AbortedTxn(7, 100, 140, 95))
    assert ABORTED_TXN.size == 34
    assert path.read_bytes() == (
        (0).to_bytes(2, "big") + (7).to_bytes(8, "big") + (100).to_bytes(8, "big")
        + (140).to_bytes(8, "big") + (95).to_bytes(8, "big")
    )
    assert TransactionIndex(path, 120).entries == [AbortedTxn(7, 100, 140, 95)]


def test_the_file_is_created_by_the_first_entry(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path, 0)
    index.truncate_to(0)
    assert not path.exists() and len(index) == 0
    index.append(AbortedTxn(7, 0, 3, 0))
    assert path.exists()


def test_entries_must_come_in_the_order_of_their_markers(tmp_path):
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    index.append(AbortedTxn(7, 0, 10, 0))
    with pytest.raises(CorruptTransactionIndexError):
        index.append(AbortedTxn(8, 2, 10, 0))


def test_collect_aborted_finds_the_transactions_overlapping_a_fetch(tmp_path):
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    for txn in (AbortedTxn(1, 0, 10, 0), AbortedTxn(2, 5, 30, 11), AbortedTxn(3, 40, 50, 36)):
        index.append(txn)
    # The third was aborted once the last stable offset had passed the fetch: none after it
    # can overlap the fetch.
    assert index.collect_aborted(12, 35) == ([AbortedTxn(2, 5, 30, 11)], True)
    # No entry's last stable offset reaches the upper bound: later segments may hold more.
    assert index.collect_aborted(45, 100) == ([AbortedTxn(3, 40, 50, 36)], False)
    assert index.collect_aborted(60, 100) == ([], False)


def test_truncate_to_drops_the_transactions_whose_marker_is_cut(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path, 0)
    for txn in (AbortedTxn(1, 0, 10, 0), AbortedTxn(2, 5, 30, 11)):
        index.append(txn)
    index.truncate_to(30)
    assert index.entries == [AbortedTxn(1, 0, 10, 0)]
    assert path.stat().st_size == 34
    assert TransactionIndex(path, 0).entries == [AbortedTxn(1, 0, 10, 0)]


def test_a_torn_entry_is_dropped_and_an_impossible_one_starts_the_index_afresh(tmp_path):
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(path, 100)
    index.append(AbortedTxn(1, 90, 110, 90))
    with open(path, "ab") as f:
        f.write(b"\x00" * 20)  # a crash in the middle of an entry
    assert TransactionIndex(path, 100).entries == [AbortedTxn(1, 90, 110, 90)]
    assert path.stat().st_size == 34
    path.write_bytes(ABORTED_TXN.pack(0, 1, 10, 20, 10))  # a marker before the segment
    assert TransactionIndex(path, 100).entries == []
    assert not path.exists()


# -- in a segment --------------------------------------------------------------------------


def test_a_segment_carries_its_transaction_index(open_log, make_batch, log_dir):
    log = open_log(LogConfig(segment_bytes=300, file_delete_delay_ms=60_000))
    for _ in range(3):  # segments at 0 and 2
        log.append_as_leader(make_batch([b"v" * 50]), leader_epoch=0, now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    first, second = log.segments
    first.txn_index.append(AbortedTxn(7, 0, 1, 0))
    second.txn_index.append(AbortedTxn(8, 2, 2, 2))

    log.truncate_to(2)  # the marker at 2 is cut with its segment
    assert second.txn_index.entries == []
    log.close()
    assert open_log(LogConfig(segment_bytes=300)).segments[0].txn_index.entries == [
        AbortedTxn(7, 0, 1, 0)]

    reopened = open_log(LogConfig(segment_bytes=300, file_delete_delay_ms=60_000))
    reopened.segments[0].rename_files(SWAP_FILE_SUFFIX)
    assert (log_dir / ("00000000000000000000" + TXN_INDEX_SUFFIX + SWAP_FILE_SUFFIX)).exists()
    reopened.segments[0].rename_files("")
    segment = reopened.segments[0]
    segment.rename_to_deleted()
    deleted = log_dir / ("00000000000000000000" + TXN_INDEX_SUFFIX + DELETED_FILE_SUFFIX)
    assert deleted.exists()
    segment.remove_files()
    assert not deleted.exists()
