"""Logs opened deferred after a clean shutdown: the checkpoints give their offsets, their
files are read on first use or by ``LogManager.load_deferred``, and nothing they hold is
lost or changed by the wait."""

from __future__ import annotations

import pytest

from odradek.log import KafkaStorageError, LogConfig, LogManager, partition_log
from odradek.log.checkpoint import CLEAN_SHUTDOWN_FILE
from odradek.log.leader_epoch import EpochEntry
from odradek.protocol.records import Record, build_batch, iter_batches

PRODUCER_ID = 42


def started(log_dir, clock=lambda: 1_000) -> LogManager:
    manager = LogManager([log_dir], clock=clock)
    manager.load_all(lambda topic: LogConfig())
    return manager


def idempotent_batch(sequence: int) -> bytearray:
    return bytearray(build_batch([Record(0, 1_000, b"k", b"v%d" % sequence)], base_offset=0,
                                 producer_id=PRODUCER_ID, producer_epoch=0,
                                 base_sequence=sequence))


def append(log, batch: bytearray, leader_epoch: int = 3):
    info = log.append_as_leader(batch, leader_epoch=leader_epoch, now_ms=1_000)
    log.update_high_watermark(log.log_end_offset)
    return info


@pytest.fixture
def log_dir(tmp_path):
    return tmp_path / "data"


@pytest.fixture
def loads(monkeypatch):
    """The partition directories whose segments were loaded, in order (cleared by
    shut_down_with, which loads them as it writes them)."""
    loaded = []
    load_segments = partition_log.load_segments

    def spy(directory, *args, **kwargs):
        loaded.append(directory.name)
        return load_segments(directory, *args, **kwargs)

    monkeypatch.setattr(partition_log, "load_segments", spy)
    return loaded


def shut_down_with(log_dir, loads, partitions: int = 3, records: int = 4) -> None:
    """Partitions orders-0.. each holding ``records`` idempotent records, the first one
    deleted by DeleteRecords, then a clean shutdown."""
    manager = started(log_dir)
    for partition in range(partitions):
        log = manager.get_or_create("orders", partition, LogConfig())
        for sequence in range(records):
            append(log, idempotent_batch(sequence))
        log.delete_records_before(1)
    manager.close_all()
    loads.clear()


def test_after_a_clean_shutdown_logs_open_without_reading_their_files(log_dir, loads):
    shut_down_with(log_dir, loads)
    manager = started(log_dir)
    log = manager.get("orders", 1)
    assert (log.loaded, loads) == (False, [])
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset,
            log.recovery_point) == (1, 4, 4, 4)
    assert manager.deferred_count == 3

    records = log.read(1, 1 << 20).records
    assert log.loaded and loads == ["orders-1"]
    assert [batch.base_offset for batch in iter_batches(records)] == [1, 2, 3]
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (1, 4, 4)
    manager.close_all()


def test_a_read_at_the_end_is_answered_from_the_offsets_alone(log_dir, loads):
    shut_down_with(log_dir, loads)
    manager = started(log_dir)
    log = manager.get("orders", 1)
    data = log.read(4, 1 << 20, max_offset=log.high_watermark)
    assert (data.records, data.high_watermark, data.log_end_offset) == (b"", 4, 4)
    assert (log.loaded, loads) == (False, [])  # a caught-up consumer reads no file
    log.take_offline("the disk failed")
    with pytest.raises(KafkaStorageError):
        log.read(-1, 1 << 20)  # offline at startup offsets: refused all the same
    manager.close_all()


def test_an_offline_log_refuses_a_read_at_its_end(log_dir, loads):
    manager = started(log_dir)
    log = manager.get_or_create("orders", 0, LogConfig())
    append(log, idempotent_batch(0))
    log.take_offline("the disk failed")
    with pytest.raises(KafkaStorageError):
        log.read(log.log_end_offset, 1 << 20)
    manager.close_all()


def test_a_deferred_log_keeps_its_producers(log_dir, loads):
    shut_down_with(log_dir, loads)
    manager = started(log_dir)
    log = manager.get("orders", 0)
    retry = append(log, idempotent_batch(3))  # the last batch again: a duplicate
    assert (retry.first_offset, log.log_end_offset) == (3, 4)
    assert append(log, idempotent_batch(4)).first_offset == 4
    manager.close_all()


