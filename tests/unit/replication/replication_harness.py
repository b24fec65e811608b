"""A replica manager over real logs in a temporary dir, on a fake clock, for the
replication unit tests (``conftest`` registers its fixtures)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from odradek.log import LogManager
from odradek.log.validator import AppendOrigin
from odradek.metadata.model import PartitionState
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.replica_manager import ReplicaManager, RoleChanges
from odradek.server.config import BrokerConfig, effective_topic_config, to_log_config

ORDERS = TopicPartition("orders", 0)
LOCAL = 0
NOW_MS = 1_700_000_000_000
EXPIRATION_MS = 60_000
CHECK_INTERVAL_MS = 10_000


class FakeClock:
    """Wall-clock and monotonic milliseconds at once: tests move it by hand."""

    def __init__(self) -> None:
        self.now_ms = NOW_MS

    def __call__(self) -> int:
        return self.now_ms


class FakeTimer:
    """Records what the replica manager asks to be called back; tests expire by hand."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, delay_s: float, callback) -> FakeTimer:
        self.delays.append(delay_s)
        return self

    def cancel(self) -> None:
        pass


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker_config(tmp_path: Path) -> BrokerConfig:
    return BrokerConfig({"log.dirs": str(tmp_path),
                         "producer.id.expiration.ms": str(EXPIRATION_MS),
                         "producer.id.expiration.check.interval.ms": str(CHECK_INTERVAL_MS)})


@pytest.fixture
def replica_manager(tmp_path: Path, clock: FakeClock, broker_config: BrokerConfig):
    log_manager = LogManager([tmp_path], clock=clock,
                             producer_id_expiration_ms=lambda: EXPIRATION_MS)
    manager = ReplicaManager(LOCAL, log_manager, clock, broker_config.get,
                             monotonic_clock=clock, call_later=FakeTimer())
    yield manager
    manager.shutdown()
    log_manager.close_all()


def apply(replica_manager: ReplicaManager, broker_config: BrokerConfig,
          state: PartitionState, **overrides: str) -> RoleChanges:
    """Applies ``state`` to ``orders-0`` with these topic config overrides."""
    topic_config = effective_topic_config(overrides, broker_config)
    return replica_manager.become_leader_or_follower(
        ORDERS.topic, [state], log_config=to_log_config(topic_config), topic_config=topic_config)


def append(replica_manager: ReplicaManager, records: bytes | bytearray, *, acks: int = 1,
           timeout_ms: int = 30_000) -> list[Any]:
    """Appends to ``orders-0``; the list gets the partition's result when it is answered."""
    answers: list[Any] = []
    replica_manager.append_records({ORDERS: bytearray(records)}, acks=acks,
                                   timeout_ms=timeout_ms, origin=AppendOrigin.CLIENT,
                                   respond=lambda results: answers.append(results[ORDERS]))
    return answers
