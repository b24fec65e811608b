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
    CleanerConfig,
    LogCleaner,
    build_cleaned_segments,
    clean,
    plan_cleaning,
)
from odradek.log.checkpoint import read_offsets_checkpoint
from odradek.log.producer_state import OutOfOrderSequenceError
from odradek.log.segment import CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX
from odradek.protocol.records import Record, RecordBatch, build_batch, iter_batches
from odradek.protocol.topic_partition import TopicPartition

# Room for about two one-record batches: every other append rolls a segment.
SMALL_SEGMENT_BYTES = 160
COMPACT = LogConfig(
    cleanup_policy="compact", segment_bytes=SMALL_SEGMENT_BYTES, min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=1_000, file_delete_delay_ms=0,
)


def produce(log: PartitionLog, key: bytes | None, value: bytes | None, timestamp: int = 1_000,
            **batch_options) -> int:
    """One one-record batch; its offset."""
    return produce_records(log, [(key, value)], timestamp, **batch_options)


def produce_records(log: PartitionLog, records: list[tuple[bytes | None, bytes | None]],
                    timestamp: int = 1_000, **batch_options) -> int:
    """One batch of (key, value) records, as a producer sends it; its base offset."""
    batch = bytearray(build_batch(
        [Record(i, timestamp, key, value) for i, (key, value) in enumerate(records)],
        base_offset=0, **batch_options))
    info = log.append_as_leader(batch, leader_epoch=0, now_ms=timestamp)
    log.update_high_watermark(log.log_end_offset)
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
    assert first.deletes_due_ms == 1_000 + COMPACT.delete_retention_ms
    assert clean(log, first.end_offset, now_ms=1_800, deletes_due_ms=first.deletes_due_ms) \
        is None
    second = clean(log, first.end_offset, now_ms=2_500, deletes_due_ms=first.deletes_due_ms)
    assert second is not None and second.deletes_due_ms is None
    records = consume(log)
    assert all(key != b"gone" for _, key, _ in records)
    assert (1, b"kept", b"v") in records


def test_a_rewritten_batch_keeps_the_original_offsets_sequences_and_producer_metadata(open_log):
    log = open_log(COMPACT)
    records = [Record(i, 1_000, b"k%d" % (i % 2), b"v%d" % i) for i in range(4)]
    log.append_as_leader(bytearray(build_batch(records, base_offset=0, producer_id=7,
                                               producer_epoch=2, base_sequence=10)),
                         leader_epoch=3, now_ms=1_000)
    produce(log, b"k0", b"newer")  # offset 4, supersedes 0 and 2
    for _ in range(3):
        produce(log, b"x", b"y")
    assert log.segments[-1].base_offset > 4
    clean(log, 0, now_ms=10_000)
    batch = next(iter_batches(log.read(0, 1 << 20).records))
    assert [(r.offset, r.value) for r in batch.records()] == [(3, b"v3")]
    # Kafka's filterTo for v2: the batch still spans offsets 0..3 and sequences 10..13.
    assert (batch.base_offset, batch.last_offset) == (0, 3)
    assert (batch.base_sequence, batch.last_sequence) == (10, 13)
    assert (batch.producer_id, batch.producer_epoch, batch.partition_leader_epoch) == (7, 2, 3)
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
    assert read_offsets_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT) == {
        TopicPartition("orders", 0): end}
    assert cleaner().first_dirty_offset(TopicPartition("orders", 0)) == end
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


# -- an idempotent producer's last batch -------------------------------------------------

PRODUCER_ID = 7
PRODUCER_EPOCH = 0


def produce_idempotent(log: PartitionLog, keys: list[bytes], base_sequence: int,
                       timestamp: int = 1_000) -> int:
    """One batch of ``keys`` from producer 7 starting at ``base_sequence``; its base offset."""
    return produce_records(log, [(key, b"v") for key in keys], timestamp,
                           producer_id=PRODUCER_ID, producer_epoch=PRODUCER_EPOCH,
                           base_sequence=base_sequence)


def stored_batches(log: PartitionLog):
    batches, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        read = list(iter_batches(log.read(offset, 1 << 20).records))
        assert read, f"no batch at {offset}"
        batches += read
        offset = read[-1].next_offset
    return batches


def test_an_idempotent_producers_emptied_last_batch_stays_so_its_sequence_survives_a_reopen(
        open_log):
    log = open_log(COMPACT)
    produce_idempotent(log, [b"a", b"b"], base_sequence=0)  # offsets 0..1, sequences 0..1
    produce_idempotent(log, [b"c", b"d"], base_sequence=2)  # offsets 2..3, sequences 2..3: last
    for key in (b"a", b"b", b"c", b"d"):  # another writer overwrites every key
        produce(log, key, b"latest-" + key)
    produce(log, b"filler", b"f")  # the overwrites leave the active segment
    before = consume(log)
    active_base = log.segments[-1].base_offset
    assert active_base > 7

    assert clean(log, 0, now_ms=10_000).end_offset == active_base

    # The first batch went; the last one stays as a header: no records, its offsets,
    # producer and sequences.
    producer_batches = [b for b in stored_batches(log) if b.has_producer_id]
    assert len(producer_batches) == 1
    empty = producer_batches[0]
    assert (empty.records_count, empty.size_in_bytes, empty.records()) == (0, 61, [])
    assert (empty.base_offset, empty.last_offset) == (2, 3)
    assert (empty.producer_id, empty.producer_epoch) == (PRODUCER_ID, PRODUCER_EPOCH)
    assert (empty.base_sequence, empty.last_sequence) == (2, 3)
    assert empty.max_timestamp == 1_000 and empty.is_valid_crc()
    # Readers see exactly the latest value of each key, at its offset.
    assert consume(log) == compacted(before, active_base)

    # Reopened without a producer state snapshot, the state is rebuilt from the log alone,
    # and the producer's next batch follows its last sequence.
    log.close()
    for snapshot in log.directory.glob("*.snapshot"):
        snapshot.unlink()
    reopened = open_log(COMPACT, now_ms=10_000)
    state = reopened.producer_state
    entry = state.entry(PRODUCER_ID)
    assert entry is not None and (entry.producer_epoch, entry.last_seq) == (PRODUCER_EPOCH, 3)
    next_batch = RecordBatch(build_batch([Record(0, 11_000, b"e", b"v")], base_offset=0,
                                         producer_id=PRODUCER_ID, producer_epoch=PRODUCER_EPOCH,
                                         base_sequence=4))
    assert state.validate_append(next_batch) is None
    gap = RecordBatch(build_batch([Record(0, 11_000, b"e", b"v")], base_offset=0,
                                  producer_id=PRODUCER_ID, producer_epoch=PRODUCER_EPOCH,
                                  base_sequence=5))
    with pytest.raises(OutOfOrderSequenceError):
        state.validate_append(gap)


