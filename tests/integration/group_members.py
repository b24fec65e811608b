"""Consumer-group members as applications run them, for the group tests.

:class:`Member` is a confluent-kafka consumer subscribed to a topic, with what a test
checks recorded as it happens: the records it handed out (and by which member), and the
partitions it owned after each rebalance callback. :func:`poll_until` polls members in
turn, on the test's thread, until a condition holds or a deadline passes.

:class:`KafkaPythonMember` and :class:`AIOKafkaMember` are kafka-python and aiokafka
consumers polling in the background (a thread each; tasks of one event loop on a thread),
which :func:`wait_until` watches. :class:`DoomedMember` is a member in a subprocess, for a
test to kill, and :func:`committed_offsets` reads a group's offsets as an admin tool does.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import Future
from typing import Any

import aiokafka
import confluent_kafka
import confluent_kafka.admin
import kafka

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
# Members of the consumer protocol (KIP-848) get their session and heartbeat interval from
# the broker (see CONSUMER_PROTOCOL_CONFIGS): those two settings are refused.
CONSUMER_PROTOCOL = {"group.protocol": "consumer"}
CONSUMER_PROTOCOL_CONFIGS = {
    "group_consumer_min_session_timeout_ms": 1000,
    "group_consumer_session_timeout_ms": 3000,
    "group_consumer_min_heartbeat_interval_ms": 100,
    "group_consumer_heartbeat_interval_ms": 300,
}


class Member:
    """One confluent-kafka consumer in a group, subscribed to ``topic``."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str,
                 **config: str | int) -> None:
        self.name = name
        fast = FAST_GROUP
        if config.get("group.protocol") == "consumer":
            fast = {k: v for k, v in FAST_GROUP.items() if k == "auto.commit.interval.ms"}
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "auto.offset.reset": "earliest", **fast, **config})
        self.cooperative = config.get("partition.assignment.strategy") == "cooperative-sticky"
        self.owned: set[int] = set()
        self.assignments = 0  # rebalances that gave this member partitions
        self.revoked: set[int] = set()  # every partition ever taken from it
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
        self.revoked |= {p.partition for p in partitions}

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

    def poll() -> None:
        for member in members:
            member.poll()

    return wait_until(condition, timeout, f"{what or 'condition'} ({members})", step=poll)


def wait_until(condition: Callable[[], bool], timeout: float = GROUP_TIMEOUT_SECONDS,
               what: str = "", step: Callable[[], None] = lambda: time.sleep(POLL_SECONDS)
               ) -> float:
    """Runs ``step`` (by default, waits a little) until ``condition()``; returns the seconds
    it took."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what or 'condition'} not met in {timeout} s")
        step()
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


# FAST_GROUP as kafka-python and aiokafka spell it.
PYTHON_FAST_GROUP = {name.replace(".", "_"): value for name, value in FAST_GROUP.items()}


class BackgroundMember:
    """A kafka-python or aiokafka consumer in a group, subscribed to a topic and polling in
    the background as an application's consumer loop does, committing automatically.

    The test reads ``owned`` (the assignment after the last poll) and ``values`` (every
    record value polled, duplicates included). :meth:`stall` stops the polling while the
    client, and the heartbeats it sends on its own, stay alive. :meth:`close` stops the
    consumer and raises what its loop raised, if anything.
    """

    def __init__(self, bootstrap: str, group: str, name: str, config: dict[str, Any]) -> None:
        self.name = name
        self.owned: set[int] = set()
        self.values: list[bytes] = []
        self._config = {"bootstrap_servers": bootstrap, "group_id": group, "client_id": name,
                        "auto_offset_reset": "earliest", **PYTHON_FAST_GROUP, **config}
        self._polling = threading.Event()
        self._polling.set()
        self._closing = threading.Event()
        self._done: Future = Future()

    def _polled(self, batches: dict[Any, list], assignment: Iterable[Any]) -> None:
        for records in batches.values():
            self.values.extend(record.value for record in records)
        self.owned = {tp.partition for tp in assignment}

    def stall(self) -> None:
        self._polling.clear()

    def close(self) -> None:
        self._closing.set()
        self._done.result(GROUP_TIMEOUT_SECONDS)

    def __repr__(self) -> str:
        return f"{self.name}{sorted(self.owned)}"


class KafkaPythonMember(BackgroundMember):
    """A kafka-python consumer on a thread of its own, as applications run kafka-python: its
    poll() also drives its group membership, which a thread shared with another consumer
    would starve."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str,
                 **config: Any) -> None:
        super().__init__(bootstrap, group, name, config)
        threading.Thread(target=self._run, args=(topic,), name=name, daemon=True).start()

    def _run(self, topic: str) -> None:
        try:
            consumer = kafka.KafkaConsumer(topic, **self._config)
            try:
                while not self._closing.is_set():
                    if self._polling.is_set():
                        self._polled(consumer.poll(timeout_ms=100), consumer.assignment())
                    else:
                        self._closing.wait(POLL_SECONDS)
            finally:
                consumer.close()
        except Exception as e:  # handed to close(), on the test's thread
            self._done.set_exception(e)
        else:
            self._done.set_result(None)


