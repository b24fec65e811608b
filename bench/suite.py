"""``make bench`` (``python -m bench.suite``): the documents' benchmark, side by side.

In one run, one system at a time (the machine has two cores): the machine's own limits,
the client's ceiling (librdkafka's mock cluster in this process), odradek, Tansu and Redis
Streams through the same rows, and odradek's replicated rows. Every figure is measured
``--runs`` times (3 by default); the result document (``bench/results/<timestamp>.json``)
keeps every run, and ``bench.publish`` turns it into ``docs/benchmarks.md`` with plots and
the ratios against the peers of the same run. A ``--quick`` run is short and publishes
into ``bench/results/`` instead, leaving the docs alone.

It measures and never gates: a failed run is recorded with its error, the next row runs,
and the exit code is 0 (130 on Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path

import confluent_kafka
from rich.console import Console

from bench import brokers, c_client, kafka_rows, workloads
from bench.brokers import RESULTS_DIR, Broker
from bench.data_growth import NOTHING_STORED, growth_rows
from bench.machine import machine_rows
from bench.many_clients import many_clients_rows
from bench.many_partitions import partition_rows
from bench.publish import publish
from bench.redis_streams import redis_rows
from bench.replication import replicated_rows
from bench.rows import Row, cost_rows, describe, measure, ratio

ROOT = Path(__file__).resolve().parent.parent
DOCS_MARKDOWN = ROOT / "docs" / "benchmarks.md"
DOCS_IMAGES = ROOT / "docs" / "benchmarks"
# Data growth goes last: the disk is still writing back (and deleting) its 50 GB after it.
SECTIONS = ("machine", "ceiling", "odradek", "tansu", "c-client", "redis", "clients",
            "replication", "partitions", "growth")
FULL = {"records": 1_000_000, "latency_seconds": 10.0, "partitions": 10_000}
QUICK = {"records": 100_000, "latency_seconds": 3.0, "partitions": 1_000}
DEFAULT_PORTS = {"odradek": 29092, "tansu": 19092}
KAFKA_BROKERS = ("odradek", "tansu")
REDIS_RECORDS = 250_000

console = Console(highlight=False, soft_wrap=True)


def progress(text: str) -> None:
    console.print(f"    [dim]{text}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.suite", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK['records']:,} records, short latency runs, "
                        f"{QUICK['partitions']:,} partitions, no replicated rows; published "
                        "into bench/results/, not docs/")
    p.add_argument("--runs", type=int,
                   help="runs per figure (default 3; 1 with --quick, a smoke run)")
    p.add_argument("--records", type=int,
                   help=f"records per throughput run (default {FULL['records']:,})")
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"a comma-separated subset of {','.join(SECTIONS)}")
    p.add_argument("--rdkafka-performance", type=Path, metavar="PATH",
                   help="librdkafka's rdkafka_performance for the C-client rows (default "
                        f"{c_client.DEFAULT_TOOL}, which `make bench-tools` builds; the rows "
                        "are skipped when there is none)")
    p.add_argument("--wait-idle", type=float, default=30.0, metavar="S",
                   help="before each system, wait up to S seconds for the CPUs to calm "
                        "down (default 30, 0 to skip)")
    p.add_argument("--scratch-dir", type=Path,
                   help="where the disk rows and odradek write (default: a temporary "
                        "directory under bench/results, on the disk a broker would use)")
    p.add_argument("--output", type=Path,
                   help="the result document (default bench/results/<timestamp>.json)")
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    if unknown := set(args.sections) - set(SECTIONS):
        p.error(f"unknown sections: {', '.join(sorted(unknown))}")
    args.runs = args.runs or (1 if args.quick else 3)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    preset = QUICK if args.quick else FULL
    args.records = args.records or preset["records"]
    args.latency_seconds = preset["latency_seconds"]
    args.partitions = preset["partitions"]
    return args


def odradek_version() -> str:
    """The package's version and the commit measured (``-dirty``: with changes not in it)."""
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    return f"{importlib.metadata.version('odradek')} ({commit or 'no git'})"


def machine_facts(scratch: Path) -> dict:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    memory_kib = next(int(line.split()[1]) for line in
                      Path("/proc/meminfo").read_text().splitlines()
                      if line.startswith("MemTotal:"))
    disk = shutil.disk_usage(scratch)
    return {"cpus": os.cpu_count(), "cpu_model": model,
            "memory_gib": round(memory_kib / 2**20, 1), "kernel": platform.release(),
            "python": platform.python_version(),
            "confluent_kafka": f"{confluent_kafka.version()} / librdkafka "
                               f"{confluent_kafka.libversion()[0]}",
            "disk": f"{disk.free / 1e9:.0f} GB free of {disk.total / 1e9:.0f} GB "
                    f"under {scratch.parent}"}


