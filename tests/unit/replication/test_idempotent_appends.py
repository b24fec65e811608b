"""The leader's side of KIP-98: `Partition` checks a producer's batch before the append and
records it after, snapshots the producer state when a segment rolls and when it closes, and
`ReplicaManager` forgets idle producers with the clock it is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.log import LogConfig, LogManager
from odradek.log.producer_state import OutOfOrderSequenceError, decode_snapshot, snapshot_path
from odradek.protocol.records import NO_TIMESTAMP, Record, build_batch
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.replica_manager import ReplicaManager

PRODUCER_ID = 7
NOW_MS = 1_700_000_000_000
EXPIRATION_MS = 60_000
CHECK_INTERVAL_MS = 10_000
TOPIC_PARTITION = TopicPartition("orders", 0)


class Clock:
    def __init__(self) -> None:
        self.now_ms = NOW_MS

    def __call__(self) -> int:
        return self.now_ms


def batch(first_seq: int, count: int = 1, *, producer_id: int = PRODUCER_ID,
          timestamp: int = NOW_MS) -> bytearray:
    records = [Record(i, timestamp, None, b"v" * 50) for i in range(count)]
    return bytearray(build_batch(records, base_offset=0, producer_id=producer_id,
                                 producer_epoch=0, base_sequence=first_seq))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def replica_manager(tmp_path: Path, clock: Clock):
    configs = {"producer.id.expiration.ms": EXPIRATION_MS,
               "producer.id.expiration.check.interval.ms": CHECK_INTERVAL_MS}
    log_manager = LogManager([tmp_path], clock=clock)
    manager = ReplicaManager(0, log_manager, clock, configs.__getitem__)
    yield manager
    manager.shutdown()
    log_manager.close_all()


def lead(replica_manager: ReplicaManager, log_config: LogConfig = LogConfig()):
    return replica_manager.make_leader(TOPIC_PARTITION, leader_epoch=0, isr=(0,),
                                       log_config=log_config, topic_config={})


def test_a_retry_is_answered_with_the_original_offsets_and_not_appended(replica_manager):
    partition = lead(replica_manager)
    first = replica_manager.append(partition, batch(0, 3))
    replica_manager.append(partition, batch(3))

    retry = replica_manager.append(partition, batch(0, 3))

    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert retry.log_append_time == NO_TIMESTAMP
    assert partition.log_end_offset == 4


def test_on_log_append_time_topics_a_retry_gets_the_original_append_time(replica_manager,
                                                                         clock):
    partition = lead(replica_manager, LogConfig(message_timestamp_type="LogAppendTime"))
    first = replica_manager.append(partition, batch(0))
    clock.now_ms += 5_000

    retry = replica_manager.append(partition, batch(0))

    assert retry.log_append_time == first.log_append_time == NOW_MS


def test_a_refused_batch_leaves_the_log_as_it_was(replica_manager):
    partition = lead(replica_manager)
    replica_manager.append(partition, batch(0))
    with pytest.raises(OutOfOrderSequenceError):
        replica_manager.append(partition, batch(2))
    assert partition.log_end_offset == 1


def test_a_roll_snapshots_the_state_as_of_the_new_segment(replica_manager):
    partition = lead(replica_manager, LogConfig(segment_bytes=300))
    for seq in range(6):
        replica_manager.append(partition, batch(seq))
    base_offsets = [segment.base_offset for segment in partition.log.segments]
    assert len(base_offsets) > 2

    # Each snapshot holds what came before its offset: the batch at the offset is not in it.
    snapshots = partition.producer_state.snapshot_offsets()
    assert snapshots == base_offsets[1:][-2:]
    [entry] = decode_snapshot(snapshot_path(partition.log.directory, snapshots[-1]).read_bytes())
    assert entry.batches[-1].last_offset == snapshots[-1] - 1


def test_closing_a_partition_snapshots_the_state_at_the_log_end(replica_manager):
    partition = lead(replica_manager)
    replica_manager.append(partition, batch(0, 2))
    replica_manager.remove_partition(TOPIC_PARTITION, delete=False)
    assert snapshot_path(partition.log.directory, 2).exists()


def test_idle_producers_are_forgotten_at_the_first_append_after_the_check_interval(
        replica_manager, clock):
    partition = lead(replica_manager)
    replica_manager.append(partition, batch(0, producer_id=PRODUCER_ID))
    clock.now_ms += EXPIRATION_MS
    replica_manager.append(partition, batch(0, producer_id=PRODUCER_ID + 1,
                                            timestamp=clock.now_ms))
    assert partition.producer_state.entry(PRODUCER_ID) is None
    assert partition.producer_state.entry(PRODUCER_ID + 1) is not None


def test_producers_are_not_checked_for_expiry_more_often_than_the_interval(
        replica_manager, clock):
    partition = lead(replica_manager)
    replica_manager.append(partition, batch(0, producer_id=PRODUCER_ID + 1))  # checks now
    clock.now_ms += CHECK_INTERVAL_MS - 1
    replica_manager.append(partition, batch(0, timestamp=NOW_MS - EXPIRATION_MS))
    assert partition.producer_state.entry(PRODUCER_ID) is not None  # expired, not yet removed
