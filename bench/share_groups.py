"""Share groups: records/s through 1, 3 and 6 share consumers of one group reading a
one-partition topic, and the broker's CPU per million records acknowledged, in one run on
one fresh odradek broker.

    .venv/bin/python -m bench.share_groups [--records 200000] [--runs 3] [--quick]
                                           [--output FILE]

The topic is filled first (100-byte records, one partition). Then for each count of
consumers, a new share group reads it from the start: each consumer is a confluent-kafka
``ShareConsumer`` in a process of its own (implicit acknowledgement: each poll accepts the
records of the previous one), and the run ends when the group's records acknowledged reach
the topic's end — read from the share-partition's start offset with DescribeShareGroupOffsets.
The rate is records acknowledged per second of that run; the broker's CPU comes from /proc.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench import brokers
from bench.brokers import RESULTS_DIR
from odradek.client.connection import BrokerConnection
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build

CONSUMERS = (1, 3, 6)
TOPIC = "queue"
TIMEOUT_S = 600.0


def consume(bootstrap: str, group: str, stop) -> None:
    consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap,
                                              "group.id": group})
    consumer.subscribe([TOPIC])
    try:
        while not stop.is_set():
            consumer.poll(0.1)
        consumer.commit_sync(30)
    finally:
        consumer.close()


def start_offset(port: int, group: str) -> int:
    async def ask() -> int:
        connection = await BrokerConnection.open(brokers.HOST, port, client_id="bench",
                                                 connect_timeout_s=10)
        try:
            answer = await connection.send(build(
                request_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1),
                groups=[{"group_id": group, "topics": [{"topic_name": TOPIC,
                                                        "partitions": [0]}]}]), timeout_s=10)
        finally:
            connection.close()
        return answer.groups[0].topics[0].partitions[0].start_offset

    return asyncio.run(ask())


def fill(bootstrap: str, records: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                                         "batch.size": 1_000_000})
    payload = b"x" * 100
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, payload)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0


def measure(broker: brokers.Broker, consumers: int, records: int, group: str) -> dict:
    stop = multiprocessing.Event()
    processes = [multiprocessing.Process(target=consume, args=(broker.bootstrap, group, stop))
                 for _ in range(consumers)]
    cpu = broker.cpu_seconds()
    started = time.monotonic()
    for process in processes:
        process.start()
    try:
        while start_offset(broker.port, group) < records:
            if time.monotonic() - started > TIMEOUT_S:
                raise TimeoutError(f"{consumers} consumers did not finish")
            time.sleep(0.05)
        elapsed = time.monotonic() - started
        used = broker.cpu_seconds() - cpu
    finally:
        stop.set()
        for process in processes:
            process.join(60)
    return {"records_per_s": round(records / elapsed),
            "broker_cpu_s_per_million": round(used / records * 1e6, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.share_groups", description=__doc__)
    parser.add_argument("--records", type=int)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="50,000 records, one run")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    records = args.records or (50_000 if args.quick else 200_000)
    runs = 1 if args.quick else args.runs
    console = Console()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    port = brokers.free_port(29492)
    broker = brokers.odradek_broker(
        port, RESULTS_DIR / f"{stamp}-share-groups.log", None,
        ["share.auto.offset.reset=earliest", "offsets.topic.num.partitions=4",
         "share.coordinator.state.topic.num.partitions=4"])
    results: dict[int, list[dict]] = {}
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        with console.status(f"writing {records:,} records"):
            fill(broker.bootstrap, records)
        for run in range(runs):
            for count in CONSUMERS:
                with console.status(f"run {run + 1}/{runs}: {count} share consumers"):
                    results.setdefault(count, []).append(
                        measure(broker, count, records, f"g{count}-{run}"))
    finally:
        broker.stop()
    table = Table(title=f"{records:,} records through one share group (median of {runs})")
    for column in ("consumers", "records/s", "min", "max", "broker CPU s / M acknowledged"):
        table.add_column(column)
    summary = {}
    for count, rows in results.items():
        rates = [r["records_per_s"] for r in rows]
        cpu = statistics.median(r["broker_cpu_s_per_million"] for r in rows)
        summary[count] = {"median_records_per_s": statistics.median(rates),
                          "min": min(rates), "max": max(rates),
                          "broker_cpu_s_per_million": cpu, "runs": rows}
        table.add_row(str(count), f"{statistics.median(rates):,.0f}", f"{min(rates):,}",
                      f"{max(rates):,}", f"{cpu:.2f}")
    console.print(table)
    output = args.output or RESULTS_DIR / f"{stamp}-share-groups.json"
    output.write_text(json.dumps({"stamp": stamp, "records": records, "results": summary},
                                 indent=2))
    console.print(f"written {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
