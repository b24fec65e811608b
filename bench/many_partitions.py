"""10,000 partitions on one broker: open file descriptors and memory of the idle broker.

    .venv/bin/python -m bench.many_partitions [--partitions 10000] [--runs 3] [--dir /tmp]

Starts ``odradek broker`` on a temporary directory (removed at the end), creates the
partitions with ``AdminClient.create_topics`` (100 topics of 100 partitions, ten topics a
request), produces one record to each, lets the broker idle, then reads its open descriptors
(``/proc/<pid>/fd``) and resident memory (``VmRSS``). The broker is then restarted (clean
shutdown first) ``--runs`` times, each time measuring how long it took to listen and how
long until the partitions whose loading the start deferred were all loaded. A Kafka
broker keeps three descriptors per segment open, 30,000 here; ``ulimit -n`` is printed for
comparison.
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
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from bench.rows import Row, describe

PARTITIONS_PER_TOPIC = 100
TOPICS_PER_REQUEST = 10
IDLE_SECONDS = 3
TIMEOUT_SECONDS = 600
LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)")
ALL_LOADED = re.compile(r"loaded the \d+ partitions deferred at startup")


class Broker:
    def __init__(self, data_dir: Path) -> None:
        odradek = str(Path(sys.executable).with_name("odradek"))
        self.log_path = data_dir.parent / "broker.log"
        with open(self.log_path, "w") as log:
            self.started = time.perf_counter()
            self.process = subprocess.Popen(
                [odradek, "broker", "--set", "listeners=PLAINTEXT://127.0.0.1:0",
                 "--set", f"log.dirs={data_dir}"], stdout=log, stderr=subprocess.STDOUT)
        listening = self._wait_for(LISTENING, "broker did not start")
        self.startup_seconds = self.elapsed()
        self.bootstrap = f"127.0.0.1:{listening.group(1)}"

    def wait_for_all_loaded(self) -> float:
        """Seconds from the start until the broker says every deferred log has loaded."""
        self._wait_for(ALL_LOADED, "the logs never loaded")
        return self.elapsed()

    def _wait_for(self, line: re.Pattern[str], failure: str) -> re.Match[str]:
        while not (found := line.search(self.log_path.read_text())):
            if self.process.poll() is not None or self.elapsed() > TIMEOUT_SECONDS:
                raise RuntimeError(f"{failure}: {self.log_path.read_text()}")
            time.sleep(0.05)
        return found

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


def partition_rows(partitions: int, runs: int, scratch_dir: Path,
                   progress: Callable[[str], None] = print) -> list[Row]:
    """The suite's "many partitions" rows: open descriptors and RSS of the idle broker
    holding ``partitions`` (one record each), and the time to listen again after a clean
    shutdown and to have loaded every log, ``runs`` restarts."""
    files = Row("many partitions", f"open files with {partitions:,} partitions", "odradek",
                "files", higher_is_better=False)
    memory = Row("many partitions", f"resident memory with {partitions:,} partitions",
                 "odradek", "MB", higher_is_better=False)
    restart = Row("many partitions", f"restart with {partitions:,} partitions", "odradek",
                  "s", higher_is_better=False, note="to listening, after a clean shutdown")
    loaded = Row("many partitions", f"restart with {partitions:,} partitions, all loaded",
                 "odradek", "s", higher_is_better=False,
                 note="until the logs the start deferred are loaded, serving meanwhile")
    root = Path(tempfile.mkdtemp(prefix="odradek-many-partitions-", dir=scratch_dir))
    try:
        broker = Broker(root / "data")
        try:
            progress(f"creating {partitions:,} partitions")
            produce_one_to_each(broker.bootstrap, create_partitions(broker.bootstrap,
                                                                    partitions))
            time.sleep(IDLE_SECONDS)
            files.runs.append({"value": broker.open_descriptors()})
            memory.runs.append({"value": broker.rss_megabytes()})
        finally:
            broker.stop()
        for run in range(1, runs + 1):
            progress(f"restart {run} of {runs}")
            broker = Broker(root / "data")
            try:
                loaded.runs.append({"value": broker.wait_for_all_loaded()})
            finally:
                broker.stop()
            restart.runs.append({"value": broker.startup_seconds})
    finally:
        shutil.rmtree(root)
    return [files, memory, restart, loaded]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3, help="restarts measured (default 3)")
    parser.add_argument("--dir", default=None, help="where the temporary data dir goes")
    args = parser.parse_args()
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"ulimit -n: {soft}")
    for row in partition_rows(args.partitions, args.runs, args.dir and Path(args.dir)):
        print(describe(row))


if __name__ == "__main__":
    main()
