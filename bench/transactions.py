"""What transactions cost: transactional produce (transactions of 100, 1,000 and 10,000
records) against idempotent produce, and read_committed against read_uncommitted consume,
on one fresh odradek broker, in one run.

    .venv/bin/python -m bench.transactions [--records 1000000] [--runs 3] [--quick]
                                           [--wait-idle S] [--output FILE]

Every row writes ``--records`` 100-byte records to a new 6-partition topic with one
confluent-kafka producer (``acks=all``, idempotence on: a transactional producer is an
idempotent one), timed from the first ``produce()`` to the last ``commit_transaction()``
(or ``flush()``); a transaction's records spread over all six partitions, so each one
adds six partitions, writes six markers and two ``__transaction_state`` records. The
consume rows read the topic written with transactions of 1,000 records back with one
consumer of each isolation level. Each row is the median of ``--runs`` runs; the broker's
own CPU-seconds per million records come from /proc. Target (issue #11): transactions of
1,000 records cost at most 15% of the idempotent producer's throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from rich.console import Console
from rich.table import Table

from bench import brokers, workloads
from bench.brokers import RESULTS_DIR

PARTITIONS = 6
RECORD_SIZE = 100
TRANSACTION_SIZES = (100, 1_000, 10_000)
PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "batch.size": 1_000_000, "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000, "sticky.partitioning.linger.ms": 0}
TARGET_COST = 0.15  # of throughput, for transactions of 1,000 records


def produce(bootstrap: str, topic: str, payloads: list[bytes], transaction_size: int | None,
            transactional_id: str) -> float:
    """Seconds to write ``payloads``, in transactions of ``transaction_size`` (None: no
    transactions)."""
    config = {"bootstrap.servers": bootstrap, **PRODUCER}
    if transaction_size is not None:
        config["transactional.id"] = transactional_id
    producer = Producer(config)
    producer.list_topics(topic, timeout=10)
    if transaction_size is not None:
        producer.init_transactions(30)
    started = time.perf_counter()
    for start in range(0, len(payloads), transaction_size or len(payloads)):
        if transaction_size is not None:
            producer.begin_transaction()
        for value in payloads[start:start + (transaction_size or len(payloads))]:
            while True:
                try:
                    producer.produce(topic, value)
                    break
                except BufferError:
                    producer.poll(0.001)
        if transaction_size is not None:
            producer.commit_transaction(60)
    remaining = producer.flush(120)
    seconds = time.perf_counter() - started
    if remaining:
        raise workloads.WorkloadError(f"{remaining} records not delivered")
    return seconds


def consume(bootstrap: str, topic: str, expected: int, isolation: str) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{isolation}",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "fetch.queue.backoff.ms": workloads.CONSUMER_QUEUE_BACKOFF_MS})
    received = 0
    try:
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = started + 300
        while received < expected and time.perf_counter() < deadline:
            batch = consumer.consume(min(10_000, expected - received), 1)
            received += sum(1 for m in batch if m.error() is None)
        seconds = time.perf_counter() - started
    finally:
        consumer.close()
    if received < expected:
        raise workloads.WorkloadError(f"{isolation}: {received} of {expected} records")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.transactions", description=__doc__)
    parser.add_argument("--records", type=int)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="200,000 records, one run")
    parser.add_argument("--wait-idle", type=float, default=10.0)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    records = args.records or (200_000 if args.quick else 1_000_000)
    runs = 1 if args.quick else args.runs
    console = Console()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    payloads = [os.urandom(RECORD_SIZE) for _ in range(records)]
    port = brokers.free_port(29192)
    broker = brokers.odradek_broker(port, RESULTS_DIR / f"{stamp}-transactions.log", None, [])
    rows: dict[str, list[dict]] = {}
    try:
        broker.start()
        bootstrap = broker.bootstrap
        brokers.wait_until_idle(args.wait_idle)
        for run in range(runs):
            for size in (None, *TRANSACTION_SIZES):
                name = "idempotent" if size is None else f"transactions of {size:,}"
                topic = workloads.unique_topic("txn")
                workloads.create_topic(bootstrap, topic, PARTITIONS)
                cpu = broker.cpu_seconds()
                with console.status(f"run {run + 1}/{runs}: {name}"):
                    seconds = produce(bootstrap, topic, payloads, size, f"bench-{run}-{size}")
                rows.setdefault(name, []).append({
                    "records_per_s": records / seconds,
                    "broker_cpu_s_per_million": (broker.cpu_seconds() - cpu) * 1e6 / records})
                if size == 1_000:
                    for isolation in ("read_uncommitted", "read_committed"):
                        cpu = broker.cpu_seconds()
                        with console.status(f"run {run + 1}/{runs}: consume {isolation}"):
                            seconds = consume(bootstrap, topic, records, isolation)
                        rows.setdefault(f"consume {isolation}", []).append({
                            "records_per_s": records / seconds,
                            "broker_cpu_s_per_million":
                                (broker.cpu_seconds() - cpu) * 1e6 / records})
    finally:
        broker.stop()
    summary = {name: {key: statistics.median(r[key] for r in results)
                      for key in results[0]} for name, results in rows.items()}
    baseline = summary["idempotent"]["records_per_s"]
    consume_baseline = summary["consume read_uncommitted"]["records_per_s"]
    table = Table(title=f"transactions: {records:,} records of {RECORD_SIZE} bytes, "
                        f"{PARTITIONS} partitions, median of {runs}")
    for column in ("workload", "records/s", "vs baseline", "broker CPU-s per M records"):
        table.add_column(column, justify="right" if column != "workload" else "left")
    for name, values in summary.items():
        base = consume_baseline if name.startswith("consume") else baseline
        table.add_row(name, f"{values['records_per_s']:,.0f}",
                      f"{values['records_per_s'] / base:.2f}x",
                      f"{values['broker_cpu_s_per_million']:.2f}")
    console.print(table)
    cost = 1 - summary["transactions of 1,000"]["records_per_s"] / baseline
    verdict = "PASS" if cost <= TARGET_COST else "FAIL"
    console.print(f"transactions of 1,000 records cost {cost:.1%} of throughput "
                  f"(target at most {TARGET_COST:.0%}): {verdict}")
    output = args.output or RESULTS_DIR / f"{stamp}-transactions.json"
    output.write_text(json.dumps({"records": records, "runs": runs, "rows": rows,
                                  "summary": summary, "cost_of_1000": cost}, indent=2))
    console.print(f"written to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
