"""Spark reading a topic through the ``odradek`` data source: batch throughput and
micro-batch latency.

    .venv/bin/python -m bench.spark_source [--records 5000000] [--partitions 4] [--runs 3]
                                           [--stream-seconds 20] [--stream-rate 5000]
                                           [--profile] [--output FILE]

A fresh ``odradek broker`` gets a topic filled with ``--records`` 100-byte values (the
produce workload of ``python -m bench``). A local SparkSession (``local[2]``, Python workers
on this interpreter) then reads the whole topic into the ``noop`` sink ``--runs`` times, once
with one Spark partition per topic partition and once with ``minPartitions`` = 2x. Last, a
streaming query (``startingOffsets`` latest, default trigger) with a ``foreachBatch`` sink
reads a second topic while a producer thread writes ``--stream-rate`` records/s to it; each
record's age is the time its micro-batch finished minus its ``timestamp`` (CreateTime, set by
the producer when it sent it). See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from bench import brokers, report, workloads
from bench.brokers import RESULTS_DIR, Broker, Profiler

TARGET_ROWS_PER_S = 300_000  # the batch read of a 5,000,000-record topic on a 2-core machine
MASTER = "local[2]"
# recentProgress keeps 100 micro-batches by default: fewer than a 0-second trigger runs in
# the streaming run's ~25 s.
SPARK_CONF = {"spark.sql.streaming.numRecentProgressUpdates": 1000}
# Micro-batches that finish this soon after the producer starts are not measured: the first
# ones carry Python worker start-up and the JVM's warm-up.
STREAM_WARMUP_SECONDS = 5.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.spark_source",
                                description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=5_000_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--runs", type=int, default=3, help="batch reads per variant (default 3)")
    p.add_argument("--stream-seconds", type=float, default=20.0,
                   help="measured length of the streaming run (default 20)")
    p.add_argument("--stream-rate", type=int, default=5_000,
                   help="records/s written during the streaming run (default 5,000)")
    p.add_argument("--profile", action="store_true",
                   help="one extra batch read under py-spy (driver, JVM children and Python "
                        "workers) into bench/results/spark-<timestamp>-read.svg")
    p.add_argument("--output", help="JSON path (default bench/results/spark-<timestamp>.json)")
    return p.parse_args(argv)


# --------------------------------------------------------------------------- batch reads


def spark_cpu_seconds() -> float | None:
    """CPU seconds of this process and its live descendants: the JVM started by pyspark and
    the Python workers it forks (workers that already exited are not counted)."""
    return brokers.tree_cpu_seconds(os.getpid())


def batch_read(spark, broker: Broker, topic: str, records: int,
               min_partitions: int | None) -> dict:
    """One full read of ``topic`` into the noop sink, with the CPU both sides spent."""
    reader = (spark.read.format("odradek")
              .option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic))
    if min_partitions is not None:
        reader = reader.option("minPartitions", min_partitions)
    broker_cpu, spark_cpu = broker.cpu_seconds(), spark_cpu_seconds()
    t0 = time.perf_counter()
    reader.load().write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "rows_per_s": records / seconds,
        "broker_cpu_s": _delta(broker.cpu_seconds(), broker_cpu),
        "spark_cpu_s": _delta(spark_cpu_seconds(), spark_cpu),
        "load_average_after": brokers.load_average(),
    }


def _delta(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def throughput(spark, broker: Broker, topic: str, records: int, runs: int,
               min_partitions: int | None) -> dict:
    label = "default" if min_partitions is None else f"minPartitions={min_partitions}"
    results = []
    for run in range(1, runs + 1):
        workloads.check_stop()
        out = batch_read(spark, broker, topic, records, min_partitions)
        print(f"  read {label} #{run}: {out['rows_per_s']:,.0f} rows/s ({out['seconds']:.1f} s, "
              f"broker {out['broker_cpu_s']:.1f} CPU s, Spark {out['spark_cpu_s']:.1f} CPU s)",
              flush=True)
        results.append(out)
    rates = [r["rows_per_s"] for r in results]
    return {"min_partitions": min_partitions, "runs": results,
            "median_rows_per_s": statistics.median(rates), "best_rows_per_s": max(rates)}


def profiled_read(spark, broker: Broker, topic: str, records: int, stamp: str) -> dict:
    """A batch read under ``py-spy record --subprocesses`` of this process: the driver, the
    JVM's Python workers (which do the reading) and the daemon that forks them."""
    profiler = Profiler(os.getpid(), RESULTS_DIR / f"spark-{stamp}-read.svg")
    if not profiler.start():
        return {"error": profiler.error}
    try:
        out = batch_read(spark, broker, topic, records, None)
    finally:
        error = profiler.stop()
    out["profile"] = error or str(profiler.svg_path)
    print(f"  profiled read: {out['rows_per_s']:,.0f} rows/s; {out['profile']}", flush=True)
    return out