class Suite:
    """One run of the suite: its rows, as they come, and where they are written."""

    def __init__(self, args: argparse.Namespace, stamp: str, scratch: Path) -> None:
        self.args = args
        self.stamp = stamp
        self.scratch = scratch
        self.rows: list[Row] = []
        self.systems: dict[str, str] = {}
        self.notes: list[str] = []
        self.settings = workloads.Settings(records=args.records,
                                           latency_seconds=args.latency_seconds)

    def add(self, rows: list[Row]) -> None:
        """A system's rows, with the cost rows derived from them."""
        for row in rows + cost_rows(rows):
            self.rows.append(row)
            console.print(f"    {describe(row)}", markup=False)

    def section(self, title: str, measure: Callable[[], None]) -> None:
        console.rule(f"[bold]{title}")
        if self.args.wait_idle > 0:
            busy = brokers.wait_until_idle(self.args.wait_idle)
            if busy is not None and busy > 0.25:
                self.notes.append(f"{title}: the CPUs were {busy:.0%} busy before it began")
        started = time.monotonic()
        try:
            measure()
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # a section that cannot run is reported, not fatal
            console.print(f"    [red]{title} failed: {exc}")
            self.notes.append(f"{title} failed: {type(exc).__name__}: {exc}".splitlines()[0])
        console.print(f"    [dim]{time.monotonic() - started:.0f} s")

    # -- the sections ---------------------------------------------------------------------

    def machine(self) -> None:
        self.add(machine_rows(self.args.runs, self.args.quick, self.scratch))

    def ceiling(self) -> None:
        payloads = workloads.make_payloads(self.settings.records, self.settings.record_size)
        row = Row("throughput", "one producer", "client ceiling", "records/s",
                  note="confluent-kafka to librdkafka's mock cluster in the same process")

        def once() -> dict:
            result = workloads.client_ceiling(self.settings, payloads)
            return {"value": result["records_per_s"], "mb_per_s": result["mb_per_s"]}

        measure(row, self.args.runs, once)
        self.systems["client ceiling"] = (
            f"confluent-kafka {confluent_kafka.version()} with "
            "test.mock.num.brokers=1 (librdkafka's in-process mock broker)")
        self.add([row])

    def kafka_brokers(self) -> None:
        with self.kafka_brokers_running() as running:
            self.add(kafka_rows.kafka_rows(running, self.settings, self.args.runs,
                                           self.args.quick, progress))

    def c_client(self) -> None:
        tool = c_client.find_tool(self.args.rdkafka_performance)
        if tool is None:
            self.notes.append(f"the C-client and small-request rows were skipped: no "
                              f"{c_client.DEFAULT_TOOL} (`make bench-tools` builds it)")
            console.print(f"    [yellow]skipped: no {c_client.DEFAULT_TOOL}")
            return
        self.systems["C client"] = c_client.tool_version(tool)
        with self.kafka_brokers_running() as running:
            self.add(c_client.c_client_rows(tool, running, self.args.runs, self.args.quick,
                                            progress))

    def growth(self) -> None:
        self.add(growth_rows(self.settings, self.args.runs, self.args.quick, self.scratch,
                             progress))

    def redis(self) -> None:
        records = min(self.args.records, REDIS_RECORDS)
        if records < self.args.records:
            self.notes.append(f"Redis Streams' throughput rows move {records:,} records, not "
                              f"{self.args.records:,}: redis-py's pace (50-80k a second from "
                              "one client) would make them the longest part of the run")
        self.add(redis_rows(self.args.runs, self.args.quick, records, self.scratch))
        self.systems["redis (appendonly no)"] = self.systems["redis (appendonly everysec)"] = (
            brokers.tool_version(["redis-server", "--version"]))

    def replication(self) -> None:
        self.add(replicated_rows(self.settings, self.args.runs))

    def many_clients(self) -> None:
        with self.kafka_brokers_running() as running:
            self.add(many_clients_rows(running, self.args.runs, self.args.quick))

    @contextmanager
    def kafka_brokers_running(self) -> Iterator[list[Broker]]:
        """The Kafka brokers the sections name (both when they name neither), all started,
        all stopped afterwards."""
        names = [name for name in KAFKA_BROKERS if name in self.args.sections]
        with ExitStack() as stack:
            yield [stack.enter_context(self.broker(name)) for name in names or KAFKA_BROKERS]

    def partitions(self) -> None:
        self.add(partition_rows(self.args.partitions, self.args.runs, self.scratch, progress))

    @contextmanager
    def broker(self, name: str) -> Iterator[Broker]:
        log = RESULTS_DIR / f"{self.stamp}-{name}.log"
        port = brokers.free_port(DEFAULT_PORTS[name])
        if name == "tansu":
            broker = brokers.tansu_broker(port, log)
            self.systems[name] = (brokers.tool_version([brokers.find_tansu(), "--version"])
                                  + ", memory storage (--storage-engine memory://)")
        else:
            # odradek_broker removes the temporary data directory it makes when it stops.
            broker = brokers.odradek_broker(port, log, None, [])
            self.systems[name] = (f"odradek {odradek_version()}, one broker, data on disk "
                                  "(page cache, no fsync)")
        try:
            broker.start()
            yield broker
        finally:
            broker.stop()

    def run(self) -> None:
        steps = {
            "machine": ("the machine's limits", self.machine),
            "ceiling": ("the client's ceiling", self.ceiling),
            "odradek": ("odradek and Tansu, run by run", self.kafka_brokers),
            "c-client": ("odradek and Tansu through librdkafka's C client", self.c_client),
            "redis": ("Redis Streams", self.redis),
            "clients": ("many clients", self.many_clients),
            "growth": ("odradek as the data stored grows", self.growth),
            "replication": ("odradek, three brokers", self.replication),
            "partitions": ("odradek, many partitions", self.partitions),
        }
        if "tansu" in self.args.sections and "odradek" not in self.args.sections:
            steps["tansu"] = steps["odradek"]
        for key in SECTIONS:
            if key in steps and key in self.args.sections \
                    and not (key == "replication" and self.args.quick):
                title, measure = steps[key]
                self.section(title, measure)