class EventLoopThread:
    """An asyncio event loop on a thread of its own, for aiokafka consumers that run next
    to a test's synchronous code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, None]) -> Future:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(GROUP_TIMEOUT_SECONDS)
        self.loop.close()


class AIOKafkaMember(BackgroundMember):
    """An aiokafka consumer, a task on ``loop``; its group membership runs in tasks of its
    own, so a stalled getmany() loop still heartbeats."""

    def __init__(self, loop: EventLoopThread, bootstrap: str, group: str, topic: str,
                 name: str, **config: Any) -> None:
        super().__init__(bootstrap, group, name, config)
        self._done = loop.submit(self._run(topic))

    async def _run(self, topic: str) -> None:
        consumer = aiokafka.AIOKafkaConsumer(topic, **self._config)
        await consumer.start()
        try:
            while not self._closing.is_set():
                if self._polling.is_set():
                    self._polled(await consumer.getmany(timeout_ms=100), consumer.assignment())
                else:
                    await asyncio.sleep(POLL_SECONDS)
        finally:
            await consumer.stop()


class DoomedMember:
    """A group member in a subprocess, for a test to kill with SIGKILL (no LeaveGroup).

    ``script`` is Python source run with the bootstrap servers, the group and the topic as
    arguments. It prints ``assigned <partition> ...`` whenever its assignment changes and
    ``consumed <value>`` for each record *before* committing it, so that every record it
    may have committed is one it printed.
    """

    def __init__(self, script: str, bootstrap: str, group: str, topic: str) -> None:
        self._process = subprocess.Popen([sys.executable, "-c", script, bootstrap, group, topic],
                                         stdout=subprocess.PIPE, text=True)
        self._lines: list[list[str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self._process.stdout:
            if line.endswith("\n"):  # print() writes a line in pieces: a kill can tear it
                self._lines.append(line.split())

    @property
    def owned(self) -> set[int]:
        assigned = [words[1:] for words in self._lines if words[0] == "assigned"]
        return {int(p) for p in assigned[-1]} if assigned else set()

    @property
    def consumed(self) -> list[bytes]:
        return [words[1].encode() for words in self._lines if words[0] == "consumed"]

    def kill(self) -> None:
        self._process.send_signal(signal.SIGKILL)
        self._process.wait(GROUP_TIMEOUT_SECONDS)

    def close(self) -> None:
        self._process.kill()
        self._process.wait(GROUP_TIMEOUT_SECONDS)

    def __repr__(self) -> str:
        return f"doomed{sorted(self.owned)}"


def committed_offsets(admin: confluent_kafka.admin.AdminClient, group: str, topic: str,
                      partitions: int) -> dict[int, int]:
    """The group's committed offset of each partition of ``topic``; 0 where it has none."""
    [future] = admin.list_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions(
        group, [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)])]).values()
    return {tp.partition: max(tp.offset, 0)
            for tp in future.result(GROUP_TIMEOUT_SECONDS).topic_partitions}
