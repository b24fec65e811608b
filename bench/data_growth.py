"""Cost as data grows: one producer's and one consumer's throughput while the broker holds 0,
5, 20 and 50 GB (or what the disk allows), on one fresh data directory filled between the
levels. The documents' claim is that appends and reads are O(1) "however much data is
stored"; the table and its plot show whether that holds.

    .venv/bin/python -m bench.data_growth [--quick] [--runs N] [--dir DIR]

The broker's data directory is under ``--dir`` (the suite's scratch directory, on the disk a
broker would use). Between levels a separate 6-partition topic is filled with 1 MiB records
(untimed) until the data directory holds the level's bytes, and the page cache is synced to
disk so that the fill's writeback does not weigh on the measurement. At each level the
suite's one-producer and one-consumer workloads run ``--runs`` times on new topics, each run
recording the GB stored and the broker's CPU per million records.

Above 0 GB, a second broker, started for the level on a fresh data directory on the same
disk, runs the same workloads run by run beside the filled one: filled, fresh, filled,
fresh. Its rows (system ``odradek, nothing stored``) are what the filled broker's are
compared with. The levels are minutes apart, and a shared machine drifts in minutes by more
than the 10% the comparison looks for; measured beside each other, both brokers see the same
machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import brokers, kafka_rows, workloads
from bench.rows import Row, describe, failed_run
from bench.workloads import Settings, WorkloadError

GB = 10**9
# The system of the fresh broker's rows, measured beside the filled one.
NOTHING_STORED = "odradek, nothing stored"
LEVELS_GB = (0, 5, 20, 50)
QUICK_LEVELS_GB = (0, 1)
# What the fill leaves free on the disk, for everything else on the machine.
DISK_MARGIN_GB = 10
FILL_RECORD = 1024 * 1024
FILL_PARTITIONS = 6
# One fill step: the data directory is measured again after this many records.
FILL_STEP = 1024


def levels_the_disk_allows(levels: tuple[int, ...], directory: Path) -> list[int]:
    """``levels`` that fit on ``directory``'s disk with the margin left; when the largest
    does not, the most whole GB that do takes its place."""
    room = shutil.disk_usage(directory).free // GB - DISK_MARGIN_GB
    allowed = [level for level in levels if level <= room]
    if len(allowed) < len(levels) and room > allowed[-1]:
        allowed.append(int(room))
    return allowed


def stored_bytes(directory: Path) -> int:
    return sum(entry.stat().st_size for entry in directory.rglob("*") if entry.is_file())


def fill(broker: brokers.Broker, topic: str, data_dir: Path, target: int) -> None:
    """1 MiB records into ``topic`` until ``data_dir`` holds ``target`` bytes, then synced."""
    value = os.urandom(FILL_RECORD)
    producer, errors = workloads.producer_with_errors(broker.bootstrap, {
        "acks": 1, "linger.ms": 5, "message.max.bytes": 2 * FILL_RECORD + 1024,
        "delivery.report.only.error": True})
    while (missing := target - stored_bytes(data_dir)) > 0:
        records = min(FILL_STEP, missing // FILL_RECORD + 1)
        workloads.timed_produce(producer, errors, topic, [value] * records)
    os.sync()


def growth_rows(settings: Settings, runs: int, quick: bool, scratch: Path,
                progress: Callable[[str], None] = print) -> list[Row]:
    """The "data growth" rows: a producer row and a consumer row per level stored."""
    levels = levels_the_disk_allows(QUICK_LEVELS_GB if quick else LEVELS_GB, scratch)
    root = Path(tempfile.mkdtemp(prefix="data-growth-", dir=scratch))
    data_dir = root / "data"
    broker = brokers.odradek_broker(brokers.free_port(29092), root / "broker.log",
                                    str(data_dir), [])
    payloads = workloads.make_payloads(settings.records, settings.record_size)
    rows = []
    try:
        broker.start()
        filler = workloads.unique_topic("fill")
        workloads.create_topic(broker.bootstrap, filler, FILL_PARTITIONS,
                               config=kafka_rows.LARGE_TOPIC_CONFIG)
        progress("warming up")
        kafka_rows.warm_up(broker, settings, payloads)
        for level in levels:
            progress(f"filling to {level} GB")
            fill(broker, filler, data_dir, level * GB)
            filled = (broker, data_dir)
            if not level:
                rows += measure_level([filled], level, settings, payloads, runs, progress)
                continue
            progress(f"{level} GB: starting a fresh broker beside it")
            with fresh_broker(root, level) as fresh:
                kafka_rows.warm_up(fresh[0], settings, payloads)
                rows += measure_level([filled, fresh], level, settings, payloads, runs,
                                      progress)
    except WorkloadError as exc:  # a failed fill ends the section with what it measured
        rows.append(Row("data growth", "fill", "odradek", "GB", runs=[failed_run(exc)]))
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    return rows


@contextmanager
def fresh_broker(root: Path, level: int) -> Iterator[tuple[brokers.Broker, Path]]:
    """A broker on a new data directory under ``root``, started, and stopped and removed
    afterwards."""
    data_dir = root / f"fresh-beside-{level}"
    broker = brokers.odradek_broker(brokers.free_port(29192), root / f"fresh-{level}.log",
                                    str(data_dir), [])
    try:
        broker.start()
        yield broker, data_dir
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def measure_level(measured: list[tuple[brokers.Broker, Path]], level: int,
                  settings: Settings, payloads: list[bytes], runs: int,
                  progress: Callable[[str], None]) -> list[Row]:
    """A producer row and a consumer row per broker of ``measured`` (the filled one first),
    their runs taken in turn: run 1 on each broker, then run 2 on each, and so on."""
    systems = ["odradek", NOTHING_STORED][:len(measured)]
    rows = [(Row("data growth", f"one producer at {level} GB", system, "records/s"),
             Row("data growth", f"one consumer at {level} GB", system, "records/s"))
            for system in systems]
    for run in range(1, runs + 1):
        for (broker, data_dir), (produce, consume) in zip(measured, rows, strict=True):
            progress(f"{level} GB: run {run} of {runs}, {produce.system}")
            kafka_rows.attempt(produce, consume, lambda: with_stored(
                data_dir, level, kafka_rows.one_producer_then_consumer(broker, settings,
                                                                       payloads)))
    return [row for pair in rows for row in pair]


def with_stored(data_dir: Path, level: int, runs: tuple[dict, dict]) -> tuple[dict, dict]:
    """The produce and consume runs, each with the GB the broker held when it ran and the
    level it was measured at (the filled broker's, for a fresh broker beside it)."""
    stored_gb = stored_bytes(data_dir) / GB
    for run in runs:
        run.update(stored_gb=stored_gb, level_gb=level)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.data_growth",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help=f"{'/'.join(map(str, QUICK_LEVELS_GB))} GB, 100,000 records")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the broker's data directory goes")
    args = parser.parse_args()
    workloads.install_signal_handlers()
    settings = Settings(records=100_000 if args.quick else 1_000_000)
    for row in growth_rows(settings, args.runs, args.quick, args.dir):
        print(describe(row))


if __name__ == "__main__":
    main()
