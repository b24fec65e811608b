"""10,000 partitions on one broker: open file descriptors and memory of the idle broker.

    .venv/bin/python -m bench.many_partitions [--partitions 10000] [--dir /tmp]

Starts ``odradek broker`` on a temporary directory (removed at the end), creates the
partitions with ``AdminClient.create_topics`` (100 topics of 100 partitions, ten topics a
request), produces one record to each, lets the broker idle, then reads its open descriptors
(``/proc/<pid>/fd``) and resident memory (``VmRSS``). The broker is then restarted (clean
shutdown first) and measured again, with how long it took to start. A Kafka broker keeps
three descriptors per segment open, 30,000 here; ``ulimit -n`` is printed for comparison.
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS_PER_TOPIC = 100
TOPICS_PER_REQUEST = 10
IDLE_SECONDS = 3
TIMEOUT_SECONDS = 600
LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)")


class Broker:
    def __init__(self, data_dir: Path) -> None:
        odradek = str(Path(sys.executable).with_name("odradek"))
        self.log_path = data_dir.parent / "broker.log"
        with open(self.log_path, "w") as log:
            self.started = time.perf_counter()
            self.process = subprocess.Popen(
                [odradek, "broker", "--set", "listeners=PLAINTEXT://127.0.0.1:0",
                 "--set", f"log.dirs={data_dir}"], stdout=log, stderr=subprocess.STDOUT)
        while not (listening := LISTENING.search(self.log_path.read_text())):
            if self.process.poll() is not None or self.elapsed() > TIMEOUT_SECONDS:
                raise RuntimeError(f"broker did not start: {self.log_path.read_text()}")
            time.sleep(0.05)
        self.startup_seconds = self.elapsed()
        self.bootstrap = f"127.0.0.1:{listening.group(1)}"

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def open_descriptors(self) -> int:
        return len(list(Path(f"/proc/{self.process.pid}/fd").iterdir()))

    def rss_megabytes(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024

    def stop(self) -> None:
        self.process.terminate()
        if self.process.wait(TIMEOUT_SECONDS) != 0:
            raise RuntimeError(f"broker failed: {self.log_path.read_text()[-2000:]}")


def create_partitions(bootstrap: str, partitions: int) -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(f"many-{i:03d}", PARTITIONS_PER_TOPIC, 1)
              for i in range(partitions // PARTITIONS_PER_TOPIC)]
    for start in range(0, len(topics), TOPICS_PER_REQUEST):
        chunk = topics[start : start + TOPICS_PER_REQUEST]
        for future in admin.create_topics(chunk, operation_timeout=TIMEOUT_SECONDS).values():
            future.result(TIMEOUT_SECONDS)
    return [topic.topic for topic in topics]


def produce_one_to_each(bootstrap: str, topics: list[str]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                                         "queue.buffering.max.messages": 100_000})
    failures = []
    for topic in topics:
        for partition in range(PARTITIONS_PER_TOPIC):
            producer.produce(topic, b"one record", partition=partition,
                             on_delivery=lambda error, _: error and failures.append(error))
        producer.poll(0)
    if producer.flush(TIMEOUT_SECONDS) or failures:
        raise RuntimeError(f"{len(failures)} records failed: {failures[:3]}")


def measure(broker: Broker, label: str) -> None:
    time.sleep(IDLE_SECONDS)
    print(f"{label:<34}{broker.open_descriptors():>8} fds{broker.rss_megabytes():>10.0f} MB RSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--dir", default=None, help="where the temporary data dir goes")
    args = parser.parse_args()
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"ulimit -n: {soft}")
    root = Path(tempfile.mkdtemp(prefix="odradek-many-partitions-", dir=args.dir))
    data_dir = root / "data"
    try:
        broker = Broker(data_dir)
        try:
            measure(broker, "empty broker")
            started = time.perf_counter()
            topics = create_partitions(broker.bootstrap, args.partitions)
            print(f"created {args.partitions} partitions in "
                  f"{time.perf_counter() - started:.1f} s")
            started = time.perf_counter()
            produce_one_to_each(broker.bootstrap, topics)
            print(f"produced one record to each in {time.perf_counter() - started:.1f} s")
            measure(broker, f"{args.partitions} partitions, idle")
        finally:
            broker.stop()
        broker = Broker(data_dir)
        try:
            print(f"restart (clean shutdown) took {broker.startup_seconds:.1f} s to listen")
            measure(broker, "after the restart, idle")
        finally:
            broker.stop()
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