# --------------------------------------------------------------------------- micro-batch latency


class SteadyProducer(threading.Thread):
    """Sends ``rate`` records/s of ``record_size`` bytes to ``topic`` until stopped; each
    record's timestamp (CreateTime) is the moment it was handed to the client."""

    def __init__(self, bootstrap: str, topic: str, rate: int, record_size: int):
        super().__init__(name="steady-producer", daemon=True)
        self.producer, self.errors = workloads.producer_with_errors(
            bootstrap, workloads.LATENCY_PRODUCER)
        self.topic, self.rate = topic, rate
        self.value = os.urandom(record_size)
        self.sent = 0
        self.stop = threading.Event()

    def run(self) -> None:
        produce, poll = self.producer.produce, self.producer.poll
        began = time.monotonic()
        while not self.stop.wait(0.001):  # a tick per millisecond: 5 records at 5,000/s
            owed = int((time.monotonic() - began) * self.rate) - self.sent
            for _ in range(owed):
                workloads._produce_blocking(produce, poll, self.topic, self.value)
            self.sent += owed
            poll(0)
        self.producer.flush(30)


class BatchClock:
    """The ``foreachBatch`` function: reads each micro-batch's timestamps and notes, when it
    has them, how old every record is."""

    def __init__(self) -> None:
        self.measure_after: float | None = None  # epoch ms from which batches count
        self.batches: list[dict] = []
        self.ages_ms: list[float] = []

    def __call__(self, df, batch_id: int) -> None:
        from pyspark.sql import functions as F  # noqa: PLC0415 - pyspark loads with Spark

        micros = df.select(F.unix_micros("timestamp").alias("ts")).toArrow().column("ts")
        finished_ms = time.time() * 1000
        if not len(micros) or self.measure_after is None or finished_ms < self.measure_after:
            return
        ages = [finished_ms - ts / 1000 for ts in micros.to_pylist()]
        self.ages_ms += ages
        self.batches.append({"batch_id": batch_id, "records": len(ages),
                             "oldest_ms": max(ages), "newest_ms": min(ages)})


def percentiles(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"p50": workloads._percentile(ordered, 50), "p99": workloads._percentile(ordered, 99),
            "max": ordered[-1] if ordered else float("nan"), "count": len(ordered)}


def micro_batch_latency(spark, bootstrap: str, partitions: int, rate: int,
                        seconds: float) -> dict:
    topic = workloads.unique_topic("spark-stream")
    workloads.create_topic(bootstrap, topic, partitions)
    clock = BatchClock()
    with tempfile.TemporaryDirectory(prefix="odradek-spark-checkpoint-") as checkpoint:
        query = (spark.readStream.format("odradek")
                 .option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topic)
                 .option("startingOffsets", "latest")
                 .load().writeStream.foreachBatch(clock)
                 .option("checkpointLocation", checkpoint).start())
        producer = SteadyProducer(bootstrap, topic, rate, 100)
        try:
            while query.lastProgress is None:  # the first, empty micro-batch: offsets known
                workloads.check_stop()
                if query.exception() is not None:
                    raise workloads.WorkloadError(f"streaming query failed: {query.exception()}")
                time.sleep(0.1)
            producer.start()
            clock.measure_after = (time.time() + STREAM_WARMUP_SECONDS) * 1000
            time.sleep(STREAM_WARMUP_SECONDS + seconds)
        finally:
            producer.stop.set()
            producer.join(30)
            progress = query.recentProgress
            query.stop()
    measured_ids = {b["batch_id"] for b in clock.batches}
    measured = [p for p in progress if p["batchId"] in measured_ids]
    durations = [p["durationMs"]["triggerExecution"] for p in measured]
    return {
        "topic": topic,
        "rate": rate,
        "sent": producer.sent,
        "seconds_measured": seconds,
        "warmup_seconds": STREAM_WARMUP_SECONDS,
        "micro_batches": len(clock.batches),
        "records_measured": len(clock.ages_ms),
        "batch_duration_ms": percentiles(durations),
        "batch_records": percentiles([p["numInputRows"] for p in measured]),
        "record_age_ms": percentiles(clock.ages_ms),
        "oldest_record_age_ms": percentiles([b["oldest_ms"] for b in clock.batches]),
        "client_errors": producer.errors.client[:10],
    }


