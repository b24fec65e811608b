"""The replica manager's waiting list on a fake clock, over real logs: delayed fetches
complete when the high watermark brings ``min_bytes`` (not at every append), delayed
acks=-1 produces when the in-sync replicas have the records, both at their deadlines, and
both at once when the partition stops being led here. Role changes keep the partition."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from odradek.metadata.model import PartitionState
from odradek.protocol.records import Record, build_batch
from odradek.replication.delayed_fetch import (
    CONSUMER_REPLICA_ID,
    FetchParams,
    IsolationLevel,
    PartitionFetchInfo,
)
from odradek.replication.replica_manager import ReplicaManager
from replication_harness import LOCAL, NOW_MS, ORDERS, append, apply

FOLLOWER = 1


def state(*, leader: int = LOCAL, epoch: int = 0, isr=(LOCAL,)) -> PartitionState:
    return PartitionState(0, leader, epoch, (LOCAL, FOLLOWER), isr)


@pytest.fixture
def lead(replica_manager, broker_config):
    """Applies a partition state to orders-0, with topic config overrides."""
    return lambda partition_state, **overrides: apply(replica_manager, broker_config,
                                                      partition_state, **overrides)


def produce(replica_manager: ReplicaManager, *values: bytes, acks: int = 1,
            timeout_ms: int = 30_000) -> list:
    batch = build_batch([Record(i, NOW_MS, None, value) for i, value in enumerate(values)])
    return append(replica_manager, batch, acks=acks, timeout_ms=timeout_ms)


def fetch(replica_manager: ReplicaManager, offset: int, *, min_bytes: int = 1,
          max_wait_ms: int = 500, replica_id: int = CONSUMER_REPLICA_ID,
          log_start_offset: int = -1) -> list:
    """Fetches orders-0; the list gets its result when the fetch is answered."""
    answers: list = []
    replica_manager.fetch_messages(FetchParams(
        replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
        max_bytes=1 << 20, isolation_level=IsolationLevel.READ_UNCOMMITTED,
        partitions={ORDERS: PartitionFetchInfo(offset, 1 << 20,
                                               log_start_offset=log_start_offset)}),
        lambda results: answers.append(results[ORDERS]))
    return answers


def test_a_long_poll_completes_when_the_high_watermark_brings_data(replica_manager, lead):
    lead(state())
    waiting = fetch(replica_manager, 0)
    assert waiting == []
    produce(replica_manager, b"first")
    [result] = waiting
    assert result.error is ErrorCode.none
    assert result.high_watermark == 1
    assert b"first" in result.records


def test_a_long_poll_waits_for_min_bytes_across_appends(replica_manager, lead):
    lead(state())
    waiting = fetch(replica_manager, 0, min_bytes=300)
    produce(replica_manager, b"x" * 100)
    assert waiting == []
    produce(replica_manager, b"y" * 200)
    [result] = waiting
    assert result.size >= 300


def test_a_long_poll_answers_empty_at_its_deadline(replica_manager, lead, clock):
    lead(state())
    waiting = fetch(replica_manager, 0, max_wait_ms=500)
    clock.now_ms += 499
    replica_manager.expire_delayed_operations()
    assert waiting == []
    clock.now_ms += 1
    replica_manager.expire_delayed_operations()
    [result] = waiting
    assert result.error is ErrorCode.none and result.records == b""


def test_an_append_the_isr_does_not_have_yet_does_not_wake_a_consumer(replica_manager, lead):
    lead(state(isr=(LOCAL, FOLLOWER)))
    waiting = fetch(replica_manager, 0)
    produce(replica_manager, b"first")  # the log end moves, the high watermark does not
    assert waiting == []
    fetch(replica_manager, 1, replica_id=FOLLOWER)  # the follower has offset 0 now
    [result] = waiting
    assert result.high_watermark == 1 and b"first" in result.records


def test_acks_all_is_answered_once_every_in_sync_replica_has_the_records(replica_manager, lead):
    lead(state(isr=(LOCAL, FOLLOWER)))
    answers = produce(replica_manager, b"a", b"b", acks=-1)
    assert answers == []
    fetch(replica_manager, 1, replica_id=FOLLOWER)  # not far enough: offset 1 is missing
    assert answers == []
    fetch(replica_manager, 2, replica_id=FOLLOWER)
    [result] = answers
    assert result.error is ErrorCode.none and result.base_offset == 0


def test_acks_one_is_answered_by_the_leader_alone(replica_manager, lead):
    lead(state(isr=(LOCAL, FOLLOWER)))
    [result] = produce(replica_manager, b"a", acks=1)
    assert result.error is ErrorCode.none


def test_acks_all_times_out_when_the_follower_never_fetches(replica_manager, lead, clock):
    lead(state(isr=(LOCAL, FOLLOWER)))
    answers = produce(replica_manager, b"a", acks=-1, timeout_ms=1_000)
    clock.now_ms += 1_000
    replica_manager.expire_delayed_operations()
    [result] = answers
    assert result.error is ErrorCode.request_timed_out


def test_too_few_in_sync_replicas_refuse_acks_all_before_writing(replica_manager, lead):
    lead(state(), **{"min.insync.replicas": "2"})
    [result] = produce(replica_manager, b"a", acks=-1)
    assert result.error is ErrorCode.not_enough_replicas
    assert replica_manager.get_partition(ORDERS).log_end_offset == 0


def test_losing_leadership_answers_waiting_produces_and_fetches(replica_manager, lead):
    lead(state(isr=(LOCAL, FOLLOWER)))
    waiting_fetch = fetch(replica_manager, 0)
    waiting_produce = produce(replica_manager, b"a", acks=-1)
    changes = lead(state(leader=FOLLOWER, epoch=1, isr=(LOCAL, FOLLOWER)))
    assert changes.became_follower == [ORDERS]
    [produced] = waiting_produce
    assert produced.error is ErrorCode.not_leader_or_follower
    [fetched] = waiting_fetch
    assert fetched.error is ErrorCode.not_leader_or_follower


def test_a_role_change_keeps_the_partition_and_starts_an_epoch(replica_manager, lead):
    lead(state())
    partition = replica_manager.get_partition(ORDERS)
    log = partition.log
    produce(replica_manager, b"a", b"b")
    lead(state(leader=FOLLOWER, epoch=1))
    assert not partition.is_leader
    assert fetch(replica_manager, 0)[0].error is ErrorCode.not_leader_or_follower
    changes = lead(state(epoch=2))
    assert changes.became_leader == [ORDERS]
    assert replica_manager.get_partition(ORDERS) is partition and partition.log is log
    assert partition.leader_epoch == 2
    assert log.leader_epoch_cache.end_offset_for(0, log.log_end_offset) == (0, 2)
    assert log.leader_epoch_cache.latest_epoch == 2


def test_delete_records_waits_for_the_followers_log_start(replica_manager, lead):
    lead(state(isr=(LOCAL, FOLLOWER)))
    produce(replica_manager, b"a", b"b", b"c")
    fetch(replica_manager, 3, replica_id=FOLLOWER)
    answers: list = []
    replica_manager.delete_records([(ORDERS, 2)], timeout_ms=30_000,
                                   respond=lambda statuses: answers.extend(statuses))
    assert answers == []
    fetch(replica_manager, 3, replica_id=FOLLOWER, log_start_offset=2, max_wait_ms=0)
    [deleted] = answers
    assert deleted.error is ErrorCode.none and deleted.low_watermark == 2
