"""A fourth member joins a stable group of three: how long until every member consumes again,
and did the three pause partitions they keep? The classic protocol (eager and
cooperative-sticky) against the consumer protocol of KIP-848, in one run, on one fresh
odradek broker per heartbeat setting.

    .venv/bin/python -m bench.group_rebalance [--runs 3] [--quick] [--output FILE]

A producer writes 2,000 records/s over 8 partitions throughout. Three confluent-kafka
consumers (one thread each) share the topic; once each consumes, a fourth starts. The time
measured runs from the fourth member's start until all four own a partition, no partition
has two owners, and each has consumed a record written after the fourth started from a
partition it owns. "Paused" counts the old members that had a partition revoked that they
own again at the end (an eager rebalance revokes everything; an incremental one only what
moves).

Each protocol is measured twice: with its default heartbeat interval (the classic client's
``heartbeat.interval.ms`` of 3 s; the broker's ``group.consumer.heartbeat.interval.ms`` of
5 s), and with both at 100 ms, since a member learns of a new assignment at its next
heartbeat in either protocol. Target (issue #13): under 300 ms with the consumer protocol,
with no old member pausing partitions it keeps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench import brokers
from bench.brokers import RESULTS_DIR

PARTITIONS = 8
RATE = 2_000  # records/s written throughout
FAST_HEARTBEAT_MS = 100
TIMEOUT_S = 60.0
TARGET_MS = 300


@dataclass(frozen=True)
class Setup:
    name: str
    protocol: str  # "classic" or "consumer"
    fast: bool  # 100 ms heartbeats instead of the defaults
    strategy: str | None = None  # a classic client's partition.assignment.strategy

    def client_config(self) -> dict[str, str | int]:
        if self.protocol == "consumer":
            return {"group.protocol": "consumer"}
        config: dict[str, str | int] = {"session.timeout.ms": 6000}
        if self.fast:
            config["heartbeat.interval.ms"] = FAST_HEARTBEAT_MS
        if self.strategy:
            config["partition.assignment.strategy"] = self.strategy
        return config


SETUPS = (
    Setup("classic, eager (range)", "classic", False),
    Setup("classic, cooperative-sticky", "classic", False, "cooperative-sticky"),
    Setup("consumer protocol", "consumer", False),
    Setup("classic, eager (range)", "classic", True),
    Setup("classic, cooperative-sticky", "classic", True, "cooperative-sticky"),
    Setup("consumer protocol", "consumer", True),
)


@dataclass
class Member:
    """A consumer polling on its own thread, recording what it owns and consumes."""

    bootstrap: str
    group: str
    topic: str
    config: dict
    owned: set[int] = field(default_factory=set)
    revoked: set[int] = field(default_factory=set)
    last_consumed_at: dict[int, float] = field(default_factory=dict)
    cooperative: bool = False
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self.cooperative = self.config.get("partition.assignment.strategy") == \
            "cooperative-sticky"
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "auto.offset.reset": "latest", "enable.auto.commit": False, **self.config})

        def assigned(c, partitions):
            if self.cooperative:
                c.incremental_assign(partitions)
            self.owned |= {p.partition for p in partitions}

        def revoked(c, partitions):
            if self.cooperative:
                c.incremental_unassign(partitions)
            self.owned -= {p.partition for p in partitions}
            self.revoked |= {p.partition for p in partitions}

        consumer.subscribe([self.topic], on_assign=assigned, on_revoke=revoked)
        try:
            while not self.stop.is_set():
                message = consumer.poll(0.01)
                if message is not None and not message.error():
                    self.last_consumed_at[message.partition()] = time.monotonic()
        finally:
            consumer.close()

    def consumed_since(self, moment: float) -> bool:
        return any(self.last_consumed_at.get(p, 0) > moment for p in self.owned)

    def close(self) -> None:
        self.stop.set()
        self._thread.join(TIMEOUT_S)


def produce_steadily(bootstrap: str, topic: str, stop: threading.Event) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    sent = 0
    start = time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - start) * RATE)
        while sent < due:
            producer.produce(topic, b"x" * 100, partition=sent % PARTITIONS)
            sent += 1
        producer.poll(0.005)
    producer.flush(10)


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.002)


def measure(bootstrap: str, setup: Setup, topic: str, group: str) -> dict:
    stop = threading.Event()
    producer = threading.Thread(target=produce_steadily, args=(bootstrap, topic, stop),
                                daemon=True)
    producer.start()
    members = [Member(bootstrap, group, topic, setup.client_config()) for _ in range(3)]
    for member in members:
        member.start()
    try:
        started = time.monotonic()
        wait_for(lambda: _settled(members) and all(m.consumed_since(started) for m in members),
                 "three members consuming")
        time.sleep(1.0)  # a stable group
        for member in members:
            member.revoked.clear()
        fourth = Member(bootstrap, group, topic, setup.client_config())
        joined = time.monotonic()
        fourth.start()
        everyone = members + [fourth]
        wait_for(lambda: _settled(everyone) and all(m.consumed_since(joined) for m in everyone),
                 "four members consuming")
        elapsed_ms = (time.monotonic() - joined) * 1000
        paused = sum(1 for m in members if m.revoked & m.owned)
        return {"ms": round(elapsed_ms, 1), "paused_members": paused}
    finally:
        stop.set()
        for member in members + ([fourth] if "fourth" in locals() else []):
            member.close()
        producer.join(TIMEOUT_S)


def _settled(members: list[Member]) -> bool:
    owned = [p for m in members for p in m.owned]
    return sorted(owned) == list(range(PARTITIONS)) and all(m.owned for m in members)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.group_rebalance",
                                     description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run, fast heartbeats only")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    runs = 1 if args.quick else args.runs
    setups = [s for s in SETUPS if s.fast] if args.quick else list(SETUPS)
    console = Console()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict]] = {}
    for fast in sorted({s.fast for s in setups}):
        interval = FAST_HEARTBEAT_MS if fast else 5000
        port = brokers.free_port(29392)
        broker = brokers.odradek_broker(
            port, RESULTS_DIR / f"{stamp}-group-rebalance.log", None,
            [f"group.consumer.heartbeat.interval.ms={interval}",
             f"group.consumer.min.heartbeat.interval.ms={min(interval, 5000)}",
             "offsets.topic.num.partitions=4", "group.min.session.timeout.ms=1000"])
        try:
            broker.start()
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for index, setup in enumerate(s for s in setups if s.fast == fast):
                key = f"{setup.name}, {'100 ms' if fast else 'default'} heartbeats"
                for run in range(runs):
                    topic = f"t{index}-{run}"
                    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
                        future.result(TIMEOUT_S)
                    with console.status(f"{key}: run {run + 1}/{runs}"):
                        results.setdefault(key, []).append(
                            measure(broker.bootstrap, setup, topic, f"g{index}-{run}"))
        finally:
            broker.stop()
    table = Table(title="A fourth member joins a group of three (median of runs)")
    for column in ("setup", "until all consume (ms)", "min", "max", "old members paused"):
        table.add_column(column)
    summary = {}
    for key, rows in results.items():
        times = [r["ms"] for r in rows]
        summary[key] = {"median_ms": statistics.median(times), "min_ms": min(times),
                        "max_ms": max(times),
                        "paused_members": max(r["paused_members"] for r in rows),
                        "runs": rows}
        table.add_row(key, f"{summary[key]['median_ms']:.0f}", f"{min(times):.0f}",
                      f"{max(times):.0f}", str(summary[key]["paused_members"]))
    console.print(table)
    fast_consumer = summary.get("consumer protocol, 100 ms heartbeats")
    if fast_consumer:
        met = fast_consumer["median_ms"] < TARGET_MS and fast_consumer["paused_members"] == 0
        console.print(f"target (< {TARGET_MS} ms, nobody paused): "
                      f"{'met' if met else 'NOT met'}")
    output = args.output or RESULTS_DIR / f"{stamp}-group-rebalance.json"
    output.write_text(json.dumps({"stamp": stamp, "results": summary}, indent=2))
    console.print(f"written {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
