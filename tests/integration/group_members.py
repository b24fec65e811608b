"""Consumer-group members as applications run them, for the group tests.

:class:`Member` is a confluent-kafka consumer subscribed to a topic, with what a test
checks recorded as it happens: the records it handed out (and by which member), and the
partitions it owned after each rebalance callback. :func:`poll_until` polls members in
turn, on the test's thread, until a condition holds or a deadline passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import confluent_kafka

# Long enough for a rebalance with a session timeout of a few seconds on a loaded machine;
# a healthy run never waits for it.
GROUP_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.05

# Broker configs of the group tests: small __consumer_offsets, short sessions allowed, and
# a short initial rebalance delay so that members starting together still share one
# generation.
BROKER_CONFIGS = {
    "offsets_topic_num_partitions": 4,
    "group_min_session_timeout_ms": 1000,
    "group_initial_rebalance_delay_ms": 300,
}

# Client settings that keep rebalances to seconds: a member learns of a rebalance at its
# next heartbeat, and a dead one is noticed after its session timeout. Consumed positions
# are committed every 200 ms, and before partitions are revoked, as applications commit:
# a record consumed but not committed when its partition moves is consumed again by its
# next owner (at-least-once).
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
              "auto.commit.interval.ms": 200}


class Member:
    """One confluent-kafka consumer in a group, subscribed to ``topic``."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str,
                 **config: str | int) -> None:
        self.name = name
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "auto.offset.reset": "earliest", **FAST_GROUP, **config})
        self.cooperative = config.get("partition.assignment.strategy") == "cooperative-sticky"
        self.owned: set[int] = set()
        self.assignments = 0  # rebalances that gave this member partitions
        self.records: list[confluent_kafka.Message] = []
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, consumer, partitions) -> None:
        if self.cooperative:
            consumer.incremental_assign(partitions)
        self.owned |= {p.partition for p in partitions}
        self.assignments += 1

    def _revoked(self, consumer, partitions) -> None:
        if self.cooperative:
            consumer.incremental_unassign(partitions)
        self.owned -= {p.partition for p in partitions}

    def poll(self) -> None:
        message = self.consumer.poll(POLL_SECONDS)
        if message is None:
            return
        if message.error():
            raise confluent_kafka.KafkaException(message.error())
        self.records.append(message)

    def close(self) -> None:
        self.consumer.close()

    def __repr__(self) -> str:
        return f"{self.name}{sorted(self.owned)}"


def poll_until(members: Iterable[Member], condition: Callable[[], bool],
               timeout: float = GROUP_TIMEOUT_SECONDS, what: str = "") -> float:
    """Polls every member until ``condition()``; returns the seconds it took."""
    members = list(members)
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what or 'condition'} not met in {timeout} s: {members}")
        for member in members:
            member.poll()
    return time.monotonic() - start


def owns_all(members: Iterable[Member], partitions: int) -> Callable[[], bool]:
    """Every partition owned by exactly one of ``members``, and every member owning some
    (a member alone in the group owns everything until the others have joined)."""
    members = list(members)

    def check() -> bool:
        owned = [p for m in members for p in m.owned]
        return sorted(owned) == list(range(partitions)) and all(m.owned for m in members)

    return check


def produce(bootstrap: str, topic: str, partitions: int, count: int, start: int = 0) -> set:
    """``count`` records spread over the partitions; returns their values."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    values = set()
    for i in range(start, start + count):
        value = f"r{i}".encode()
        producer.produce(topic, value=value, partition=i % partitions)
        values.add(value)
    assert producer.flush(GROUP_TIMEOUT_SECONDS) == 0
    return values
