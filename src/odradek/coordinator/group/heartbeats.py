"""What the heartbeat of either group protocol of Kafka 4 answers — ConsumerGroupHeartbeat
(``consumer_protocol``) and ShareGroupHeartbeat (``share_group``) carry the same fields — and
how a heartbeat is refused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.consumer_records import Partitions


class GroupError(Exception):
    """A heartbeat refused with a Kafka error code and a message for the client."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # only when the member is to learn it


HeartbeatCallback = Callable[[HeartbeatResult], None]

