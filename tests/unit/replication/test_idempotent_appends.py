"""The leader's side of KIP-98 through ``ReplicaManager.append_records``: the log checks a
producer's batch before the append and records it after, snapshots the producer state when
a segment rolls and when it closes, and the replica manager forgets idle producers with the
clock it is given."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from replication_harness import (
    CHECK_INTERVAL_MS,
    EXPIRATION_MS,
    LOCAL,
    NOW_MS,
    ORDERS,
    append,
    apply,
)
from odradek.log.producer_state import decode_snapshot, snapshot_path
from odradek.metadata.model import PartitionState
from odradek.protocol.records import NO_TIMESTAMP, Record, build_batch
from odradek.replication.delayed_produce import ProducePartitionResult

PRODUCER_ID = 7


def batch(first_seq: int, count: int = 1, *, producer_id: int = PRODUCER_ID,
          timestamp: int = NOW_MS) -> bytearray:
    records = [Record(i, timestamp, None, b"v" * 50) for i in range(count)]
    return bytearray(build_batch(records, base_offset=0, producer_id=producer_id,
                                 producer_epoch=0, base_sequence=first_seq))


@pytest.fixture
def lead(replica_manager, broker_config):
    def lead(**overrides: str):
        apply(replica_manager, broker_config, PartitionState(0, LOCAL, 0, (LOCAL,), (LOCAL,)),
              **overrides)
        return replica_manager.get_partition(ORDERS)
    return lead


def produce(replica_manager, records: bytearray) -> ProducePartitionResult:
    [result] = append(replica_manager, records)
    return result


def test_a_retry_is_answered_with_the_original_offsets_and_not_appended(replica_manager, lead):
    partition = lead()
    first = produce(replica_manager, batch(0, 3))
    produce(replica_manager, batch(3))

    retry = produce(replica_manager, batch(0, 3))

    assert retry.error is ErrorCode.none and retry.base_offset == first.base_offset
    assert retry.log_append_time == NO_TIMESTAMP
    assert partition.log_end_offset == 4


def test_on_log_append_time_topics_a_retry_gets_the_original_append_time(replica_manager, lead,
                                                                         clock):
    lead(**{"message.timestamp.type": "LogAppendTime"})
    first = produce(replica_manager, batch(0))
    clock.now_ms += 5_000

    retry = produce(replica_manager, batch(0))

    assert retry.log_append_time == first.log_append_time == NOW_MS


def test_a_refused_batch_leaves_the_log_as_it_was(replica_manager, lead):
    partition = lead()
    produce(replica_manager, batch(0))
    assert produce(replica_manager, batch(2)).error is ErrorCode.out_of_order_sequence_number
    assert partition.log_end_offset == 1


def test_a_roll_snapshots_the_state_as_of_the_new_segment(replica_manager, lead):
    partition = lead(**{"segment.bytes": "300"})
    for seq in range(6):
        produce(replica_manager, batch(seq))
    base_offsets = [segment.base_offset for segment in partition.log.segments]
    assert len(base_offsets) > 2

    # Each snapshot holds what came before its offset: the batch at the offset is not in it.
    snapshots = partition.log.producer_state.snapshot_offsets()
    assert snapshots == base_offsets[1:][-2:]
    [entry] = decode_snapshot(snapshot_path(partition.log.directory, snapshots[-1]).read_bytes())
    assert entry.batches[-1].last_offset == snapshots[-1] - 1


def test_closing_a_partition_snapshots_the_state_at_the_log_end(replica_manager, lead):
    partition = lead()
    produce(replica_manager, batch(0, 2))
    replica_manager.stop_replica(ORDERS, delete=False)
    assert snapshot_path(partition.log.directory, 2).exists()


def test_idle_producers_are_forgotten_at_the_first_append_after_the_check_interval(
        replica_manager, lead, clock):
    partition = lead()
    produce(replica_manager, batch(0, producer_id=PRODUCER_ID))
    clock.now_ms += EXPIRATION_MS
    produce(replica_manager, batch(0, producer_id=PRODUCER_ID + 1,
                                            timestamp=clock.now_ms))
    assert partition.log.producer_state.entry(PRODUCER_ID) is None
    assert partition.log.producer_state.entry(PRODUCER_ID + 1) is not None


def test_producers_are_not_checked_for_expiry_more_often_than_the_interval(
        replica_manager, lead, clock):
    partition = lead()
    produce(replica_manager, batch(0, producer_id=PRODUCER_ID + 1))  # checks now
    clock.now_ms += CHECK_INTERVAL_MS - 1
    produce(replica_manager, batch(0, timestamp=NOW_MS - EXPIRATION_MS))
    assert partition.log.producer_state.entry(PRODUCER_ID) is not None  # expired, not yet removed