# --------------------------------------------------------------------------- the run


def render(document: dict) -> str:
    lines = [f"{'batch read (rows/s)':34}{'runs':>36}{'median':>12}{'best':>12}"]
    for variant in document["throughput"]:
        label = ("one task per partition" if variant["min_partitions"] is None
                 else f"minPartitions={variant['min_partitions']}")
        runs = " ".join(f"{r['rows_per_s']:,.0f}" for r in variant["runs"])
        lines.append(f"{label:34}{runs:>36}{variant['median_rows_per_s']:>12,.0f}"
                     f"{variant['best_rows_per_s']:>12,.0f}")
    lines.append(f"target: >= {TARGET_ROWS_PER_S:,} rows/s (best median: "
                 f"{document['verdict']})")
    stream = document.get("micro_batch")
    if stream and "error" not in stream:
        lines.append(f"\nmicro-batches at {stream['rate']:,} records/s, "
                     f"{stream['micro_batches']} measured over {stream['seconds_measured']:g} s")
        lines.append(f"{'':34}{'p50 ms':>12}{'p99 ms':>12}{'max ms':>12}")
        for key, label in (("batch_duration_ms", "micro-batch duration"),
                           ("record_age_ms", "record age at batch end"),
                           ("oldest_record_age_ms", "oldest record of a batch")):
            v = stream[key]
            lines.append(f"{label:34}{v['p50']:>12.0f}{v['p99']:>12.0f}{v['max']:>12.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    now = datetime.now(timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    output = Path(args.output or RESULTS_DIR / f"spark-{stamp}.json")
    command = shlex.join([os.path.basename(sys.executable), "-m", "bench.spark_source",
                          *sys.argv[1:]])
    document: dict = {"timestamp": now.isoformat(), "command": command,
                      "settings": {**vars(args), "master": MASTER, "spark_conf": SPARK_CONF},
                      "load_average_at_start": brokers.load_average()}
    broker = brokers.odradek_broker(brokers.free_port(29094),
                                    RESULTS_DIR / f"spark-{stamp}-odradek.log", None, [])
    print(f"$ {shlex.join(broker.argv)}", flush=True)
    try:
        broker.start()
        settings = workloads.Settings(records=args.records, partitions=args.partitions)
        payloads = workloads.make_payloads(args.records, settings.record_size)
        broker_cpu = broker.cpu_seconds()
        produced = workloads.produce_throughput(broker.bootstrap, settings, payloads)
        produced["broker_cpu_s"] = _delta(broker.cpu_seconds(), broker_cpu)
        del payloads
        document["produce"] = produced
        print(f"  produced {args.records:,} records to {produced['topic']}: "
              f"{produced['records_per_s']:,.0f} records/s", flush=True)

        from odradek.spark.session import local_session  # noqa: PLC0415 - starts no JVM yet

        t0 = time.perf_counter()
        spark = local_session("bench-spark-source", master=MASTER, **SPARK_CONF)
        document["spark_start_s"] = time.perf_counter() - t0
        try:
            document["throughput"] = [
                throughput(spark, broker, produced["topic"], args.records, args.runs, mp)
                for mp in (None, 2 * args.partitions)]
            if args.profile:
                document["profiled_read"] = profiled_read(spark, broker, produced["topic"],
                                                          args.records, stamp)
            document["micro_batch"] = micro_batch_latency(
                spark, broker.bootstrap, args.partitions, args.stream_rate, args.stream_seconds)
        finally:
            spark.stop()
    except KeyboardInterrupt:
        document["interrupted"] = True
    finally:
        document["broker_exit_code"] = broker.stop()
        document["load_average_at_end"] = brokers.load_average()
    if "throughput" in document:
        best = max(v["median_rows_per_s"] for v in document["throughput"])
        document["verdict"] = f"{'PASS' if best >= TARGET_ROWS_PER_S else 'FAIL'} {best:,.0f}"
        print(f"\n$ {command}\n{render(document)}")
    report.write_json(output, document)
    print(f"\nresults: {output}")
    return 130 if document.get("interrupted") else 0


if __name__ == "__main__":
    sys.exit(main())