def test_a_new_leader_epoch_is_assigned_as_the_log_loads(log_dir, loads):
    shut_down_with(log_dir, loads)
    manager = started(log_dir)
    log = manager.get("orders", 0)
    log.assign_epoch_start_offset(5, 4)
    assert not log.loaded
    assert log.leader_epoch_cache.entries == [EpochEntry(3, 1), EpochEntry(5, 4)]
    assert log.loaded
    append(log, idempotent_batch(4), leader_epoch=5)
    manager.close_all()
    manager = started(log_dir)
    assert manager.get("orders", 0).leader_epoch_cache.entries == [
        EpochEntry(3, 1), EpochEntry(5, 4)]
    manager.close_all()


def test_load_deferred_loads_in_slices_and_skips_logs_loaded_on_first_use(log_dir, loads):
    shut_down_with(log_dir, loads, partitions=5)
    manager = started(log_dir)
    manager.get("orders", 1).read(1, 100)
    assert manager.load_deferred(2) == 2
    assert loads == ["orders-1", "orders-0", "orders-2"]
    assert manager.load_deferred(2) == 0
    assert loads == ["orders-1", "orders-0", "orders-2", "orders-3", "orders-4"]
    assert all(manager.get("orders", p).loaded for p in range(5))
    manager.close_all()


def test_a_deferred_log_closed_unloaded_opens_deferred_again(log_dir, loads):
    shut_down_with(log_dir, loads)
    started(log_dir).close_all()
    manager = started(log_dir)
    assert loads == [] and not manager.get("orders", 2).loaded
    assert manager.get("orders", 2).read(3, 100).records
    manager.close_all()


def test_without_a_clean_shutdown_every_log_is_loaded_at_start(log_dir, loads):
    shut_down_with(log_dir, loads)
    (log_dir / CLEAN_SHUTDOWN_FILE).unlink()
    manager = started(log_dir)
    assert sorted(loads) == ["orders-0", "orders-1", "orders-2"]
    assert manager.deferred_count == 0
    manager.close_all()


def test_a_partition_the_checkpoints_do_not_name_is_loaded_at_start(log_dir, loads):
    shut_down_with(log_dir, loads, partitions=1)
    (log_dir / "orders-0").rename(log_dir / "orders-9")  # moved in by hand
    manager = started(log_dir)
    assert loads == ["orders-9"]
    assert manager.get("orders", 9).log_end_offset == 4
    manager.close_all()


def test_a_deferred_log_in_a_failed_dir_goes_offline_without_being_read(log_dir, loads):
    shut_down_with(log_dir, loads, partitions=2)
    manager = started(log_dir)
    manager.log_dir_failed(log_dir, OSError("disk gone"))
    log = manager.get("orders", 0)
    assert log.offline_reason and log.loaded and loads == []
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (-1, -1, -1)
    with pytest.raises(KafkaStorageError):
        log.read(1, 100)
    assert manager.load_deferred(10) == 0 and loads == []
    manager.close_all()


def test_a_deferred_log_whose_files_vanished_takes_its_dir_offline_at_first_use(log_dir, loads):
    shut_down_with(log_dir, loads, partitions=2)
    manager = started(log_dir)
    (log_dir / "orders-0").rename(log_dir / "elsewhere")
    with pytest.raises(KafkaStorageError):
        manager.get("orders", 0).read(1, 100)
    assert log_dir in manager.offline_dirs
    assert manager.get("orders", 1).offline_reason is not None
    manager.close_all()


def test_a_deleted_deferred_log_is_gone(log_dir, loads):
    shut_down_with(log_dir, loads, partitions=2)
    manager = started(log_dir)
    manager.delete_partition("orders", 0)
    assert not (log_dir / "orders-0").exists()
    assert manager.load_deferred(10) == 0
    manager.close_all()
    manager = started(log_dir)
    assert manager.get("orders", 0) is None
    assert manager.get("orders", 1).log_end_offset == 4
    manager.close_all()
