"""End-to-end latency while the log cleaner works, against the same broker without it.

    .venv/bin/python -m bench.compaction_latency [--seconds S] [--churn-rate R]

The latency workload of `python -m bench` (100-byte records at 2,000/s, an assigned
consumer, p50/p99/p99.9) runs on an idle broker, then while another producer overwrites
1,000 keys of a compacted topic with small segments and a low dirty ratio — once with the
cleaner off and once, on a fresh broker, with it compacting throughout the measurement —
so the cleaner's own cost is the difference between the last two rows. The broker's log
tells how many cleaning rounds ran during the measurement.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.brokers import free_port, odradek_broker
from bench.workloads import Settings, end_to_end_latency

CHURN_TOPIC = "compaction-churn"
CHURN_KEYS = 1_000
CHURN_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(256 * 1024),
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
}


def churn(bootstrap: str, rate: int, stop: threading.Event) -> int:
    """Overwrites CHURN_KEYS keys at ``rate`` records/s until ``stop``; returns the count."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 2})
    value = os.urandom(100)
    sent = 0
    started = time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - started) * rate)
        while sent < due:
            try:
                producer.produce(CHURN_TOPIC, value, key=b"key-%d" % (sent % CHURN_KEYS))
            except BufferError:
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0.001)
    producer.flush(30)
    return sent


def cleaning_rounds(log_path: Path) -> int:
    return sum("cleaned" in line.lower() for line in log_path.read_text(errors="replace").splitlines())


def measure(settings: Settings, churn_rate: int, cleaner: bool) -> tuple[dict, dict, int, int]:
    """(latency alone, latency under churn, churned records, cleaning rounds) on a fresh
    broker with the cleaner on or off."""
    with tempfile.TemporaryDirectory() as scratch:
        log_path = Path(scratch) / "odradek.log"
        broker = odradek_broker(free_port(29093), log_path, None,
                                [f"log.cleaner.enable={str(cleaner).lower()}",
                                 "log.cleaner.backoff.ms=200"])
        broker.start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(CHURN_TOPIC, 1, 1, config=CHURN_TOPIC_CONFIGS)])[
                CHURN_TOPIC].result(30)
            alone = end_to_end_latency(broker.bootstrap, settings)
            stop = threading.Event()
            counted: list[int] = []
            writer = threading.Thread(
                target=lambda: counted.append(churn(broker.bootstrap, churn_rate, stop)))
            writer.start()
            time.sleep(3)  # let segments roll and the first cleaning rounds start
            rounds_before = cleaning_rounds(log_path)
            during = end_to_end_latency(broker.bootstrap, settings)
            rounds = cleaning_rounds(log_path) - rounds_before
            stop.set()
            writer.join()
        finally:
            broker.stop()
    return alone, during, counted[0], rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--churn-rate", type=int, default=20_000)
    args = parser.parse_args()
    settings = Settings(latency_seconds=args.seconds)

    alone, churn_only, _, _ = measure(settings, args.churn_rate, cleaner=False)
    _, compacting, churned, rounds = measure(settings, args.churn_rate, cleaner=True)

    print(f"end-to-end latency, {settings.latency_rate} records/s for {args.seconds:.0f} s")
    print(f"{'':38}{'p50 ms':>10}{'p99 ms':>10}{'p99.9 ms':>10}")
    for name, result in (("idle broker", alone),
                         ("keyed churn, cleaner off", churn_only),
                         ("keyed churn, cleaner compacting", compacting)):
        print(f"{name:38}{result['p50_ms']:>10.2f}{result['p99_ms']:>10.2f}"
              f"{result['p999_ms']:>10.2f}")
    print(f"churn: {args.churn_rate:,} keyed records/s to {CHURN_TOPIC} "
          f"({churned:,} in the cleaner run); {rounds} cleaning rounds during the measurement")


if __name__ == "__main__":
    main()
