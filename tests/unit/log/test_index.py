"""OffsetIndex and TimeIndex: relative offsets on disk, floor lookups, truncation, reload,
and files written only when asked (persist), holding no descriptor."""

from __future__ import annotations

import pytest

from odradek.log.index import (
    CorruptIndexError,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)

MAX_INDEX_SIZE = 10 * 1024 * 1024


@pytest.fixture
def offset_index(tmp_path):
    return OffsetIndex(tmp_path / "00000000000000000050.index", 50, MAX_INDEX_SIZE)


@pytest.fixture
def time_index(tmp_path):
    return TimeIndex(tmp_path / "00000000000000000050.timeindex", 50, MAX_INDEX_SIZE)


def test_offsets_are_stored_relative_to_the_base_offset(offset_index, time_index):
    offset_index.append(55, 4200)
    time_index.maybe_append(1_700_000_000_000, 55)
    assert offset_index.persist() and time_index.persist()
    assert offset_index.path.read_bytes() == bytes.fromhex("00000005 00001068")
    assert time_index.path.read_bytes() == bytes.fromhex("0000018bcfe56800 00000005")


def test_offset_lookup_finds_the_last_entry_at_or_before_the_target(offset_index):
    for offset, position in [(52, 100), (60, 900), (71, 2000)]:
        offset_index.append(offset, position)
    assert offset_index.lookup(50) == OffsetPosition(50, 0)  # before any entry: the start
    assert offset_index.lookup(52) == OffsetPosition(52, 100)
    assert offset_index.lookup(59) == OffsetPosition(52, 100)
    assert offset_index.lookup(70) == OffsetPosition(60, 900)
    assert offset_index.lookup(10**6) == OffsetPosition(71, 2000)


def test_time_lookup_finds_the_last_entry_at_or_before_the_target(time_index):
    time_index.maybe_append(1_000, 52)
    time_index.maybe_append(2_000, 60)
    assert time_index.lookup(999) == TimestampOffset(-1, 50)
    assert time_index.lookup(1_000) == TimestampOffset(1_000, 52)
    assert time_index.lookup(1_999) == TimestampOffset(1_000, 52)
    assert time_index.lookup(5_000) == TimestampOffset(2_000, 60)


def test_the_time_index_only_grows_with_the_max_timestamp(time_index):
    time_index.maybe_append(1_000, 52)
    time_index.maybe_append(1_000, 55)
    time_index.maybe_append(900, 57)
    assert len(time_index) == 1
    assert time_index.last_entry == TimestampOffset(1_000, 52)


def test_truncate_to_removes_entries_at_and_after_the_offset(offset_index, time_index):
    for offset, position in [(52, 100), (60, 900), (71, 2000)]:
        offset_index.append(offset, position)
        time_index.maybe_append(offset * 10, offset)
    offset_index.persist()
    time_index.persist()
    offset_index.truncate_to(60)
    time_index.truncate_to(61)
    assert offset_index.last_entry == OffsetPosition(52, 100)
    assert time_index.last_entry == TimestampOffset(600, 60)
    assert offset_index.persist() and time_index.persist()
    assert len(offset_index.path.read_bytes()) == 8
    assert len(time_index.path.read_bytes()) == 24


def test_entries_reach_the_file_at_persist_and_only_those_it_lacks(offset_index):
    offset_index.append(52, 100)
    assert not offset_index.path.exists()  # in memory only, no descriptor held
    assert offset_index.persist()
    assert not offset_index.persist()  # nothing new
    offset_index.append(60, 900)
    assert len(offset_index.path.read_bytes()) == 8
    assert offset_index.persist()
    assert offset_index.path.read_bytes() == bytes.fromhex("00000002 00000064 0000000a 00000384")


def test_a_new_index_without_entries_persists_as_an_empty_file(offset_index):
    assert offset_index.persist()
    assert offset_index.path.read_bytes() == b""


def test_an_index_reloads_its_entries_from_its_file(tmp_path, offset_index, time_index):
    offset_index.append(52, 100)
    offset_index.append(60, 900)
    time_index.maybe_append(1_000, 52)
    offset_index.persist()
    time_index.persist()
    reloaded = OffsetIndex(offset_index.path, 50, MAX_INDEX_SIZE)
    reloaded_time = TimeIndex(time_index.path, 50, MAX_INDEX_SIZE)
    assert reloaded.lookup(65) == OffsetPosition(60, 900)
    assert reloaded_time.lookup(1_500) == TimestampOffset(1_000, 52)


def test_an_index_file_of_impossible_length_is_corrupt(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(bytes(11))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, MAX_INDEX_SIZE)


def test_an_index_is_full_at_segment_index_bytes(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 20)
    index.append(1, 10)
    assert not index.is_full
    index.append(2, 20)
    assert index.is_full  # 20 bytes hold two 8-byte entries


def test_a_read_may_skip_to_the_last_indexed_batch_below_both_limits(offset_index):
    for offset, position in [(52, 100), (60, 900), (71, 2000)]:
        offset_index.append(offset, position)
    assert offset_index.last_batch_start_within(0, 1_000, max_offset=100) == 900
    assert offset_index.last_batch_start_within(0, 5_000, max_offset=71) == 900
    assert offset_index.last_batch_start_within(950, 5_000, max_offset=100) == 2000
    assert offset_index.last_batch_start_within(950, 1_500, max_offset=100) == 950


def test_opening_an_index_reads_its_last_entry_and_the_others_only_when_first_used(
    offset_index, time_index, monkeypatch
):
    for offset, position in [(52, 100), (60, 900), (71, 2000)]:
        offset_index.append(offset, position)
        time_index.maybe_append(offset * 10, offset)
    offset_index.persist()
    time_index.persist()

    def no_whole_file_read(fd, size):
        raise AssertionError("the whole index was read at open")

    monkeypatch.setattr("odradek.log.index.os.read", no_whole_file_read)
    reopened = OffsetIndex(offset_index.path, 50, MAX_INDEX_SIZE)
    reopened_time = TimeIndex(time_index.path, 50, MAX_INDEX_SIZE)
    assert reopened.last_entry == OffsetPosition(71, 2000)
    assert reopened_time.last_entry == TimestampOffset(710, 71)
    assert len(reopened) == 3 and not reopened.persist()  # nothing to write back
    monkeypatch.undo()
    assert reopened.lookup(65) == OffsetPosition(60, 900)
    assert reopened_time.lookup(650) == TimestampOffset(600, 60)


def test_an_index_cleared_before_first_use_empties_its_file(offset_index):
    offset_index.append(52, 100)
    offset_index.persist()
    reopened = OffsetIndex(offset_index.path, 50, MAX_INDEX_SIZE)
    reopened.clear()
    assert reopened.last_entry is None
    assert reopened.persist()
    assert offset_index.path.read_bytes() == b""
