"""How long a broker's logs take to open: 1,000 partitions holding 5 GB, after a clean
shutdown and after a crash.

    .venv/bin/python -m bench.log_reopen [--partitions 1000] [--gigabytes 5]
                                         [--segment-bytes 1073741824] [--dir /tmp]

The data is written straight through ``PartitionLog`` (64 KiB batches, the topic defaults:
``segment.bytes`` 1 GiB, ``index.interval.bytes`` 4096) in a temporary directory, which is
removed at the end. Then, each timed:

- clean: ``LogManager.load_all`` after ``close_all`` (the clean shutdown marker is there:
  indexes are sanity-checked, nothing is scanned);
- crash: the same without the marker, recovering from the recovery points the last
  checkpoint holds (the active segment of each partition: every batch's CRC is checked);
- crash, no checkpoint: as if the broker died before it ever wrote one (every segment);
- and the same three as a whole ``odradek broker`` process, from exec to "listening".

The page cache is warm (the data was just written): these are CPU costs, not disk reads.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from odradek.log import LogConfig, LogManager
from odradek.log.checkpoint import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_OFFSET_CHECKPOINT
from odradek.protocol.records import Record, build_batch

BATCH_BYTES = 64 * 1024
RECORDS_PER_BATCH = 64
LISTENING = re.compile(r"listening on 127\.0\.0\.1:\d+")
STARTUP_TIMEOUT_SECONDS = 600


def build(data_dir: Path, partitions: int, total_bytes: int, config: LogConfig) -> int:
    """Writes ``total_bytes`` evenly over ``partitions`` logs; returns the bytes written."""
    value = b"x" * (BATCH_BYTES // RECORDS_PER_BATCH - 40)
    batch = bytes(build_batch([Record(i, 1_700_000_000_000 + i, None, value)
                               for i in range(RECORDS_PER_BATCH)], base_offset=0))
    batches_per_partition = max(1, total_bytes // partitions // len(batch))
    manager = LogManager([data_dir], clock=lambda: 1_700_000_000_000)
    manager.load_all(lambda topic: config)
    for partition in range(partitions):
        log = manager.get_or_create("reopen", partition, config)
        for _ in range(batches_per_partition):
            log.append(bytearray(batch), leader_epoch=0, now_ms=1_700_000_000_000)
    manager.close_all()
    return partitions * batches_per_partition * len(batch)


def time_load(data_dir: Path, config: LogConfig) -> float:
    manager = LogManager([data_dir], clock=lambda: 1_700_000_000_000)
    started = time.perf_counter()
    manager.load_all(lambda topic: config)
    elapsed = time.perf_counter() - started
    manager.close_all()  # a clean shutdown again, for the next measurement
    return elapsed


def time_broker_start(data_dir: Path) -> float:
    """From exec to the broker's "listening" line; the broker is then stopped cleanly."""
    odradek = str(Path(sys.executable).with_name("odradek"))
    log_path = data_dir.parent / "broker.log"
    with open(log_path, "w") as log:
        started = time.perf_counter()
        broker = subprocess.Popen(
            [odradek, "broker", "--set", "listeners=PLAINTEXT://127.0.0.1:0",
             "--set", f"log.dirs={data_dir}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        while not LISTENING.search(log_path.read_text()):
            if broker.poll() is not None or time.perf_counter() - started > STARTUP_TIMEOUT_SECONDS:
                raise RuntimeError(f"broker did not start: {log_path.read_text()}")
            time.sleep(0.01)
        return time.perf_counter() - started
    finally:
        broker.terminate()
        broker.wait(STARTUP_TIMEOUT_SECONDS)


def crash(data_dir: Path, *, forget_checkpoint: bool) -> None:
    """What a SIGKILL leaves: no marker (and maybe no checkpoint yet)."""
    (data_dir / CLEAN_SHUTDOWN_FILE).unlink()
    if forget_checkpoint:
        (data_dir / RECOVERY_POINT_OFFSET_CHECKPOINT).unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--gigabytes", type=float, default=5.0)
    parser.add_argument("--segment-bytes", type=int, default=LogConfig().segment_bytes)
    parser.add_argument("--dir", default=None, help="where the temporary data dir goes")
    args = parser.parse_args()
    config = LogConfig(segment_bytes=args.segment_bytes)
    root = Path(tempfile.mkdtemp(prefix="odradek-log-reopen-", dir=args.dir))
    data_dir = root / "data"
    data_dir.mkdir()
    try:
        started = time.perf_counter()
        written = build(data_dir, args.partitions, int(args.gigabytes * 1e9), config)
        segments = sum(1 for _ in data_dir.glob("*/*.log"))
        print(f"wrote {written / 1e9:.2f} GB in {args.partitions} partitions, {segments} "
              f"segments, in {time.perf_counter() - started:.1f} s")
        rows = []
        for name, forget_checkpoint in [("clean", None), ("crash", False),
                                        ("crash, no checkpoint", True)]:
            if forget_checkpoint is not None:
                crash(data_dir, forget_checkpoint=forget_checkpoint)
            in_process = time_load(data_dir, config)
            if forget_checkpoint is not None:
                crash(data_dir, forget_checkpoint=forget_checkpoint)
            rows.append((name, in_process, time_broker_start(data_dir)))
        print(f"{'restart':<22}{'LogManager.load_all':>22}{'odradek broker start':>24}")
        for name, in_process, process in rows:
            print(f"{name:<22}{in_process:>20.2f} s{process:>22.2f} s")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
