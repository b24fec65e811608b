"""The log cleaner, one round at a time on the test's thread: the latest record of each key
stays at its offset, tombstones go after delete.retention.ms, the active segment and
records younger than min.compaction.lag.ms are left alone, and a crash in the middle of a
swap is settled at the next open."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import pytest

from odradek.log import LogConfig, PartitionLog
from odradek.log.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    LogCleaner,
    build_cleaned_segments,
    clean,
    plan_cleaning,
)
from odradek.log.checkpoint import read_offsets_checkpoint
from odradek.log.segment import CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX
from odradek.protocol.records import Record, build_batch, iter_batches

# Room for about two one-record batches: every other append rolls a segment.
SMALL_SEGMENT_BYTES = 160
COMPACT = LogConfig(
    cleanup_policy="compact", segment_bytes=SMALL_SEGMENT_BYTES, min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=1_000, file_delete_delay_ms=0,
)


def produce(log: PartitionLog, key: bytes | None, value: bytes | None, timestamp: int = 1_000,
            **batch_options) -> int:
    batch = bytearray(build_batch([Record(0, timestamp, key, value)], base_offset=0,
                                  **batch_options))
    info = log.append(batch, leader_epoch=0, now_ms=timestamp)
    log.high_watermark = log.log_end_offset
    return info.first_offset


def consume(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, read from the start as a consumer does."""
    records, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        batches = list(iter_batches(data))
        assert batches, f"no batch at {offset}"
        for batch in batches:
            records += [(r.offset, r.key, r.value) for r in batch.records() if r.offset >= offset]
            offset = batch.next_offset
    return records


def compacted(records, end_offset: int):
    """``records`` as a round ending at ``end_offset`` leaves them: below it, the latest
    record of each key; from it on, all."""
    latest = {key: offset for offset, key, _ in records if offset < end_offset}
    return [r for r in records if r[0] >= end_offset or latest[r[1]] == r[0]]


def test_cleaning_keeps_the_latest_record_of_each_key_at_its_original_offset(open_log):
    log = open_log(COMPACT)
    for i in range(10):
        produce(log, b"k%d" % (i % 3), b"v%d" % i)
    before = consume(log)
    active_base = log.segments[-1].base_offset
    result = clean(log, 0, now_ms=10_000)
    assert result is not None and result.end_offset == active_base
    after = consume(log)
    # Below the active segment one record per key, the latest there, at its offset; the
    # active segment untouched.
    assert after == compacted(before, active_base)
    assert len([r for r in after if r[0] < active_base]) == 3
    assert [r[0] for r in after if r[0] >= active_base] == list(range(active_base, 10))
    assert log.log_end_offset == 10


def test_cleaned_segments_are_merged_up_to_segment_bytes_and_reads_work_across_them(open_log):
    log = open_log(COMPACT)
    for i in range(20):
        produce(log, b"same", b"v%d" % i)
    before = len(log.segments)
    clean(log, 0, now_ms=10_000)
    assert len(log.segments) < before
    # Any offset in the gaps reads the next record kept, like Kafka's fetch.
    active_base = log.segments[-1].base_offset
    for offset in range(active_base):
        data = log.read(offset, 1 << 20).records
        first = next(iter_batches(data))
        assert first.last_offset >= offset or first.base_offset >= active_base


def test_the_active_segment_is_never_cleaned(open_log):
    log = open_log(dataclasses.replace(COMPACT, segment_bytes=LogConfig().segment_bytes))
    for i in range(10):
        produce(log, b"k", b"v%d" % i)
    assert len(log.segments) == 1
    assert clean(log, 0, now_ms=10_000) is None
    assert [r[0] for r in consume(log)] == list(range(10))


def test_records_newer_than_min_compaction_lag_are_not_cleaned(open_log):
    config = dataclasses.replace(COMPACT, min_compaction_lag_ms=5_000)
    log = open_log(config)
    for i in range(4):
        produce(log, b"k", b"old%d" % i, timestamp=1_000)
    for i in range(4):
        produce(log, b"k", b"new%d" % i, timestamp=8_000)
    result = clean(log, 0, now_ms=10_000)  # only records older than 5 000 are cleanable
    assert result is not None
    offsets = [r[0] for r in consume(log)]
    assert offsets[0] == 3  # the latest of the old ones, in the cleanable part
    assert offsets[1:] == list(range(4, 8))


def test_tombstones_are_kept_until_delete_retention_ms_then_removed(open_log):
    log = open_log(COMPACT)
    produce(log, b"gone", b"v", timestamp=1_000)
    produce(log, b"kept", b"v", timestamp=1_000)
    produce(log, b"gone", None, timestamp=1_000)  # the tombstone, offset 2
    for i in range(4):
        produce(log, b"other", b"%d" % i, timestamp=1_000)
    first = clean(log, 0, now_ms=1_500)
    assert first is not None
    assert (2, b"gone", None) in consume(log)
    assert (0, b"gone", b"v") not in consume(log)
    # Cleaned, but not yet delete.retention.ms old: a later round still keeps it.
    assert first.tombstones_due_ms == 1_000 + COMPACT.delete_retention_ms
    assert clean(log, first.end_offset, now_ms=1_800, tombstones_due_ms=first.tombstones_due_ms) \
        is None
    second = clean(log, first.end_offset, now_ms=2_500, tombstones_due_ms=first.tombstones_due_ms)
    assert second is not None and second.tombstones_due_ms is None
    records = consume(log)
    assert all(key != b"gone" for _, key, _ in records)
    assert (1, b"kept", b"v") in records


