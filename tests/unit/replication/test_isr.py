"""The leader's ISR: followers join once caught up, leave after ``replica.lag.time.max.ms``,
changes are proposed through ``alter_isr`` and count for the high watermark while pending
(Kafka's maximal ISR); a follower takes the leader's high watermark; OffsetsForLeaderEpoch
answers from the epoch cache."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from odradek.log import LogManager
from odradek.metadata.model import PartitionState
from odradek.protocol.records import Record, build_batch
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.delayed_fetch import FetchParams, IsolationLevel, PartitionFetchInfo
from odradek.replication.partition import PartitionError
from odradek.replication.replica_manager import ReplicaManager
from odradek.log.partition_metadata import read_topic_id
from odradek.server.config import BrokerConfig, effective_topic_config, to_log_config
from replication_harness import LOCAL, NOW_MS, ORDERS, FakeClock, FakeTimer, append, apply

FOLLOWER = 1
LAG_MS = 10_000


class IsrWrites:
    """A stand-in for the metadata store's conditional ISR write: records each proposal and
    writes it (version + 1), or refuses it as a store would when the state moved on."""

    def __init__(self) -> None:
        self.proposed: list[tuple[int, ...]] = []
        self.refuse = False

    async def __call__(self, tp: TopicPartition, state: PartitionState, isr: tuple[int, ...]
                       ) -> PartitionState | None:
        self.proposed.append(isr)
        await asyncio.sleep(0)
        if self.refuse:
            return None
        return PartitionState(state.partition, state.leader, state.leader_epoch,
                              state.replicas, isr, state.partition_epoch + 1)


@pytest.fixture
def setup(tmp_path: Path):
    clock = FakeClock()
    config = BrokerConfig({"log.dirs": str(tmp_path), "replica.lag.time.max.ms": str(LAG_MS)})
    log_manager = LogManager([tmp_path], clock=clock, producer_id_expiration_ms=lambda: 60_000)
    writes = IsrWrites()
    manager = ReplicaManager(LOCAL, log_manager, clock, config.get, monotonic_clock=clock,
                             call_later=FakeTimer(), alter_isr=writes)
    yield manager, config, clock, writes
    manager.shutdown()
    log_manager.close_all()


def run(coroutine) -> None:
    asyncio.run(coroutine)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def follower_fetch(manager: ReplicaManager, offset: int) -> None:
    manager.fetch_messages(FetchParams(
        replica_id=FOLLOWER, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        isolation_level=IsolationLevel.READ_UNCOMMITTED,
        partitions={ORDERS: PartitionFetchInfo(offset, 1 << 20, log_start_offset=0)}),
        lambda results: None)


def produce(manager: ReplicaManager, count: int, acks: int = 1) -> list:
    batch = build_batch([Record(i, NOW_MS, None, b"v") for i in range(count)])
    return append(manager, batch, acks=acks)


def test_a_caught_up_follower_joins_the_isr(setup):
    manager, config, clock, writes = setup

    async def scenario() -> None:
        apply(manager, config, PartitionState(0, LOCAL, 0, (LOCAL, FOLLOWER), (LOCAL,)))
        produce(manager, 3)
        partition = manager.get_partition(ORDERS)
        follower_fetch(manager, 2)  # behind the high watermark (3): not yet
        assert writes.proposed == [] and partition.pending_isr is None
        follower_fetch(manager, 3)
        assert partition.pending_isr == (LOCAL, FOLLOWER)
        # While the change is out, the high watermark already waits for the follower.
        assert partition.maximal_isr == (LOCAL, FOLLOWER)
        produce(manager, 2)
        assert partition.high_watermark == 3
        await settle()
        assert writes.proposed == [(LOCAL, FOLLOWER)]
        assert partition.isr == (LOCAL, FOLLOWER) and partition.pending_isr is None
        assert partition.partition_epoch == 1

    run(scenario())


def test_a_lagging_follower_leaves_the_isr_and_acks_all_completes(setup):
    manager, config, clock, writes = setup

    async def scenario() -> None:
        apply(manager, config, PartitionState(0, LOCAL, 0, (LOCAL, FOLLOWER), (LOCAL, FOLLOWER)),
              **{"min.insync.replicas": "1"})
        partition = manager.get_partition(ORDERS)
        follower_fetch(manager, 0)
        waiting = produce(manager, 2, acks=-1)
        assert waiting == [] and partition.high_watermark == 0
        clock.now_ms += LAG_MS  # exactly the limit: still in sync
        manager.maybe_shrink_isr()
        assert partition.pending_isr is None
        clock.now_ms += 1
        manager.maybe_shrink_isr()
        assert partition.pending_isr == (LOCAL,)
        await settle()
        assert writes.proposed == [(LOCAL,)]
        assert partition.isr == (LOCAL,)
        assert partition.high_watermark == 2
        assert len(waiting) == 1 and waiting[0].error is ErrorCode.none

    run(scenario())


def test_a_follower_that_keeps_up_stays(setup):
    manager, config, clock, writes = setup

    async def scenario() -> None:
        apply(manager, config, PartitionState(0, LOCAL, 0, (LOCAL, FOLLOWER), (LOCAL, FOLLOWER)))
        for _ in range(5):
            produce(manager, 1)
            clock.now_ms += LAG_MS // 2
            follower_fetch(manager, manager.get_partition(ORDERS).log_end_offset)
            manager.maybe_shrink_isr()
        await settle()
        assert writes.proposed == []

    run(scenario())


def test_a_refused_isr_change_leaves_the_isr_as_it_was(setup):
    manager, config, clock, writes = setup
    writes.refuse = True

    async def scenario() -> None:
        apply(manager, config, PartitionState(0, LOCAL, 0, (LOCAL, FOLLOWER), (LOCAL,)))
        follower_fetch(manager, 0)
        await settle()
        assert writes.proposed == [(LOCAL, FOLLOWER)]
        partition = manager.get_partition(ORDERS)
        assert partition.isr == (LOCAL,) and partition.pending_isr is None

    run(scenario())


def test_a_follower_takes_the_leaders_high_watermark_within_its_own_log(setup):
    manager, config, clock, writes = setup
    apply(manager, config, PartitionState(0, FOLLOWER, 0, (LOCAL, FOLLOWER), (LOCAL, FOLLOWER)))
    partition = manager.get_partition(ORDERS)
    batch = build_batch([Record(i, NOW_MS, None, b"v") for i in range(4)])
    partition.append_records_to_follower(bytearray(batch), now_ms=NOW_MS)
    partition.update_follower_high_watermark(10, 0)
    assert partition.high_watermark == 4  # its own log ends there
    with pytest.raises(PartitionError):
        manager.get_partition(ORDERS).append_records_to_leader(
            bytearray(batch), origin=None, required_acks=1, now_ms=NOW_MS)


def test_offsets_for_leader_epoch_come_from_the_epoch_cache(setup):
    manager, config, clock, writes = setup
    apply(manager, config, PartitionState(0, LOCAL, 0, (LOCAL,), (LOCAL,)))
    produce(manager, 3)
    apply(manager, config, PartitionState(0, LOCAL, 2, (LOCAL,), (LOCAL,)))
    produce(manager, 2)
    assert manager.last_offset_for_leader_epoch(ORDERS, -1, 0) == (0, 3)
    assert manager.last_offset_for_leader_epoch(ORDERS, 2, 1) == (0, 3)
    assert manager.last_offset_for_leader_epoch(ORDERS, 2, 2) == (2, 5)
    with pytest.raises(PartitionError) as fenced:
        manager.last_offset_for_leader_epoch(ORDERS, 1, 0)
    assert fenced.value.error_code is ErrorCode.fenced_leader_epoch


def test_a_leader_without_a_valid_session_acknowledges_no_acks_all(setup):
    manager, config, clock, writes = setup
    apply(manager, config, PartitionState(0, LOCAL, 0, (LOCAL, FOLLOWER), (LOCAL, FOLLOWER)),
          **{"min.insync.replicas": "1"})
    waiting = produce(manager, 1, acks=-1)
    assert waiting == []
    manager.fence_leaderships(True)
    assert [r.error for r in waiting] == [ErrorCode.not_leader_or_follower]
    refused = produce(manager, 1, acks=-1)
    assert [r.error for r in refused] == [ErrorCode.not_leader_or_follower]
    assert manager.get_partition(ORDERS).log_end_offset == 1  # nothing written
    assert [r.error for r in produce(manager, 1, acks=1)] == [ErrorCode.none]
    manager.fence_leaderships(False)
    follower_fetch(manager, 2)
    later = produce(manager, 1, acks=-1)
    follower_fetch(manager, 3)
    assert [r.error for r in later] == [ErrorCode.none]


def test_a_log_left_by_an_earlier_topic_of_the_same_name_starts_afresh(tmp_path):
    first, second = uuid.uuid4(), uuid.uuid4()
    state = PartitionState(0, LOCAL, 0, (LOCAL,), (LOCAL,))

    def restart_and_host(topic_id: uuid.UUID, records: int) -> int:
        """A broker starting over the same log dir hosts orders-0 of ``topic_id``, appends
        ``records``; returns the log end offset it found the log at."""
        clock = FakeClock()
        config = BrokerConfig({"log.dirs": str(tmp_path)})
        log_manager = LogManager([tmp_path], clock=clock,
                                 producer_id_expiration_ms=lambda: 60_000)
        log_manager.load_all(lambda topic: to_log_config(effective_topic_config({}, config)))
        manager = ReplicaManager(LOCAL, log_manager, clock, config.get, monotonic_clock=clock,
                                 call_later=FakeTimer())
        topic_config = effective_topic_config({}, config)
        manager.become_leader_or_follower(ORDERS.topic, [state],
                                          log_config=to_log_config(topic_config),
                                          topic_config=topic_config, topic_id=topic_id)
        found = manager.get_partition(ORDERS).log_end_offset
        produce(manager, records)
        assert read_topic_id(manager.get_partition(ORDERS).log.directory) == topic_id
        manager.shutdown()
        log_manager.close_all()
        return found

    assert restart_and_host(first, 3) == 0
    assert restart_and_host(first, 2) == 3  # the same topic keeps its log
    assert restart_and_host(second, 1) == 0  # another topic of that name starts afresh
    assert restart_and_host(second, 1) == 1


def test_an_isr_member_that_is_no_replica_leaves_at_once(setup):
    manager, config, clock, writes = setup

    async def scenario() -> None:
        # A reassignment removed broker 5 while a stale ISR change kept it in the ISR.
        apply(manager, config, PartitionState(0, LOCAL, 0, (LOCAL, FOLLOWER),
                                              (LOCAL, FOLLOWER, 5)))
        manager.maybe_shrink_isr()
        await settle()
        assert writes.proposed == [(LOCAL, FOLLOWER)]
        assert manager.get_partition(ORDERS).isr == (LOCAL, FOLLOWER)

    run(scenario())