# --------------------------------------------------------------------------- targets


def find(rows: list[Row], name: str, system: str) -> Row | None:
    return next((r for r in rows if r.name == name and r.system == system), None)


def targets(rows: list[Row]) -> list[dict]:
    """The issue's targets, each judged on the medians of this run (None: not measured)."""
    odradek = {row.name: row for row in rows if row.system == "odradek"}
    tansu = {row.name: row for row in rows if row.system == "tansu"}
    out = []

    def judge(text: str, value: float | None, bound: float, at_least: bool,
              note: str = "") -> None:
        met = None if value is None else (value >= bound if at_least else value <= bound)
        out.append({"text": text, "value": value, "bound": bound, "met": met, "note": note})

    def ratio_of(name: str, peer: Row | None) -> float | None:
        row = odradek.get(name)
        return None if row is None else ratio(row, peer)

    ceiling = find(rows, "one producer", "client ceiling")
    produce = odradek.get("one producer")
    judge("one producer: at least 90% of the client's ceiling",
          None if produce is None or ceiling is None or not ceiling.median
          or produce.median is None else produce.median / ceiling.median, 0.9, True)
    judge("one producer: above Tansu", ratio_of("one producer", tansu.get("one producer")),
          1.0, True, "odradek ÷ Tansu")
    judge("broker CPU per million records produced: at most Tansu's",
          ratio_of("CPU-s per million records produced",
                   tansu.get("CPU-s per million records produced")), 1.0, True,
          "Tansu's CPU ÷ odradek's")
    judge("broker CPU per million records consumed: at most half of Tansu's",
          ratio_of("CPU-s per million records consumed",
                   tansu.get("CPU-s per million records consumed")), 2.0, True,
          "Tansu's CPU ÷ odradek's")
    judge("one consumer: at least Tansu's rate",
          ratio_of("one consumer", tansu.get("one consumer")), 1.0, True, "odradek ÷ Tansu")
    judge("one consumer with the C client: at least 1.5x Tansu's rate",
          ratio_of("one consumer (C client)", tansu.get("one consumer (C client)")), 1.5, True,
          "odradek ÷ Tansu")
    per_core = odradek.get("requests per broker CPU-second")
    judge("small requests: at least 20,000 single-record produce requests/s from one broker "
          "core", per_core.median if per_core else None, 20_000, True,
          "requests per broker CPU-second")
    latency = odradek.get("end-to-end at 2,000 records/s")
    for key, label, bound in (("value", "p50", 1.0), ("p99_ms", "p99", 3.0),
                              ("p999_ms", "p99.9", 10.0)):
        summary = latency.stat(key) if latency else None
        judge(f"end-to-end latency at 2,000 records/s: {label} at most {bound:g} ms",
              None if summary is None else summary["median"], bound, False, "ms")
    # The C client's fetch when it ran: the Python client's is bounded by the client. The
    # loopback limit is the faster of the machine's two ways to fill a socket, sendfile
    # being the one the broker's fetch path takes.
    large = odradek.get("1 MiB records (C client)") or odradek.get("1 MiB records")
    loopbacks = [row.median for name in ("loopback TCP", "loopback TCP (sendfile)")
                 if (row := find(rows, name, "machine")) is not None and row.median]
    judge("1 MiB records: fetch at least 50% of loopback bandwidth",
          None if large is None or not loopbacks or large.median is None
          else large.median / max(loopbacks), 0.5, True,
          f"{large.name if large else '1 MiB records'}: fetch MB/s ÷ the faster loopback "
          "MB/s")
    fresh = {row.name: row for row in rows if row.system == NOTHING_STORED}
    stored, growth = growth_ratio(odradek, fresh)
    _, sequential = growth_ratio(odradek, {})
    judge(f"throughput at {stored or 50} GB stored within 10% of throughput at 0 GB", growth,
          0.9, True, "the lower of producer and consumer: at that level ÷ a fresh broker's, "
          "measured run by run beside it" + (
              "" if sequential is None or not fresh
              else f" (÷ the first 0 GB rows, minutes earlier: {sequential:.3f})"))
    clients = next((row for row in rows if row.section == "many clients"
                    and row.system == "odradek" and "1,000 idle" in row.name), None)
    judge("many clients: probe p99 at most 10 ms", clients.median if clients else None,
          10.0, False, "ms")
    restart = next((row for row in rows if row.section == "many partitions"
                    and row.name == "restart with 10,000 partitions"), None)
    judge("restart with 10,000 partitions after a clean shutdown: at most 3 s",
          restart.median if restart else None, 3.0, False, "s")
    return out