def test_rewritten_batches_keep_producer_metadata(open_log):
    log = open_log(COMPACT)
    records = [Record(i, 1_000, b"k%d" % (i % 2), b"v%d" % i) for i in range(4)]
    log.append(bytearray(build_batch(records, base_offset=0, producer_id=7, producer_epoch=2,
                                     base_sequence=10)), leader_epoch=3, now_ms=1_000)
    produce(log, b"k0", b"newer")  # offset 4, supersedes 0 and 2
    for _ in range(3):
        produce(log, b"x", b"y")
    assert log.segments[-1].base_offset > 4
    clean(log, 0, now_ms=10_000)
    batch = next(iter_batches(log.read(0, 1 << 20).records))
    assert [(r.offset, r.value) for r in batch.records()] == [(3, b"v3")]
    assert (batch.base_offset, batch.producer_id, batch.producer_epoch) == (3, 7, 2)
    assert (batch.base_sequence, batch.partition_leader_epoch) == (13, 3)
    assert batch.is_valid_crc()


def test_a_round_is_abandoned_when_retention_deleted_the_segments_meanwhile(open_log):
    log = open_log(COMPACT)
    for i in range(10):
        produce(log, b"k", b"v%d" % i)
    plan = plan_cleaning(log, 0, now_ms=10_000)
    cleaned = build_cleaned_segments(plan)
    log.delete_records_before(4)
    assert not log.replace_segments(list(plan.segments), list(plan.sizes), cleaned.segments)
    assert [r[0] for r in consume(log)] == list(range(log.log_start_offset, 10))


@pytest.mark.parametrize("crash_at", [CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX])
def test_a_crash_in_the_middle_of_a_swap_is_settled_at_the_next_open(
        open_log, log_dir: Path, crash_at):
    log = open_log(COMPACT)
    for i in range(10):
        produce(log, b"k%d" % (i % 2), b"v%d" % i)
    before = consume(log)
    plan = plan_cleaning(log, 0, now_ms=10_000)
    cleaned = build_cleaned_segments(plan)  # *.swap files, fsynced
    if crash_at == CLEANED_FILE_SUFFIX:
        for segment in cleaned.segments:  # back to the state before the rename
            segment.rename_files(CLEANED_FILE_SUFFIX)
    else:  # the swap began: the first old segment is gone already
        log.segments[0].rename_to_deleted()
    log.close()
    reopened = open_log(COMPACT, now_ms=10_000)
    leftovers = [p.name for p in log_dir.iterdir()
                 if p.name.endswith((CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX, ".deleted"))]
    assert leftovers == []
    after = consume(reopened)
    if crash_at == CLEANED_FILE_SUFFIX:
        assert after == before
        return
    # The swap is in; an old segment past the records it kept may remain (it is cleaned
    # again next round): a consumer still sees every key's latest value at its offset,
    # offsets increasing, and nothing that was not there before.
    offsets = [offset for offset, _, _ in after]
    assert offsets == sorted(set(offsets))
    assert set(after) <= set(before)
    assert set(after) >= set(compacted(before, plan.end_offset))
    assert {k: (o, v) for o, k, v in after} == {k: (o, v) for o, k, v in before}


@pytest.mark.parametrize("use_process", [True, False], ids=["worker-process", "executor"])
def test_the_cleaner_checkpoints_where_it_stopped_and_a_restart_does_not_clean_again(
        tmp_path: Path, use_process: bool):
    from odradek.log import LogManager

    log_dir = tmp_path / "data"
    log_dir.mkdir()
    now = [10_000]
    manager = LogManager([log_dir], clock=lambda: now[0])
    log = manager.get_or_create("orders", 0, COMPACT)
    for i in range(10):
        produce(log, b"k", b"v%d" % i)

    async def run_in_executor(function, *args):
        return function(*args)

    def cleaner() -> LogCleaner:
        return LogCleaner(logs=manager.compacted_logs, log_dirs=[log_dir],
                          clock=lambda: now[0], run_in_executor=run_in_executor,
                          use_process=use_process)

    records = [(i, b"k", b"v%d" % i) for i in range(10)]
    first = cleaner()
    try:
        assert asyncio.run(first.clean_logs()) == 1
    finally:
        first.close()
    end = log.segments[-1].base_offset
    assert consume(log) == compacted(records, end)
    assert not [p for p in log.directory.iterdir()
                if p.name.endswith((CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX))]
    assert read_offsets_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT) == {("orders", 0): end}
    assert cleaner().first_dirty_offset(("orders", 0)) == end
    assert asyncio.run(cleaner().clean_logs()) == 0  # nothing dirty since
    manager.close_all()



def test_a_segment_the_cleaner_emptied_does_not_stop_retention_on_compact_delete_topics(
        open_log):
    log = open_log(dataclasses.replace(COMPACT, cleanup_policy="compact,delete",
                                       retention_ms=5_000))
    for i in range(8):
        produce(log, b"k", b"v%d" % i)
    clean(log, 0, now_ms=10_000)
    assert log.segments[0].size == 0  # kept: its base offset is the log start offset
    assert consume(log)[0][0] == 5
    # An empty segment's age is its file's: well past retention.ms later, every record
    # (all past retention.ms) is gone.
    later_ms = time.time_ns() // 1_000_000 + 10 * 5_000
    log.delete_old_segments(later_ms)
    assert log.log_start_offset == log.log_end_offset == 8
