"""The leader epoch cache (KIP-101): Kafka's ``leader-epoch-checkpoint`` file, what
OffsetsForLeaderEpoch answers from it, and how truncation at either end changes it; and the
log keeping it in step with its records."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.log import LeaderEpochFileCache, LogConfig
from odradek.log.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
)
from odradek.protocol.records import Record, build_batch

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def cache_of(directory: Path, *entries: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(directory)
    for epoch, start_offset in entries:
        cache.assign(epoch, start_offset)
    return cache


def test_the_checkpoint_file_is_kafkas_text_format(tmp_path):
    cache_of(tmp_path, (0, 0), (2, 1200), (5, 4711))
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n3\n0 0\n2 1200\n5 4711\n"
    assert LeaderEpochFileCache.load(tmp_path).entries == [
        EpochEntry(0, 0), EpochEntry(2, 1200), EpochEntry(5, 4711)]


def test_there_is_no_file_until_the_first_epoch_and_a_missing_file_is_an_empty_cache(tmp_path):
    cache = LeaderEpochFileCache.load(tmp_path)
    cache.truncate_from_end(0)
    cache.truncate_from_start(0)
    assert cache.entries == [] and cache.latest_epoch is None
    assert not (tmp_path / LEADER_EPOCH_CHECKPOINT).exists()


@pytest.mark.parametrize("content", ["1\n1\n0 0\n", "0\n2\n0 0\n", "0\n1\n0\n", "x"])
def test_an_unreadable_file_is_ignored(tmp_path, content):
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text(content)
    assert LeaderEpochFileCache.load(tmp_path).entries == []


def test_only_the_first_batch_of_an_epoch_is_an_entry(tmp_path):
    cache = cache_of(tmp_path, (3, 10), (3, 11), (3, 40), (4, 41), (4, 50))
    assert cache.entries == [EpochEntry(3, 10), EpochEntry(4, 41)]
    assert cache.latest_epoch == 4


def test_an_entry_breaking_the_order_replaces_those_it_conflicts_with(tmp_path):
    # Kafka's maybeTruncateNonMonotonicEntries: start offsets and epochs increase strictly.
    cache = cache_of(tmp_path, (1, 0), (2, 10), (3, 20))
    cache.assign(2, 15)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 15)]
    cache.assign(4, 15)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(4, 15)]


def test_a_batch_without_an_epoch_changes_nothing(tmp_path):
    cache = cache_of(tmp_path, (1, 0))
    cache.assign(-1, 5)
    assert cache.entries == [EpochEntry(1, 0)]


@pytest.mark.parametrize(("requested", "expected"), [
    (UNDEFINED_EPOCH, UNDEFINED),
    (0, (0, 1200)),        # epoch 0 ended where epoch 2 began
    (1, (0, 1200)),        # never written here: the last epoch before it, and its end
    (2, (2, 4711)),
    (4, (2, 4711)),
    (5, (5, 5000)),        # the latest epoch: the log end offset
    (6, UNDEFINED),        # newer than any known
])
def test_end_offset_for_answers_as_offsets_for_leader_epoch(tmp_path, requested, expected):
    cache = cache_of(tmp_path, (0, 0), (2, 1200), (5, 4711))
    assert cache.end_offset_for(requested, log_end_offset=5000) == expected


def test_an_epoch_older_than_every_entry_ends_where_the_first_entry_starts(tmp_path):
    # The records of older epochs were deleted: the follower truncates to the leader's start.
    cache = cache_of(tmp_path, (3, 100), (4, 200))
    assert cache.end_offset_for(1, log_end_offset=300) == (1, 100)
    assert LeaderEpochFileCache(tmp_path).end_offset_for(1, log_end_offset=0) == UNDEFINED


def test_truncate_from_end_drops_the_epochs_starting_at_or_after_the_end(tmp_path):
    cache = cache_of(tmp_path, (0, 0), (2, 1200), (5, 4711))
    cache.truncate_from_end(4711)
    assert cache.entries == [EpochEntry(0, 0), EpochEntry(2, 1200)]
    cache.truncate_from_end(1201)
    assert LeaderEpochFileCache.load(tmp_path).entries == [EpochEntry(0, 0), EpochEntry(2, 1200)]
    cache.truncate_from_end(0)
    assert LeaderEpochFileCache.load(tmp_path).entries == []


def test_truncate_from_start_moves_the_epoch_holding_the_new_start_up_to_it(tmp_path):
    cache = cache_of(tmp_path, (0, 0), (2, 1200), (5, 4711))
    cache.truncate_from_start(2000)
    assert cache.entries == [EpochEntry(2, 2000), EpochEntry(5, 4711)]
    cache.truncate_from_start(4711)  # exclusive: the epoch starting there stays as it is
    assert LeaderEpochFileCache.load(tmp_path).entries == [EpochEntry(5, 4711)]


def test_clear_forgets_every_epoch(tmp_path):
    cache = cache_of(tmp_path, (0, 0), (2, 1200))
    cache.clear()
    assert LeaderEpochFileCache.load(tmp_path).entries == []


# -- the log keeps the cache -----------------------------------------------------------------


def replicated(base_offset: int, count: int, epoch: int) -> bytearray:
    records = [Record(base_offset + i, 1_000, b"k", b"v") for i in range(count)]
    return bytearray(build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch))


def test_the_leader_records_each_new_epoch_at_its_first_offset(open_log, make_batch):
    log = open_log()
    for epoch in (0, 0, 3, 3, 7):
        log.append_as_leader(make_batch([b"a", b"b"]), leader_epoch=epoch, now_ms=0)
    assert log.leader_epoch_cache.entries == [EpochEntry(0, 0), EpochEntry(3, 4),
                                              EpochEntry(7, 8)]


def test_a_follower_takes_the_epochs_its_batches_carry(open_log):
    log = open_log()
    log.append_as_follower(replicated(0, 3, 1) + replicated(3, 2, 1) + replicated(9, 1, 4),
                           now_ms=0)
    assert log.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(4, 9)]


def test_truncation_delete_records_and_a_fresh_start_move_the_epochs(open_log, make_batch):
    log = open_log(LogConfig(segment_bytes=300))
    for epoch in range(6):  # two records per epoch, offsets 2 * epoch and 2 * epoch + 1
        log.append_as_leader(make_batch([b"a", b"b"]), leader_epoch=epoch, now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    log.truncate_to(8)
    assert [e.epoch for e in log.leader_epoch_cache.entries] == [0, 1, 2, 3]
    log.delete_records_before(3)
    assert log.leader_epoch_cache.entries[:2] == [EpochEntry(1, 3), EpochEntry(2, 4)]
    log.truncate_fully_and_start_at(100)
    assert log.leader_epoch_cache.entries == []


def test_reopening_drops_epochs_the_log_no_longer_holds(open_log, log_dir, make_batch):
    log = open_log()
    log.append_as_leader(make_batch(), leader_epoch=1, now_ms=0)
    log.close()
    # A crash after an epoch's entry was written, before its batch reached the disk.
    (log_dir / LEADER_EPOCH_CHECKPOINT).write_text("0\n2\n1 0\n2 1\n")
    assert open_log().leader_epoch_cache.entries == [EpochEntry(1, 0)]
