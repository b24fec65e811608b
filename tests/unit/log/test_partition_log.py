"""PartitionLog: appends, reads, rolls, recovery, ListOffsets lookups, truncation, deletion."""

from __future__ import annotations

import logging
import os

import pytest

from odradek.log import (
    KafkaStorageError,
    LogConfig,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordBatchTooLargeError,
)
from odradek.log.file_region import FileRegion
from odradek.log.index import OffsetIndex
from odradek.log.segment import ZERO_COPY_MIN_BYTES
from odradek.protocol.records import CorruptRecordError, TimestampType, iter_batches


def offsets_of(records: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of each whole batch; fails on a partial trailing batch."""
    batches = list(iter_batches(records))
    assert sum(b.size_in_bytes for b in batches) == len(records), "a batch was cut"
    return [(b.base_offset, b.last_offset) for b in batches]


def append_batches(log: PartitionLog, make_batch, count: int, *, records: int = 1,
                   value: bytes = b"v" * 50, now_ms: int = 0) -> None:
    for _ in range(count):
        log.append_as_leader(make_batch([value] * records), leader_epoch=0, now_ms=now_ms)
    log.update_high_watermark(log.log_end_offset)


# -- opening -------------------------------------------------------------------------------

def test_an_empty_directory_opens_as_one_empty_segment_at_offset_zero(open_log, log_dir):
    log = open_log()
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (0, 0, 0)
    assert [s.base_offset for s in log.segments] == [0]
    assert sorted(p.name for p in log_dir.iterdir()) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"
    ]


def test_an_empty_directory_can_start_at_a_given_log_start_offset(open_log, make_batch):
    log = open_log(log_start_offset=500)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert log.append_as_leader(make_batch(), leader_epoch=0, now_ms=0).first_offset == 500


def test_reopening_keeps_every_offset_and_byte(open_log, make_batch):
    log = open_log(LogConfig(segment_bytes=400))
    append_batches(log, make_batch, 10, records=2)
    before = log.read(0, 10_000).records
    log.close()
    reopened = open_log(LogConfig(segment_bytes=400))
    assert reopened.log_end_offset == 20
    assert len(reopened.segments) == len(log.segments)
    assert reopened.read(0, 10_000).records == before


# -- append --------------------------------------------------------------------------------

def test_append_assigns_consecutive_offsets_and_stamps_the_leader_epoch(open_log, make_batch):
    log = open_log()
    first = log.append_as_leader(make_batch([b"a", b"b", b"c"]), leader_epoch=7, now_ms=0)
    second = log.append_as_leader(make_batch([b"d"]), leader_epoch=8, now_ms=0)
    assert (first.first_offset, first.last_offset, first.records_count) == (0, 2, 3)
    assert (second.first_offset, second.last_offset) == (3, 3)
    assert log.log_end_offset == 4
    stored = list(iter_batches(log.read(0, 10_000).records))
    assert [(b.base_offset, b.partition_leader_epoch) for b in stored] == [(0, 7), (3, 8)]
    assert all(b.is_valid_crc() for b in stored)


def test_append_of_several_batches_at_once_numbers_them_in_order(open_log, make_batch):
    log = open_log()
    records = make_batch([b"a", b"b"]) + make_batch([b"c"]) + make_batch([b"d", b"e", b"f"])
    info = log.append_as_leader(records, leader_epoch=0, now_ms=0)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 5, 6)
    assert info.valid_bytes == len(records)
    assert offsets_of(log.read(0, 10_000).records) == [(0, 1), (2, 2), (3, 5)]


def test_create_time_keeps_the_producer_timestamps(open_log, make_batch):
    log = open_log()
    info = log.append_as_leader(make_batch([b"a", b"b"], timestamps=[10, 20]), leader_epoch=0,
                                now_ms=99)
    assert info.log_append_time == -1
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (20, 1)
    [stored] = iter_batches(log.read(0, 10_000).records)
    assert [r.timestamp for r in stored.records()] == [10, 20]


def test_log_append_time_stamps_the_broker_time_and_keeps_the_crc_valid(open_log, make_batch):
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(make_batch([b"a", b"b"], timestamps=[10, 20]), leader_epoch=0,
                                now_ms=5_000)
    assert (info.log_append_time, info.max_timestamp) == (5_000, 5_000)
    [stored] = iter_batches(log.read(0, 10_000).records)
    assert stored.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert stored.max_timestamp == 5_000
    assert stored.is_valid_crc()
    assert [r.timestamp for r in stored.records()] == [5_000, 5_000]


def test_records_larger_than_a_segment_are_refused(open_log, make_batch):
    log = open_log(LogConfig(segment_bytes=100))
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(make_batch([b"x" * 200]), leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 0


def test_bytes_that_are_not_whole_batches_are_refused(open_log, make_batch):
    log = open_log()
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(make_batch()[:-5], leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_an_append_reaching_flush_messages_asks_for_a_flush(open_log, make_batch):
    log = open_log(LogConfig(flush_messages=2))
    first = log.append_as_leader(make_batch(), leader_epoch=0, now_ms=0)
    second = log.append_as_leader(make_batch(), leader_epoch=0, now_ms=0)
    assert (first.needs_flush, second.needs_flush) == (False, True)
    log.flush_to(second.last_offset + 1)
    assert log.recovery_point == 2
    assert not log.append_as_leader(make_batch(), leader_epoch=0, now_ms=0).needs_flush


def test_appends_never_fsync_themselves(open_log, make_batch):
    log = open_log(LogConfig(flush_messages=1))
    info = log.append_as_leader(make_batch(), leader_epoch=0, now_ms=0)
    assert info.needs_flush
    assert log.recovery_point == 0  # flush_to is the caller's, off the event loop


def test_flush_to_moves_the_recovery_point_to_everything_written_before_it(
    open_log, make_batch
):
    log = open_log()
    append_batches(log, make_batch, 3)
    log.flush_to(1)
    assert log.recovery_point == 3  # one fsync covers all that was written
    log.flush_to(2)  # already on disk: returns at once


def test_flush_to_may_run_on_another_thread_while_the_owner_appends(open_log, make_batch):
    import threading

    log = open_log(LogConfig(segment_bytes=400))
    flushes = []

    def flush_repeatedly():
        for _ in range(50):
            offset = log.log_end_offset
            log.flush_to(offset)
            flushes.append((offset, log.recovery_point))

    flusher = threading.Thread(target=flush_repeatedly)
    flusher.start()
    append_batches(log, make_batch, 200)
    flusher.join()
    log.flush_to(log.log_end_offset)
    assert log.recovery_point == 200
    assert all(recovery_point >= offset for offset, recovery_point in flushes)


# -- rolling -------------------------------------------------------------------------------

def test_a_segment_rolls_when_the_append_would_exceed_segment_bytes(open_log, make_batch):
    size = len(make_batch([b"v" * 50]))
    log = open_log(LogConfig(segment_bytes=3 * size))
    append_batches(log, make_batch, 7)
    assert [(s.base_offset, s.size) for s in log.segments] == [
        (0, 3 * size), (3, 3 * size), (6, size)
    ]


def test_a_segment_rolls_once_older_than_segment_ms_since_its_first_append(open_log, make_batch):
    log = open_log(LogConfig(segment_ms=1_000))
    append_batches(log, make_batch, 1, now_ms=10_000)
    append_batches(log, make_batch, 1, now_ms=11_000)  # exactly segment.ms old: no roll yet
    assert len(log.segments) == 1
    append_batches(log, make_batch, 1, now_ms=11_001)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_an_empty_segment_never_rolls_by_time(open_log, make_batch):
    log = open_log(LogConfig(segment_ms=1_000), now_ms=0)
    append_batches(log, make_batch, 1, now_ms=50_000)
    assert [s.base_offset for s in log.segments] == [0]


def test_a_segment_rolls_when_its_offset_index_is_full(open_log, make_batch):
    # Room for three offset index entries (24 bytes); with index_interval_bytes=0 every batch
    # after the first gets one. The timestamps never grow, so the time index stays at one.
    log = open_log(LogConfig(segment_index_bytes=24, index_interval_bytes=0))
    append_batches(log, make_batch, 5)
    assert [s.base_offset for s in log.segments] == [0, 4]


def test_rolling_an_empty_active_segment_does_nothing(open_log):
    log = open_log()
    log.roll()
    assert [s.base_offset for s in log.segments] == [0]


# -- read ----------------------------------------------------------------------------------

def test_read_returns_whole_batches_from_the_one_holding_the_fetch_offset(open_log, make_batch):
    log = open_log()
    append_batches(log, make_batch, 3, records=5)
    info = log.read(7, 10_000)
    assert offsets_of(info.records) == [(5, 9), (10, 14)]
    assert (info.fetch_offset, info.log_start_offset, info.log_end_offset) == (7, 0, 15)
    assert info.high_watermark == 15


def test_read_stops_at_max_bytes_on_a_batch_boundary(open_log, make_batch):
    log = open_log()
    append_batches(log, make_batch, 10)
    size = len(make_batch([b"v" * 50]))
    assert offsets_of(log.read(2, 3 * size + size // 2).records) == [(2, 2), (3, 3), (4, 4)]


def test_read_returns_one_whole_batch_even_when_larger_than_max_bytes(open_log, make_batch):
    log = open_log()
    append_batches(log, make_batch, 2, value=b"v" * 5_000)
    assert offsets_of(log.read(0, 100).records) == [(0, 0)]
    assert log.read(0, 100, min_one_batch=False).records == b""


def test_read_never_returns_data_at_or_beyond_max_offset(open_log, make_batch):
    log = open_log()
    append_batches(log, make_batch, 4, records=3)  # batches 0-2, 3-5, 6-8, 9-11
    assert offsets_of(log.read(0, 10_000, max_offset=6).records) == [(0, 2), (3, 5)]
    # A high watermark inside a batch holds that whole batch back.
    assert offsets_of(log.read(0, 10_000, max_offset=7).records) == [(0, 2), (3, 5)]
    assert log.read(6, 10_000, max_offset=7).records == b""
    assert log.read(6, 10_000, max_offset=6).records == b""


def test_a_zero_copy_read_names_the_same_bytes_in_the_file_and_the_offset_past_them(
        open_log, make_batch):
    log = open_log()
    append_batches(log, make_batch, 8, records=2, value=b"v" * 20_000)  # 40 KB batches

    for max_bytes, max_offset in ((1_000_000, None), (100_000, None), (1_000_000, 9),
                                  (10, None)):
        read = log.read(2, max_bytes, max_offset=max_offset).records
        region = log.read(2, max_bytes, max_offset=max_offset, zero_copy=True).records
        if len(read) < ZERO_COPY_MIN_BYTES:
            assert region == read  # too small to pay: read as usual
            continue
        assert isinstance(region, FileRegion)
        assert region.read() == read
        assert region.next_offset == offsets_of(read)[-1][1] + 1


def test_read_at_the_log_end_offset_is_empty(open_log, make_batch):
    log = open_log()
    append_batches(log, make_batch, 2)
    info = log.read(2, 10_000)
    assert info.records == b"" and info.log_end_offset == 2


@pytest.mark.parametrize("fetch_offset", [0, 4, 100])
def test_read_outside_the_log_is_offset_out_of_range(open_log, make_batch, fetch_offset):
    log = open_log()
    append_batches(log, make_batch, 3)
    log.delete_records_before(1)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(fetch_offset, 1_000)


def test_read_moves_on_to_the_next_segment(open_log, make_batch):
    size = len(make_batch([b"v" * 50]))
    log = open_log(LogConfig(segment_bytes=2 * size))
    append_batches(log, make_batch, 5)
    assert offsets_of(log.read(1, 10_000).records) == [(1, 1)]  # one segment per read
    assert offsets_of(log.read(2, 10_000).records) == [(2, 2), (3, 3)]


def test_read_without_min_one_batch_never_skips_a_batch_too_large_for_max_bytes(
    open_log, make_batch
):
    log = open_log()
    log.append_as_leader(make_batch([b"v" * 500]), leader_epoch=0, now_ms=0)
    log.roll()
    log.append_as_leader(make_batch([b"v"]), leader_epoch=0, now_ms=0)
    assert log.read(0, 100, min_one_batch=False).records == b""


def test_read_of_many_small_batches_deep_in_a_segment(open_log, make_batch):
    log = open_log(LogConfig(index_interval_bytes=500))
    append_batches(log, make_batch, 300)
    size = len(make_batch([b"v" * 50]))
    records = log.read(123, 40 * size + 7).records
    assert offsets_of(records) == [(o, o) for o in range(123, 163)]
    records = log.read(123, 40 * size, max_offset=140).records
    assert offsets_of(records) == [(o, o) for o in range(123, 140)]


# -- recovery ------------------------------------------------------------------------------

def _active_log_file(log: PartitionLog):
    return log.segments[-1].log_path


def test_a_torn_half_batch_at_the_tail_is_cut_at_reopen(open_log, make_batch, caplog):
    log = open_log()
    append_batches(log, make_batch, 3)
    path = _active_log_file(log)
    log.close()
    with open(path, "ab") as f:
        f.write(make_batch([b"never acknowledged"])[:40])
    with caplog.at_level(logging.WARNING):
        reopened = open_log()
    assert reopened.log_end_offset == 3
    assert offsets_of(reopened.read(0, 10_000).records) == [(0, 0), (1, 1), (2, 2)]
    assert "cut 40 bytes" in caplog.text
    assert reopened.append_as_leader(make_batch(), leader_epoch=0, now_ms=0).first_offset == 3


def test_garbage_at_the_tail_is_cut_at_reopen(open_log, make_batch):
    log = open_log()
    append_batches(log, make_batch, 2)
    path = _active_log_file(log)
    size = os.path.getsize(path)
    log.close()
    with open(path, "ab") as f:
        f.write(os.urandom(5_000))
    reopened = open_log()
    assert reopened.log_end_offset == 2
    assert os.path.getsize(path) == size


def test_a_batch_with_a_bad_crc_and_all_after_it_are_cut_at_reopen(open_log, make_batch):
    log = open_log()
    append_batches(log, make_batch, 4)
    path = _active_log_file(log)
    size = len(make_batch([b"v" * 50]))
    log.close()
    with open(path, "r+b") as f:  # flip a value byte of the third batch
        f.seek(2 * size + size - 3)
        f.write(b"X")
    reopened = open_log()
    assert reopened.log_end_offset == 2
    assert offsets_of(reopened.read(0, 10_000).records) == [(0, 0), (1, 1)]


def test_a_cut_in_an_older_segment_deletes_every_segment_after_it(open_log, make_batch, caplog):
    config = LogConfig(segment_bytes=300)  # two batches per segment
    log = open_log(config)
    append_batches(log, make_batch, 6)
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    middle = log.segments[1].log_path
    size = len(make_batch([b"v" * 50]))
    log.close()
    with open(middle, "r+b") as f:  # a bad byte in offset 3's batch (an OS crash, a bad disk)
        f.seek(2 * size - 3)
        f.write(b"X")
    with caplog.at_level(logging.WARNING):
        reopened = open_log(config)  # recovery point 0: every segment is checked
    assert reopened.log_end_offset == 3
    assert [s.base_offset for s in reopened.segments] == [0, 2]
    assert "deleting the 1 segments after it" in caplog.text
    assert not (log.directory / "00000000000000000004.log").exists()


def test_an_offline_log_refuses_every_operation_and_keeps_its_offsets(open_log, make_batch):
    log = open_log()
    append_batches(log, make_batch, 2)
    log.take_offline("the disk failed")
    for operation in (lambda: log.read(0, 100),
                      lambda: log.append_as_leader(make_batch(), leader_epoch=0, now_ms=0),
                      lambda: log.offset_for_timestamp(0), log.roll,
                      lambda: log.delete_records_before(1)):
        with pytest.raises(KafkaStorageError, match="the disk failed"):
            operation()
    assert (log.log_start_offset, log.log_end_offset) == (0, 2)


def test_deleted_index_files_are_rebuilt_at_reopen(open_log, make_batch, log_dir):
    config = LogConfig(segment_bytes=4_000, index_interval_bytes=200)
    log = open_log(config)
    append_batches(log, make_batch, 100)
    index = log.segments[0].offset_index.path
    time_index = log.segments[0].time_index.path
    contents = index.read_bytes(), time_index.read_bytes()
    expected = log.read(17, 1_000).records
    log.close()
    index.unlink()
    time_index.unlink()
    reopened = open_log(config)
    assert (index.read_bytes(), time_index.read_bytes()) == contents
    assert reopened.read(17, 1_000).records == expected


def test_an_index_file_of_impossible_length_is_rebuilt_at_reopen(open_log, make_batch):
    config = LogConfig(segment_bytes=4_000, index_interval_bytes=200)
    log = open_log(config)
    append_batches(log, make_batch, 100)
    index = log.segments[0].offset_index.path
    contents = index.read_bytes()
    log.close()
    with open(index, "ab") as f:
        f.write(b"\x00\x01\x02")
    open_log(config)
    assert index.read_bytes() == contents


def test_an_index_pointing_past_its_log_is_rebuilt_at_reopen(open_log, make_batch):
    config = LogConfig(segment_bytes=4_000, index_interval_bytes=200)
    log = open_log(config)
    append_batches(log, make_batch, 100)
    index = log.segments[0].offset_index.path
    contents = index.read_bytes()
    log.close()
    with open(index, "ab") as f:
        f.write((10).to_bytes(4, "big") + (10**6).to_bytes(4, "big"))
    reopened = open_log(config)
    assert index.read_bytes() == contents
    assert offsets_of(reopened.read(30, 150).records) == [(30, 30)]


# -- ListOffsets ---------------------------------------------------------------------------

def test_offset_for_timestamp_finds_the_exact_record_inside_a_batch(open_log, make_batch):
    log = open_log(LogConfig(segment_bytes=400))
    for start in range(0, 1_000, 100):  # ten batches of 4 records: t = start, +10, +20, +30
        log.append_as_leader(
            make_batch([b"v"] * 4, timestamps=[start, start + 10, start + 20, start + 30]),
            leader_epoch=0, now_ms=0)
    assert len(log.segments) > 1
    assert log.offset_for_timestamp(0) == OffsetAndTimestamp(0, 0)
    assert log.offset_for_timestamp(512) == OffsetAndTimestamp(22, 520)
    assert log.offset_for_timestamp(520) == OffsetAndTimestamp(22, 520)
    assert log.offset_for_timestamp(921) == OffsetAndTimestamp(39, 930)
    assert log.offset_for_timestamp(921) == (39, 930)  # unpacks as (offset, timestamp)
    assert log.offset_for_timestamp(931) is None


def test_offset_for_timestamp_with_timestamps_out_of_order(open_log, make_batch):
    log = open_log()
    log.append_as_leader(make_batch([b"a", b"b", b"c"], timestamps=[50, 10, 30]), leader_epoch=0,
                         now_ms=0)
    log.append_as_leader(make_batch([b"d"], timestamps=[20]), leader_epoch=0, now_ms=0)
    assert log.offset_for_timestamp(15) == (0, 50)
    assert log.offset_for_timestamp(5) == (0, 50)
    assert log.offset_for_timestamp(51) is None


def test_offset_for_timestamp_skips_records_below_the_log_start_offset(open_log, make_batch):
    log = open_log()
    log.append_as_leader(make_batch([b"a", b"b", b"c"], timestamps=[10, 20, 30]), leader_epoch=0,
                         now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(2)
    assert log.offset_for_timestamp(0) == (2, 30)


def test_offset_for_timestamp_on_log_append_time_topics(open_log, make_batch):
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    for now_ms in (1_000, 2_000, 3_000):
        log.append_as_leader(make_batch([b"a", b"b"], timestamp=1), leader_epoch=0, now_ms=now_ms)
    assert log.offset_for_timestamp(1_500) == (2, 2_000)


def test_max_timestamp_and_offset_is_the_first_record_with_the_largest_timestamp(
    open_log, make_batch
):
    log = open_log(LogConfig(segment_bytes=200))
    assert log.max_timestamp_and_offset() is None
    log.append_as_leader(make_batch([b"a", b"b"], timestamps=[5, 90]), leader_epoch=0, now_ms=0)
    log.append_as_leader(make_batch([b"c", b"d", b"e"], timestamps=[7, 95, 95]), leader_epoch=0,
                         now_ms=0)
    log.append_as_leader(make_batch([b"f"], timestamps=[60]), leader_epoch=0, now_ms=0)
    assert log.max_timestamp_and_offset() == (3, 95)


# -- truncation, DeleteRecords, deletion ---------------------------------------------------

def test_truncate_to_drops_the_offset_and_everything_after(open_log, make_batch):
    size = len(make_batch([b"v" * 50]))
    log = open_log(LogConfig(segment_bytes=3 * size))
    append_batches(log, make_batch, 8)
    log.truncate_to(4)
    assert (log.log_end_offset, log.high_watermark) == (4, 4)
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert offsets_of(log.read(3, 10_000).records) == [(3, 3)]
    assert log.append_as_leader(make_batch(), leader_epoch=1, now_ms=0).first_offset == 4


def test_truncate_to_inside_a_batch_drops_the_whole_batch(open_log, make_batch):
    log = open_log()
    append_batches(log, make_batch, 2, records=5)
    log.truncate_to(7)
    assert log.log_end_offset == 5


def test_truncate_to_below_the_first_segment_starts_the_log_afresh(open_log, make_batch):
    size = len(make_batch([b"v" * 50]))
    log = open_log(LogConfig(segment_bytes=2 * size))
    append_batches(log, make_batch, 6)
    log.delete_records_before(4)
    assert [s.base_offset for s in log.segments] == [4]
    log.truncate_to(1)
    assert (log.log_start_offset, log.log_end_offset) == (1, 1)
    assert [s.base_offset for s in log.segments] == [1]


def test_delete_records_before_moves_the_log_start_offset_and_drops_whole_segments(
    open_log, make_batch
):
    size = len(make_batch([b"v" * 50]))
    log = open_log(LogConfig(segment_bytes=2 * size))
    append_batches(log, make_batch, 6)  # segments at 0, 2, 4
    first_files = [log.segments[0].log_path, log.segments[0].offset_index.path]
    assert log.delete_records_before(3) == 3
    assert log.log_start_offset == 3
    assert [s.base_offset for s in log.segments] == [2, 4]
    assert not any(p.exists() for p in first_files)
    assert offsets_of(log.read(3, 10_000).records) == [(3, 3)]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 10_000)
    assert log.delete_records_before(1) == 3  # never moves back


def test_delete_records_beyond_the_high_watermark_is_out_of_range(open_log, make_batch):
    log = open_log()
    append_batches(log, make_batch, 3)
    log.update_high_watermark(2)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(3)


def _log_of_three_segments(open_log, make_batch, **config):
    size = len(make_batch([b"v" * 50]))
    log = open_log(LogConfig(segment_bytes=2 * size, **config))
    for timestamp in (1_000, 1_000, 2_000, 2_000, 3_000):  # segments at 0, 2, 4
        log.append_as_leader(make_batch([b"v" * 50], timestamp=timestamp), leader_epoch=0, now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    return log, size


def test_retention_ms_deletes_the_segments_whose_records_are_all_older(open_log, make_batch):
    log, _ = _log_of_three_segments(open_log, make_batch, retention_ms=500)
    assert log.delete_old_segments(now_ms=2_400) == 1
    assert [s.base_offset for s in log.segments] == [2, 4]
    assert log.log_start_offset == 2


def test_retention_bytes_deletes_the_oldest_segments_beyond_the_limit(open_log, make_batch):
    size = len(make_batch([b"v" * 50]))
    log, _ = _log_of_three_segments(open_log, make_batch, retention_bytes=3 * size)
    assert log.delete_old_segments(now_ms=0) == 1
    assert log.size_in_bytes == 3 * size


def test_retention_never_deletes_records_above_the_high_watermark(open_log, make_batch):
    log, _ = _log_of_three_segments(open_log, make_batch, retention_ms=0)
    log.update_high_watermark(3)
    assert log.delete_old_segments(now_ms=10_000) == 1


def test_retention_of_every_segment_leaves_an_empty_log_at_the_end_offset(open_log, make_batch):
    log, _ = _log_of_three_segments(open_log, make_batch, retention_ms=0)
    assert log.delete_old_segments(now_ms=10_000) == 3
    assert [(s.base_offset, s.size) for s in log.segments] == [(5, 0)]
    assert log.log_start_offset == log.log_end_offset == 5


def test_compacted_topics_are_not_deleted_by_retention(open_log, make_batch):
    log, _ = _log_of_three_segments(open_log, make_batch, retention_ms=0, cleanup_policy="compact")
    assert log.delete_old_segments(now_ms=10_000) == 0


def test_delete_removes_the_partition_directory(open_log, make_batch, log_dir):
    log = open_log()
    append_batches(log, make_batch, 3)
    log.delete()
    assert list(log_dir.parent.iterdir()) == []



def test_index_files_left_without_their_log_are_removed_at_open(open_log, log_dir):
    log_dir.mkdir()
    orphan = log_dir / "00000000000000000042.index"
    orphan.write_bytes(bytes(8))
    log = open_log()
    assert not orphan.exists()
    assert [s.base_offset for s in log.segments] == [0]


def test_after_a_clean_shutdown_the_indexes_are_read_when_first_used(
    open_log, make_batch, monkeypatch
):
    config = LogConfig(segment_bytes=4_000, index_interval_bytes=200)
    log = open_log(config)
    append_batches(log, make_batch, 100)
    expected = {offset: log.read(offset, 1_000).records for offset in (0, 17, 50, 99)}
    log.close()
    loaded = []
    original = OffsetIndex._load

    def load(index, data):
        loaded.append(index.base_offset)
        return original(index, data)

    monkeypatch.setattr(OffsetIndex, "_load", load)
    reopened = open_log(config, had_clean_shutdown=True)
    assert loaded == []
    assert reopened.log_end_offset == 100
    assert {offset: reopened.read(offset, 1_000).records for offset in expected} == expected
    assert loaded  # the reads looked the offsets up in the indexes
