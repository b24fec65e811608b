"""LogManager: finding partitions in the log dirs, placing new ones, deleting, checkpoints,
the clean shutdown marker, failed log dirs (JBOD), delayed file deletion, flush scheduling."""

from __future__ import annotations

import os

import pytest

from odradek.log import (
    KafkaStorageError,
    LogConfig,
    LogDirConflictError,
    LogManager,
    parse_partition_dir,
)
from odradek.log.checkpoint import (
    CorruptCheckpointError,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from odradek.protocol.records import Record, build_batch
from odradek.protocol.topic_partition import TopicPartition


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def log_dirs(tmp_path):
    return [tmp_path / "data-a", tmp_path / "data-b"]


@pytest.fixture
def clock():
    return Clock()


def config_for(topic: str) -> LogConfig:
    return LogConfig()


def started(log_dirs, clock=lambda: 0, hosted=(), **kwargs) -> LogManager:
    manager = LogManager(log_dirs, clock=clock, **kwargs)
    manager.load_all(config_for, hosted)
    return manager


@pytest.fixture
def manager(log_dirs, clock):
    manager = started(log_dirs, clock)
    yield manager
    manager.close_all()


def append(log, make_batch, count: int = 1) -> None:
    for _ in range(count):
        log.append_as_leader(make_batch([b"v" * 50]), leader_epoch=0, now_ms=0)
    log.update_high_watermark(log.log_end_offset)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0", TopicPartition("orders", 0)),
        ("orders-eu-12", TopicPartition("orders-eu", 12)),
        ("metrics.cpu-v2-3", TopicPartition("metrics.cpu-v2", 3)),
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
    first = started(log_dirs)
    for topic, partition in [("orders-eu", 0), ("orders-eu", 1), ("metrics.cpu", 7)]:
        append(first.get_or_create(topic, partition, LogConfig()), make_batch)
    first.close_all()
    (log_dirs[0] / "lost+found").mkdir()
    (log_dirs[0] / "notes.txt").write_text("not a partition")

    manager = LogManager(log_dirs, clock=lambda: 0)
    logs = manager.load_all(config_for)
    assert sorted(logs) == [
        TopicPartition("metrics.cpu", 7), TopicPartition("orders-eu", 0),
        TopicPartition("orders-eu", 1),
    ]
    assert all(log.log_end_offset == 1 for log in logs.values())
    assert manager.get("orders-eu", 1) is logs[TopicPartition("orders-eu", 1)]
    manager.close_all()


def test_new_partitions_go_to_the_log_dir_holding_the_fewest(manager, log_dirs):
    for partition in range(4):
        manager.get_or_create("orders", partition, LogConfig())
    assert manager.partitions_in_dir(log_dirs[0]) == [
        TopicPartition("orders", 0), TopicPartition("orders", 2)]
    assert manager.partitions_in_dir(log_dirs[1]) == [
        TopicPartition("orders", 1), TopicPartition("orders", 3)]
    assert (log_dirs[1] / "orders-3" / "00000000000000000000.log").exists()


def test_placement_counts_the_partitions_found_at_load(log_dirs):
    first = started(log_dirs)
    for partition in range(3):  # 0 and 2 in the first dir, 1 in the second
        first.get_or_create("orders", partition, LogConfig())
    first.close_all()
    manager = started(log_dirs)
    manager.get_or_create("orders", 3, LogConfig())
    assert manager.partitions_in_dir(log_dirs[1]) == [
        TopicPartition("orders", 1), TopicPartition("orders", 3)]
    manager.close_all()


def test_get_or_create_returns_the_existing_log(manager):
    log = manager.get_or_create("orders", 0, LogConfig())
    assert manager.get_or_create("orders", 0, LogConfig(segment_bytes=1000)) is log
    assert manager.get("orders", 1) is None


def test_dir_size_sums_the_partition_logs_in_the_dir(manager, log_dirs, make_batch):
    batch = make_batch()
    for partition in range(3):  # 0 and 2 in the first dir, 1 in the second
        log = manager.get_or_create("orders", partition, LogConfig())
        if partition != 1:
            log.append_as_leader(bytearray(batch), leader_epoch=0, now_ms=0)
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
    manager = started(log_dirs)
    log = manager.get_or_create("orders", 0, LogConfig())
    append(log, make_batch, 5)
    log.delete_records_before(3)
    manager.close_all()

    restarted = LogManager(log_dirs, clock=lambda: 0)
    assert restarted.load_all(config_for)[TopicPartition("orders", 0)].log_start_offset == 3
    restarted.close_all()


def test_checkpoint_files_use_kafkas_text_format(tmp_path):
    path = tmp_path / "log-start-offset-checkpoint"
    entries = {TopicPartition("orders", 0): 1200, TopicPartition("orders.dlq", 3): 0}
    write_offsets_checkpoint(path, entries)
    assert path.read_text() == "0\n2\norders 0 1200\norders.dlq 3 0\n"
    assert read_offsets_checkpoint(path) == entries
    assert read_offsets_checkpoint(tmp_path / "missing") == {}
    path.write_text("0\n3\norders 0 1200\n")
    with pytest.raises(CorruptCheckpointError):
        read_offsets_checkpoint(path)


# -- high watermarks ------------------------------------------------------------------------

def test_the_high_watermarks_survive_a_restart_in_replication_offset_checkpoint(
    log_dirs, make_batch
):
    manager = started(log_dirs)
    append(manager.get_or_create("orders", 0, LogConfig()), make_batch, 5)
    manager.get("orders", 0).update_high_watermark(3)  # offsets 3 and 4 not yet replicated
    append(manager.get_or_create("orders", 1, LogConfig()), make_batch, 2)
    manager.close_all()
    assert (log_dirs[0] / "replication-offset-checkpoint").read_text() == "0\n1\norders 0 3\n"

    restarted = LogManager(log_dirs, clock=lambda: 0)
    logs = restarted.load_all(config_for)
    assert logs[TopicPartition("orders", 0)].high_watermark == 3
    assert logs[TopicPartition("orders", 1)].high_watermark == 2
    restarted.close_all()


def test_a_log_without_a_checkpointed_high_watermark_opens_at_its_log_start_offset(
    log_dirs, make_batch
):
    manager = started(log_dirs)
    log = manager.get_or_create("orders", 0, LogConfig())
    append(log, make_batch, 5)
    log.delete_records_before(2)
    manager.write_checkpoints(manager.checkpoint_snapshot())
    manager.files.close_all()  # a crash before the first high watermark checkpoint

    restarted = started(log_dirs)
    assert restarted.get("orders", 0).high_watermark == 2
    restarted.close_all()


def test_high_watermark_checkpoints_are_taken_on_the_loop_and_written_elsewhere(
    log_dirs, make_batch
):
    manager = started(log_dirs)
    append(manager.get_or_create("orders", 0, LogConfig()), make_batch, 4)
    snapshot = manager.high_watermark_checkpoint_snapshot()
    append(manager.get("orders", 0), make_batch)  # after the snapshot: not in this write
    assert manager.write_high_watermark_checkpoints(snapshot) == []
    assert (log_dirs[0] / "replication-offset-checkpoint").read_text() == "0\n1\norders 0 4\n"
    assert (log_dirs[1] / "replication-offset-checkpoint").read_text() == "0\n0\n"
    manager.close_all()


def test_logs_open_with_their_producers_idle_past_the_expiration_forgotten(
    log_dirs, make_batch
):
    manager = started(log_dirs)
    batch = bytearray(build_batch([Record(0, 1_000, b"k", b"v")], base_offset=0,
                                  producer_id=7, producer_epoch=0, base_sequence=0))
    manager.get_or_create("orders", 0, LogConfig()).append_as_leader(batch, leader_epoch=0,
                                                                     now_ms=1_000)
    manager.close_all()
    expiration_ms = [10_000]
    restarted = started(log_dirs, clock=lambda: 10_999,
                        producer_id_expiration_ms=lambda: expiration_ms[0])
    assert restarted.get("orders", 0).producer_state.entry(7) is not None
    restarted.close_all()
    expiration_ms[0] = 9_999
    restarted = started(log_dirs, clock=lambda: 10_999,
                        producer_id_expiration_ms=lambda: expiration_ms[0])
    assert restarted.get("orders", 0).producer_state.entry(7) is None
    restarted.close_all()


# -- clean shutdown and recovery points ----------------------------------------------------

def test_a_clean_shutdown_leaves_the_marker_and_the_recovery_points_in_each_log_dir(
    log_dirs, make_batch
):
    manager = started(log_dirs)
    append(manager.get_or_create("orders", 0, LogConfig()), make_batch, 3)
    manager.get_or_create("orders", 1, LogConfig())
    manager.close_all()
    assert (log_dirs[0] / ".kafka_cleanshutdown").exists()
    assert (log_dirs[1] / ".kafka_cleanshutdown").exists()
    assert (log_dirs[0] / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 0 3\n"
    assert (log_dirs[1] / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 1 0\n"


def test_loading_removes_the_marker_so_a_crash_after_the_start_is_unclean(log_dirs):
    started(log_dirs).close_all()
    manager = started(log_dirs)
    assert not (log_dirs[0] / ".kafka_cleanshutdown").exists()
    assert not (log_dirs[1] / ".kafka_cleanshutdown").exists()
    manager.close_all()


def _spy_recoveries(monkeypatch) -> list[tuple[str, int]]:
    from odradek.log.segment import LogSegment

    recovered: list[tuple[str, int]] = []
    original = LogSegment.recover

    def recover(segment):
        recovered.append((segment.directory.name, segment.base_offset))
        return original(segment)

    monkeypatch.setattr(LogSegment, "recover", recover)
    return recovered


def test_after_a_clean_shutdown_nothing_is_recovered(log_dirs, make_batch, monkeypatch):
    manager = started(log_dirs)
    append(manager.get_or_create("orders", 0, LogConfig(segment_bytes=300)), make_batch, 10)
    manager.close_all()
    recovered = _spy_recoveries(monkeypatch)
    manager = LogManager(log_dirs, clock=lambda: 0)
    logs = manager.load_all(lambda topic: LogConfig(segment_bytes=300))
    assert recovered == []
    assert logs[TopicPartition("orders", 0)].log_end_offset == 10
    assert logs[TopicPartition("orders", 0)].recovery_point == 10
    manager.close_all()


def test_after_a_crash_only_segments_at_or_above_the_recovery_point_are_recovered(
    log_dirs, make_batch, monkeypatch
):
    config = LogConfig(segment_bytes=300)  # two 121-byte batches per segment
    manager = started(log_dirs)
    log = manager.get_or_create("orders", 0, config)
    append(log, make_batch, 5)
    log.flush_to(log.log_end_offset)  # offsets 0..4 are on disk
    manager.write_checkpoints(manager.checkpoint_snapshot())
    append(log, make_batch, 5)  # offsets 5..9: in the page cache only
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6, 8]
    manager.files.close_all()  # the process dies: nothing closed, nothing written

    recovered = _spy_recoveries(monkeypatch)
    manager = LogManager(log_dirs, clock=lambda: 0)
    logs = manager.load_all(lambda topic: config)
    # Recovery point 5 lies in segment 4: it and everything after are recovered.
    assert recovered == [("orders-0", 4), ("orders-0", 6), ("orders-0", 8)]
    assert logs[TopicPartition("orders", 0)].log_end_offset == 10
    assert logs[TopicPartition("orders", 0)].recovery_point == 5
    manager.close_all()


def test_a_crash_after_a_clean_restart_is_recovered_fully(log_dirs, make_batch, caplog):
    config = LogConfig(segment_bytes=300)
    manager = started(log_dirs)
    append(manager.get_or_create("orders", 0, config), make_batch, 5)
    manager.close_all()
    manager = LogManager(log_dirs, clock=lambda: 0)
    log = manager.load_all(lambda topic: config)[TopicPartition("orders", 0)]
    append(log, make_batch, 2)  # offsets 5 and 6: in the page cache only
    path = log.segments[-1].log_path
    manager.files.close_all()  # the process dies: nothing closed, nothing written
    with open(path, "ab") as f:
        f.write(make_batch([b"never acknowledged"])[:40])

    manager = LogManager(log_dirs, clock=lambda: 0)
    recovered = manager.load_all(lambda topic: config)[TopicPartition("orders", 0)]
    assert "cut 40 bytes" in caplog.text
    assert recovered.log_end_offset == 7
    assert recovered.read(5, 10_000).records == log.read(5, 10_000).records
    manager.close_all()


def test_loading_asks_for_each_topics_config_once(log_dirs):
    manager = started(log_dirs)
    for partition in range(4):
        manager.get_or_create("orders", partition, LogConfig())
    manager.get_or_create("payments", 0, LogConfig())
    manager.close_all()
    asked = []

    def config_of(topic):
        asked.append(topic)
        return LogConfig()

    restarted = LogManager(log_dirs, clock=lambda: 0)
    assert len(restarted.load_all(config_of)) == 5
    assert sorted(asked) == ["orders", "payments"]
    restarted.close_all()


# -- failed log dirs (JBOD) ----------------------------------------------------------------

def test_a_failed_log_dir_takes_its_partitions_offline_and_the_other_dir_keeps_serving(
    manager, log_dirs, make_batch, caplog
):
    healthy, failing, _, neighbour = (
        manager.get_or_create("orders", p, LogConfig(segment_bytes=300)) for p in range(4)
    )
    assert manager.partitions_in_dir(log_dirs[1]) == [
        TopicPartition("orders", 1), TopicPartition("orders", 3)]
    append(failing, make_batch, 2)  # the segment is full
    os.rename(log_dirs[1], log_dirs[1].with_name("data-b-pulled"))  # the disk is gone

    with pytest.raises(KafkaStorageError):
        append(failing, make_batch)  # the roll must create a file in the vanished dir
    assert manager.offline_dirs.keys() == {log_dirs[1]}
    assert "orders-1" in caplog.text and "KAFKA_STORAGE_ERROR" in caplog.text
    with pytest.raises(KafkaStorageError):
        neighbour.read(0, 1000)  # its descriptor was still open: offline all the same
    append(healthy, make_batch, 3)
    assert healthy.read(0, 10_000).records
    # New partitions go to the dirs still online.
    manager.get_or_create("orders", 4, LogConfig())
    assert manager.partitions_in_dir(log_dirs[0])[-1] == TopicPartition("orders", 4)


def test_a_flush_failing_on_another_thread_takes_the_dir_offline_on_the_owners(
    log_dirs, make_batch
):
    handed_over = []
    manager = started(log_dirs, call_soon_threadsafe=handed_over.append)
    log = manager.get_or_create("orders", 0, LogConfig())
    append(log, make_batch)
    os.rename(log_dirs[0], log_dirs[0].with_name("data-a-pulled"))
    with pytest.raises(KafkaStorageError):
        log.flush_to(log.log_end_offset)
    assert manager.offline_dirs == {}  # nothing done on the flush thread...
    [callback] = handed_over
    callback()  # ...until the owner runs what was handed over
    assert log_dirs[0] in manager.offline_dirs
    with pytest.raises(KafkaStorageError):
        log.read(0, 100)


def test_a_missing_log_dir_that_held_hosted_partitions_stays_offline(log_dirs, make_batch):
    manager = started(log_dirs)
    append(manager.get_or_create("orders", 0, LogConfig()), make_batch, 3)
    append(manager.get_or_create("orders", 1, LogConfig()), make_batch, 3)
    manager.close_all()
    os.rename(log_dirs[1], log_dirs[1].with_name("data-b-pulled"))

    manager = started(log_dirs, hosted=[TopicPartition("orders", 0), TopicPartition("orders", 1)])
    assert manager.offline_dirs.keys() == {log_dirs[1]}
    assert not log_dirs[1].exists()  # not recreated empty
    assert manager.get("orders", 0).log_end_offset == 3
    stranded = manager.get_or_create("orders", 1, LogConfig())
    assert stranded.offline_reason is not None
    assert stranded.log_end_offset == -1
    with pytest.raises(KafkaStorageError):
        stranded.append_as_leader(make_batch(), leader_epoch=0, now_ms=0)
    assert not (log_dirs[0] / "orders-1").exists()  # nor recreated empty elsewhere
    manager.close_all()
    assert not (log_dirs[1] / ".kafka_cleanshutdown").exists()


def test_a_missing_log_dir_holding_nothing_hosted_is_created(log_dirs):
    started(log_dirs[:1]).close_all()
    manager = started(log_dirs, hosted=[])
    assert log_dirs[1].is_dir() and manager.offline_dirs == {}
    manager.close_all()


def test_a_log_dir_that_is_not_a_directory_is_offline_at_startup(log_dirs, make_batch):
    log_dirs[1].parent.mkdir(parents=True, exist_ok=True)
    log_dirs[1].write_text("a file where a disk should be mounted")
    manager = started(log_dirs)
    assert manager.offline_dirs.keys() == {log_dirs[1]}
    append(manager.get_or_create("orders", 0, LogConfig()), make_batch)
    assert manager.partitions_in_dir(log_dirs[0]) == [TopicPartition("orders", 0)]
    manager.close_all()


# -- file deletion and flush scheduling ------------------------------------------------------

def test_deleted_segments_are_renamed_and_removed_after_file_delete_delay_ms(
    log_dirs, clock, make_batch
):
    manager = started(log_dirs, clock)
    config = LogConfig(segment_bytes=300, retention_bytes=300, file_delete_delay_ms=60_000)
    log = manager.get_or_create("orders", 0, config)
    append(log, make_batch, 7)
    assert manager.delete_old_segments() == 2
    directory = log_dirs[0] / "orders-0"
    assert sorted(p.name for p in directory.glob("*.deleted")) == [
        "00000000000000000000.index.deleted", "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted", "00000000000000000002.index.deleted",
        "00000000000000000002.log.deleted", "00000000000000000002.timeindex.deleted",
    ]
    assert log.log_start_offset == 4
    clock.now_ms += 59_999
    assert manager.delete_due_files() == 0
    clock.now_ms += 1
    assert manager.delete_due_files() == 2
    assert list(directory.glob("*.deleted")) == []
    manager.close_all()


def test_deleted_files_left_by_a_crash_are_removed_at_load(log_dirs, clock, make_batch):
    manager = started(log_dirs, clock)
    log = manager.get_or_create("orders", 0, LogConfig(segment_bytes=300, retention_bytes=300))
    append(log, make_batch, 7)
    manager.delete_old_segments()
    manager.files.close_all()  # killed before the delay was over
    started(log_dirs, clock).close_all()
    assert list((log_dirs[0] / "orders-0").glob("*.deleted")) == []


def test_logs_are_due_for_a_flush_after_flush_ms_flush_messages_or_a_roll(
    log_dirs, clock, make_batch
):
    manager = started(log_dirs, clock)
    timed = manager.get_or_create("timed", 0, LogConfig(flush_ms=5_000))
    rolled = manager.get_or_create("rolled", 0, LogConfig(segment_bytes=300))
    counted = manager.get_or_create("counted", 0, LogConfig(flush_messages=2))
    idle = manager.get_or_create("idle", 0, LogConfig(flush_ms=0))
    append(timed, make_batch)
    append(rolled, make_batch, 3)  # a second segment starts at offset 2
    append(counted, make_batch, 2)  # as an acks=0 produce leaves it: nobody flushed
    assert manager.logs_to_flush() == [(rolled, 2), (counted, 2)]
    clock.now_ms += 5_000
    due = manager.logs_to_flush()
    assert due == [(timed, 1), (rolled, 2), (counted, 2)]
    for log, offset in due:
        log.flush_to(offset)
    assert manager.logs_to_flush() == []  # flush.ms counts again from now
    assert [log.recovery_point for log in (timed, rolled, counted, idle)] == [1, 3, 2, 0]
    manager.close_all()


def test_segment_descriptors_stay_within_the_bound_however_many_partitions(log_dirs, make_batch):
    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_descriptors()
    manager = started(log_dirs, max_open_files=10)
    for partition in range(50):
        append(manager.get_or_create("orders", partition, LogConfig()), make_batch)
    assert len(manager.files) == 10
    assert open_descriptors() - before <= 10
    assert all(manager.get("orders", p).read(0, 1000).records for p in range(50))
    manager.close_all()
    assert open_descriptors() == before