def test_the_empty_batch_goes_once_the_producer_wrote_a_later_batch(open_log):
    log = open_log(COMPACT)
    produce_idempotent(log, [b"a"], base_sequence=0)
    produce(log, b"a", b"overwritten")
    produce(log, b"filler", b"f")
    first = clean(log, 0, now_ms=10_000)
    assert [b.records_count for b in stored_batches(log) if b.has_producer_id] == [0]
    produce_idempotent(log, [b"b"], base_sequence=1)  # the producer's new last batch
    for i in range(3):
        produce(log, b"filler", b"%d" % i)
    clean(log, first.end_offset, now_ms=10_000)
    producer_batches = [b for b in stored_batches(log) if b.has_producer_id]
    assert [(b.base_sequence, b.records_count) for b in producer_batches] == [(1, 1)]


def test_an_expired_producers_emptied_last_batch_is_removed(open_log):
    log = open_log(COMPACT)
    produce_idempotent(log, [b"a"], base_sequence=0, timestamp=1_000)
    produce(log, b"a", b"overwritten")
    produce(log, b"filler", b"f")
    # producer.id.expiration.ms after the batch's max timestamp, the producer is forgotten.
    log.producer_state.remove_expired_producers(6_000, producer_id_expiration_ms=5_000)
    clean(log, 0, now_ms=6_000)
    assert [b for b in stored_batches(log) if b.has_producer_id] == []
    assert [(k, v) for _, k, v in consume(log)] == [(b"a", b"overwritten"), (b"filler", b"f")]


# -- the bounded offset map --------------------------------------------------------------


def test_the_offset_map_capacity_follows_the_dedupe_buffer_size_and_load_factor():
    # Kafka: 128 MiB / 24 bytes per entry, filled to 90 %.
    assert CleanerConfig().offset_map_capacity == int(134217728 // 24 * 0.9)
    assert CleanerConfig(dedupe_buffer_size=24 * 100, io_buffer_load_factor=0.5) \
        .offset_map_capacity == 50
    with pytest.raises(ValueError, match="too small"):
        CleanerConfig(dedupe_buffer_size=24)  # one slot at 90 %: not even one message


def test_a_small_offset_map_cleans_part_of_the_dirty_section_per_round_until_done(open_log):
    log = open_log(COMPACT)
    for i in range(16):  # one-record batches, two per segment: keys k0..k5 over and over
        produce(log, b"k%d" % (i % 6), b"v%d" % i)
    before = consume(log)
    active_base = log.segments[-1].base_offset
    segment_bases = [s.base_offset for s in log.segments]
    # Room for three keys (4 slots at 90 %): each round maps one two-key segment.
    config = CleanerConfig(dedupe_buffer_size=4 * 24)
    assert config.offset_map_capacity == 3

    ends, first_dirty = [], 0
    for _ in range(len(segment_bases)):  # a round per segment at most
        result = clean(log, first_dirty, now_ms=10_000, cleaner_config=config)
        assert result is not None
        ends.append(first_dirty := result.end_offset)
        if first_dirty == active_base:
            break
    # Each round stopped at the next segment boundary, the last one at the active segment.
    assert ends == [b for b in segment_bases[1:] if b <= active_base]
    assert len(ends) > 1
    assert consume(log) == compacted(before, active_base)


def test_a_log_whose_first_dirty_segment_overflows_the_offset_map_is_left_uncleaned(
        tmp_path: Path, caplog):
    from odradek.log import LogManager

    log_dir = tmp_path / "data"
    log_dir.mkdir()
    manager = LogManager([log_dir], clock=lambda: 10_000)
    log = manager.get_or_create("wide", 0, COMPACT)
    produce_records(log, [(b"a", b"v"), (b"b", b"v"), (b"c", b"v")])  # three keys, one segment
    for i in range(3):
        produce(log, b"a", b"%d" % i)
    before = consume(log)

    async def run_in_executor(function, *args):
        return function(*args)

    cleaner = LogCleaner(logs=manager.compacted_logs, log_dirs=[log_dir], clock=lambda: 10_000,
                         run_in_executor=run_in_executor, use_process=False,
                         config=CleanerConfig(dedupe_buffer_size=3 * 24))  # two keys
    try:
        assert asyncio.run(cleaner.clean_logs()) == 0
        assert asyncio.run(cleaner.clean_logs()) == 0  # not tried again
        assert consume(log) == before
        refusals = [r for r in caplog.records if "more keys than the offset map" in r.message]
        assert len(refusals) == 1 and refusals[0].levelname == "ERROR"
        assert not [p for p in log.directory.iterdir()
                    if p.name.endswith((CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX))]
    finally:
        cleaner.close()
        manager.close_all()