def growth_ratio(odradek: dict[str, Row], fresh: dict[str, Row]
                 ) -> tuple[int | None, float | None]:
    """The most GB the data-growth rows reached, and the lower of the producer's and the
    consumer's median there over the median of the fresh broker measured beside them (of
    ``fresh``), or at 0 GB when there is none (None, None: not measured)."""
    levels = [int(match.group(1)) for name in odradek
              if (match := re.fullmatch(r"one producer at (\d+) GB", name))]
    if not levels or max(levels) == 0:
        return None, None
    top, ratios = max(levels), []
    for client in ("producer", "consumer"):
        full = odradek.get(f"one {client} at {top} GB")
        empty = fresh.get(f"one {client} at {top} GB") or odradek.get(f"one {client} at 0 GB")
        if empty is None or full is None or not empty.median or full.median is None:
            return top, None
        ratios.append(full.median / empty.median)
    return top, min(ratios)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workloads.install_signal_handlers()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    output = args.output or RESULTS_DIR / f"{stamp}{'-quick' if args.quick else ''}.json"
    scratch = Path(tempfile.mkdtemp(prefix="bench-scratch-",
                                    dir=args.scratch_dir or RESULTS_DIR))
    suite = Suite(args, stamp, scratch)
    document = {"started": stamp, "quick": args.quick, "runs": args.runs,
                "records": args.records,
                "command": "python -m bench.suite " + shlex.join(argv or sys.argv[1:]),
                "machine": machine_facts(scratch)}
    interrupted = False
    try:
        suite.run()
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted: writing what was measured")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    document.update({
        "finished": datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"),
        "systems": suite.systems, "rows": [row.to_json() for row in suite.rows],
        "targets": targets(suite.rows), "notes": suite.notes})
    output.write_text(json.dumps(document, indent=1, default=str) + "\n")
    console.print(f"results: {output}")
    if args.quick or interrupted:
        markdown, images = output.with_suffix(".md"), output.with_suffix("")
    else:
        markdown, images = DOCS_MARKDOWN, DOCS_IMAGES
    for path in publish(document, markdown, images):
        console.print(f"wrote {path}")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
