"""LogManager: finding partitions in the log dirs, placing new ones, deleting, checkpoints."""

from __future__ import annotations

import pytest

from odradek.log import LogConfig, LogDirConflictError, LogManager, parse_partition_dir
from odradek.log.checkpoint import (
    CorruptCheckpointError,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)


@pytest.fixture
def log_dirs(tmp_path):
    return [tmp_path / "data-a", tmp_path / "data-b"]


@pytest.fixture
def manager(log_dirs):
    manager = LogManager(log_dirs, clock=lambda: 1_000)
    yield manager
    manager.close_all()


def config_for(topic: str) -> LogConfig:
    return LogConfig()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0", ("orders", 0)),
        ("orders-eu-12", ("orders-eu", 12)),
        ("metrics.cpu-v2-3", ("metrics.cpu-v2", 3)),
        ("orders-0.0a1b2c3d4e5f60718293a4b5c6d7e8f9-delete", None),
        ("orders", None),
        ("orders-x", None),
        ("orders-0-future", None),
        ("lost+found", None),
    ],
)
def test_the_partition_is_what_follows_the_last_dash(name, expected):
    assert parse_partition_dir(name) == expected


def test_load_all_opens_every_partition_directory_in_every_log_dir(log_dirs, make_batch):
    first = LogManager(log_dirs, clock=lambda: 0)
    for topic, partition in [("orders-eu", 0), ("orders-eu", 1), ("metrics.cpu", 7)]:
        log = first.get_or_create(topic, partition, LogConfig())
        log.append(make_batch(), leader_epoch=0, now_ms=0)
    first.close_all()
    (log_dirs[0] / "lost+found").mkdir()
    (log_dirs[0] / "notes.txt").write_text("not a partition")

    manager = LogManager(log_dirs, clock=lambda: 0)
    logs = manager.load_all(config_for)
    assert sorted(logs) == [("metrics.cpu", 7), ("orders-eu", 0), ("orders-eu", 1)]
    assert all(log.log_end_offset == 1 for log in logs.values())
    assert manager.get("orders-eu", 1) is logs[("orders-eu", 1)]
    manager.close_all()


def test_new_partitions_go_to_the_log_dir_holding_the_fewest(manager, log_dirs):
    for partition in range(4):
        manager.get_or_create("orders", partition, LogConfig())
    assert manager.partitions_in_dir(log_dirs[0]) == [("orders", 0), ("orders", 2)]
    assert manager.partitions_in_dir(log_dirs[1]) == [("orders", 1), ("orders", 3)]
    assert (log_dirs[1] / "orders-3" / "00000000000000000000.log").exists()


def test_get_or_create_returns_the_existing_log(manager):
    log = manager.get_or_create("orders", 0, LogConfig())
    assert manager.get_or_create("orders", 0, LogConfig(segment_bytes=1000)) is log
    assert manager.get("orders", 1) is None


def test_dir_size_sums_the_partition_logs_in_the_dir(manager, log_dirs, make_batch):
    batch = make_batch()
    for partition in range(3):  # 0 and 2 in the first dir, 1 in the second
        log = manager.get_or_create("orders", partition, LogConfig())
        if partition != 1:
            log.append(bytearray(batch), leader_epoch=0, now_ms=0)
    assert manager.dir_size(log_dirs[0]) == 2 * len(batch)
    assert manager.dir_size(log_dirs[1]) == 0


def test_delete_partition_removes_its_directory(manager, log_dirs):
    manager.get_or_create("orders", 0, LogConfig())
    manager.delete_partition("orders", 0)
    assert manager.get("orders", 0) is None
    assert list(log_dirs[0].iterdir()) == []


def test_a_delete_interrupted_by_a_stop_is_finished_at_load(log_dirs):
    doomed = log_dirs[0] / "orders-0.0a1b2c3d4e5f60718293a4b5c6d7e8f9-delete"
    doomed.mkdir(parents=True)
    (doomed / "00000000000000000000.log").write_bytes(b"")
    manager = LogManager(log_dirs, clock=lambda: 0)
    assert manager.load_all(config_for) == {}
    assert not doomed.exists()


def test_the_same_partition_in_two_log_dirs_refuses_to_load(log_dirs):
    for log_dir in log_dirs:
        (log_dir / "orders-0").mkdir(parents=True)
    manager = LogManager(log_dirs, clock=lambda: 0)
    with pytest.raises(LogDirConflictError):
        manager.load_all(config_for)
    manager.close_all()


def test_the_log_start_offset_survives_a_restart(log_dirs, make_batch):
    manager = LogManager(log_dirs, clock=lambda: 0)
    log = manager.get_or_create("orders", 0, LogConfig())
    for _ in range(5):
        log.append(make_batch(), leader_epoch=0, now_ms=0)
    log.high_watermark = log.log_end_offset
    log.delete_records_before(3)
    manager.close_all()

    restarted = LogManager(log_dirs, clock=lambda: 0)
    assert restarted.load_all(config_for)[("orders", 0)].log_start_offset == 3
    restarted.close_all()


def test_checkpoint_files_use_kafkas_text_format(tmp_path):
    path = tmp_path / "log-start-offset-checkpoint"
    write_offsets_checkpoint(path, {("orders", 0): 1200, ("orders.dlq", 3): 0})
    assert path.read_text() == "0\n2\norders 0 1200\norders.dlq 3 0\n"
    assert read_offsets_checkpoint(path) == {("orders", 0): 1200, ("orders.dlq", 3): 0}
    assert read_offsets_checkpoint(tmp_path / "missing") == {}
    path.write_text("0\n3\norders 0 1200\n")
    with pytest.raises(CorruptCheckpointError):
        read_offsets_checkpoint(path)
