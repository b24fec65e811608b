"""The rows no Python client caps: librdkafka's own load tool, ``rdkafka_performance``, a C
program, producing and consuming millions of records, and sending single-record Produce
requests, against each Kafka broker of the suite.

    .venv/bin/python -m bench.c_client [--tool PATH] [--runs N] [--quick]

``make bench-tools`` builds the tool into ``bench/.tools/rdkafka_performance`` from
librdkafka's source as the npm registry carries it (inside ``node-rdkafka``); ``--tool``
names another build (librdkafka 2.12 or newer: Debian's 2.0.2 cannot talk to Tansu). When
there is none the rows are skipped, and the suite says so.

- **C client, one producer / one consumer**: ``records`` 100-byte records into a new
  6-partition topic (``linger.ms=5``, ``batch.size=1000000``, ``acks=1``), then read back
  from the beginning of every partition by one consumer; records/s as the tool reports
  them, with the broker's CPU-seconds per million records. The consumer is held to one
  core (``CONSUMER_CORE``), whatever the broker: its two busy threads, spread over two
  cores, contend for glibc's malloc lock (librdkafka's broker thread allocates each message,
  the application thread frees it), and the tool then falls, for minutes at a time and
  with any broker, into spells at half its speed that measure the client, not the broker.
- **1 MiB records (C client)**: the large-records row without Python: 1,000 records of
  1 MiB (200 with ``--quick``) into one partition, then fetched up to 16 MiB at a time; the
  fetch's MB/s, with the produce's beside it.
- **single-record produce requests**: ``requests`` records into a one-partition topic with
  ``linger.ms=0`` and ``batch.num.messages=1``, so that each Produce request carries one
  record (librdkafka still pipelines up to five requests per connection); requests/s, and
  the broker's CPU per request as "requests per broker CPU-second", which is what one broker
  core could serve.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench import brokers, workloads
from bench.brokers import BENCH_DIR, Broker
from bench.kafka_rows import LARGE_FETCH, LARGE_RECORD, LARGE_TOPIC_CONFIG, with_broker_cost
from bench.rows import Row, Run, describe, failed_run, measure
from bench.workloads import MB, WorkloadError

DEFAULT_TOOL = BENCH_DIR / ".tools" / "rdkafka_performance"
PARTITIONS = 6
RECORD_SIZE = 100
FULL = {"records": 5_000_000, "requests": 50_000, "large": 1_000}
QUICK = {"records": 500_000, "requests": 10_000, "large": 200}
PRODUCER = ["-X", "linger.ms=5", "-X", "batch.size=1000000", "-a", "1"]
SINGLE_RECORD = ["-X", "linger.ms=0", "-X", "batch.num.messages=1"]
# 1 MiB records as the Python row sends and fetches them (kafka_rows.large_records).
LARGE_PRODUCER = ["-X", "linger.ms=5", "-X", f"message.max.bytes={2 * LARGE_RECORD + 1024}",
                  "-a", "1"]
LARGE_CONSUMER = ["-X", f"max.partition.fetch.bytes={LARGE_FETCH['max.partition.fetch.bytes']}",
                  "-X", f"fetch.max.bytes={LARGE_FETCH['fetch.max.bytes']}",
                  "-X", f"receive.message.max.bytes={2 * LARGE_FETCH['fetch.max.bytes']}"]
TIMEOUT_S = 300
# The core the C consumer runs on (the module's docstring says why): the last one this
# process may use, so that on two cores the broker mostly keeps the other.
CONSUMER_CORE = max(os.sched_getaffinity(0))
# The tool's closing lines, e.g. "% 5000000 messages produced (500000000 bytes), 5000000
# delivered (offset 0, 0 failed) in 5512ms: 907112 msgs/s and 90.71 MB/s, ..." and
# "% 5000000 messages (500000000 bytes) consumed in 2266ms: 2206531 msgs/s (220.65 MB/s)".
PRODUCED = re.compile(r"(\d+) delivered \(offset -?\d+, (\d+) failed\) in (\d+)ms: "
                      r"(\d+) msgs/s")
CONSUMED = re.compile(r"(\d+) messages \(\d+ bytes\) consumed in (\d+)ms: (\d+) msgs/s")


def find_tool(path: Path | None = None) -> Path | None:
    """The ``rdkafka_performance`` to run: ``path`` when given (it must exist), else the one
    ``make bench-tools`` built, else None."""
    if path is not None:
        if not path.is_file():
            raise FileNotFoundError(f"no rdkafka_performance at {path}")
        return path
    return DEFAULT_TOOL if DEFAULT_TOOL.is_file() else None


def tool_version(tool: Path) -> str:
    """The librdkafka version the tool was built with, from its usage text."""
    usage = subprocess.run([str(tool)], capture_output=True, text=True, timeout=20)
    found = re.search(r"librdkafka version (\S+)", usage.stdout + usage.stderr)
    return f"rdkafka_performance (librdkafka {found.group(1) if found else 'unknown'})"


def run_tool(tool: Path, bootstrap: str, args: list[str], core: int | None = None) -> str:
    """The tool's output for one run against the brokers at ``bootstrap``, on ``core`` alone
    when given; a non-zero exit or a timeout is a WorkloadError."""
    argv = [str(tool), "-b", bootstrap, *args]
    if core is not None:
        argv = ["taskset", "--cpu-list", str(core), *argv]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise WorkloadError(f"rdkafka_performance ran over {TIMEOUT_S} s") from exc
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise WorkloadError(f"rdkafka_performance exited {done.returncode}: "
                            f"{output.strip().splitlines()[-1:]}")
    return output


def produced(output: str, records: int) -> dict:
    """records/s of a producer run whose every record was delivered."""
    found = PRODUCED.findall(output)
    if not found:
        raise WorkloadError(f"no producer summary in: {output[-300:]!r}")
    delivered, failed, _, per_s = (int(group) for group in found[-1])
    if delivered != records or failed:
        raise WorkloadError(f"{delivered} of {records} records delivered, {failed} failed")
    return {"records_per_s": per_s}


def consumed(output: str, records: int) -> dict:
    """records/s of a consumer run that read every record."""
    found = CONSUMED.findall(output)
    if not found:
        raise WorkloadError(f"no consumer summary in: {output[-300:]!r}")
    count, _, per_s = (int(group) for group in found[-1])
    if count != records:
        raise WorkloadError(f"consumed {count} of {records} records")
    return {"records_per_s": per_s}


class Rows:
    """The C-client rows of one broker."""

    def __init__(self, system: str) -> None:
        note = "librdkafka's rdkafka_performance"
        self.produce = Row("C client", "one producer (C client)", system, "records/s",
                           note=note)
        self.consume = Row("C client", "one consumer (C client)", system, "records/s",
                           note=f"{note}, on one core")
        self.requests = Row("small requests", "single-record produce requests", system,
                            "requests/s", note="linger.ms=0, batch.num.messages=1")
        self.per_core = Row("small requests", "requests per broker CPU-second", system,
                            "requests/s", note="what one broker core would serve")
        self.large = Row("C client", "1 MiB records (C client)", system, "MB/s",
                         note="fetch; produce beside it")

    def all(self) -> list[Row]:
        return [self.produce, self.consume, self.large, self.requests, self.per_core]


def c_client_rows(tool: Path, running: list[Broker], runs: int, quick: bool,
                  progress: Callable[[str], None] = print) -> list[Row]:
    """Every C-client row of the running brokers, run by run, broker after broker."""
    size = QUICK if quick else FULL
    rows = {broker.name: Rows(broker.name) for broker in running}
    for run in range(1, runs + 1):
        for broker in running:
            progress(f"{broker.name}: C client, run {run} of {runs}")
            of = rows[broker.name]
            try:
                produce_run, consume_run = produce_then_consume(tool, broker, size["records"])
            except Exception as exc:  # a failed run is reported, not fatal
                produce_run = consume_run = failed_run(exc)
            of.produce.runs.append(produce_run)
            of.consume.runs.append(consume_run)
            measure(of.large, 1, lambda: large_records(tool, broker, size["large"]))
            try:
                requests_run = single_record_requests(tool, broker, size["requests"])
                per_core_run = {"value": requests_run["requests_per_cpu_s"]}
            except Exception as exc:  # a failed run is reported, not fatal
                requests_run = per_core_run = failed_run(exc)
            of.requests.runs.append(requests_run)
            of.per_core.runs.append(per_core_run)
    return [row for of in rows.values() for row in of.all()]


def produce_then_consume(tool: Path, broker: Broker, records: int) -> tuple[Run, Run]:
    topic = workloads.unique_topic("c-client")
    workloads.create_topic(broker.bootstrap, topic, PARTITIONS)
    produce_run = with_broker_cost(broker, records, lambda: produced(run_tool(
        tool, broker.bootstrap, ["-P", "-t", topic, "-s", str(RECORD_SIZE), "-c", str(records),
                       *PRODUCER]), records))
    partitions = [arg for p in range(PARTITIONS) for arg in ("-p", str(p))]
    consume_run = with_broker_cost(broker, records, lambda: consumed(run_tool(
        tool, broker.bootstrap, ["-C", "-t", topic, *partitions, "-o", "beginning", "-e",
                       "-c", str(records)], core=CONSUMER_CORE), records))
    for run in (produce_run, consume_run):
        run["value"] = run["records_per_s"]
    return produce_run, consume_run


def large_records(tool: Path, broker: Broker, count: int) -> Run:
    """``count`` 1 MiB records into a one-partition topic and read back: MB/s each way, the
    fetch being the row's figure, against the machine's loopback limit."""
    topic = workloads.unique_topic("c-client-large")
    workloads.create_topic(broker.bootstrap, topic, 1, config=LARGE_TOPIC_CONFIG)
    produce = produced(run_tool(tool, broker.bootstrap, [
        "-P", "-t", topic, "-p", "0", "-s", str(LARGE_RECORD), "-c", str(count),
        *LARGE_PRODUCER]), count)
    run = with_broker_cost(broker, count, lambda: consumed(run_tool(tool, broker.bootstrap, [
        "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-c", str(count),
        *LARGE_CONSUMER]), count))
    megabytes = LARGE_RECORD / MB
    return {"value": run["records_per_s"] * megabytes,
            "produce_mb_per_s": produce["records_per_s"] * megabytes, "records": count,
            "broker_cpu_s": run["broker_cpu_s"]}


def single_record_requests(tool: Path, broker: Broker, requests: int) -> Run:
    topic = workloads.unique_topic("single-record")
    workloads.create_topic(broker.bootstrap, topic, 1)
    run = with_broker_cost(broker, requests, lambda: produced(run_tool(
        tool, broker.bootstrap, ["-P", "-t", topic, "-p", "0", "-s", str(RECORD_SIZE),
                       "-c", str(requests), *SINGLE_RECORD]), requests))
    run["value"] = run["records_per_s"]
    run["broker_us_per_request"] = run["broker_cpu_s"] / requests * 1e6
    run["requests_per_cpu_s"] = requests / run["broker_cpu_s"]
    return run


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.c_client",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--tool", type=Path, help=f"the tool (default {DEFAULT_TOOL})")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK['records']:,} records, {QUICK['requests']:,} requests")
    args = parser.parse_args()
    tool = find_tool(args.tool)
    if tool is None:
        parser.error(f"no {DEFAULT_TOOL}: `make bench-tools` builds it, or give --tool")
    workloads.install_signal_handlers()
    with brokers.odradek_and_tansu(Path(tempfile.mkdtemp(prefix="bench-c-client-"))) \
            as running:
        for row in c_client_rows(tool, running, args.runs, args.quick):
            print(describe(row))

if __name__ == "__main__":
    main()
