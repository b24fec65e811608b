"""``python -m bench``: the same workloads against odradek and Tansu, in one run.

Brokers run one after the other (never at the same time: the machine has two cores),
each started fresh and stopped afterwards.  See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

import confluent_kafka

from bench import brokers, report, workloads
from bench.brokers import RESULTS_DIR, Broker, BrokerError, Profiler

BROKERS = ("odradek", "tansu")
WORKLOADS = ("produce", "consume", "latency")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument(
        "--records",
        type=int,
        default=2_000_000,
        help="records for the produce/consume workloads (default 2,000,000)",
    )
    p.add_argument("--record-size", type=int, default=100, help="bytes per record (default 100)")
    p.add_argument("--partitions", type=int, default=6, help="partitions per topic (default 6)")
    p.add_argument(
        "--latency-seconds",
        type=float,
        default=10.0,
        help="length of the end-to-end latency run (default 10)",
    )
    p.add_argument(
        "--latency-rate",
        type=int,
        default=2_000,
        help="records/s in the latency run (default 2,000)",
    )
    p.add_argument("--only", choices=BROKERS, help="run against one broker only")
    p.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help="comma-separated subset of produce,consume,latency (consume reads what produce wrote)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="py-spy each odradek workload into bench/results/odradek-<workload>.svg",
    )
    p.add_argument(
        "--wait-idle",
        type=float,
        default=60.0,
        metavar="S",
        help="before each broker, wait up to S seconds for the CPUs to be <25%% "
        "busy (other processes skew results; default 60, 0 to skip)",
    )
    p.add_argument(
        "--odradek-port",
        type=int,
        help="default 29092, or a free port if something already listens there",
    )
    p.add_argument(
        "--tansu-port",
        type=int,
        help="default 19092, or a free port if something already listens there",
    )
    p.add_argument(
        "--odradek-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra `odradek broker --set` override (repeatable)",
    )
    p.add_argument("--data-dir", help="odradek log.dirs (default: a fresh temporary directory)")
    p.add_argument("--output", help="JSON path (default bench/results/<timestamp>.json)")
    args = p.parse_args(argv)
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        p.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    if args.records < 1 or args.record_size < 9 or args.latency_rate < 1:
        p.error("--records >= 1, --record-size >= 9 and --latency-rate >= 1 please")
    return args


DEFAULT_PORTS = {"odradek": 29092, "tansu": 19092}


def make_broker(name: str, args: argparse.Namespace, stamp: str) -> Broker:
    log = RESULTS_DIR / f"{stamp}-{name}.log"
    port = getattr(args, f"{name}_port")
    if port is None:  # an explicit port that is taken is an error (Broker.start says so)
        port = brokers.free_port(DEFAULT_PORTS[name])
        if port != DEFAULT_PORTS[name]:
            print(f"  port {DEFAULT_PORTS[name]} is taken: {name} gets {port}", flush=True)
    if name == "tansu":
        return brokers.tansu_broker(port, log)
    return brokers.odradek_broker(port, log, args.data_dir, args.odradek_set)


def run_workload(name, broker: Broker, fn, profile: bool, results: dict):
    """Run one workload (optionally under py-spy), storing its numbers or its error."""
    profiler = None
    if profile:
        profiler = Profiler(broker.pid, RESULTS_DIR / f"{broker.name}-{name}.svg")
        if not profiler.start():
            print(f"  py-spy could not attach ({profiler.error}); running unprofiled", flush=True)
            profiler = None
    print(f"  {name} ...", end=" ", flush=True)
    load_before = brokers.load_average()
    broker_cpu, client_cpu = broker.cpu_seconds(), brokers.own_cpu_seconds()
    machine_cpu, wall = brokers.machine_cpu_seconds(), time.monotonic()
    try:
        out = fn()
        workloads.check_stop()
        wall = time.monotonic() - wall
        broker_cpu_after = broker.cpu_seconds()
        if broker_cpu is not None and broker_cpu_after is not None:
            out["broker_cpu_s"] = broker_cpu_after - broker_cpu
        out["client_cpu_s"] = brokers.own_cpu_seconds() - client_cpu
        machine_cpu_after = brokers.machine_cpu_seconds()
        if machine_cpu is not None and machine_cpu_after is not None:
            # Everything else on the machine (other people's tests, py-spy...) meanwhile.
            out["other_cpu_s"] = max(
                0.0,
                machine_cpu_after
                - machine_cpu
                - out["client_cpu_s"]
                - out.get("broker_cpu_s", 0.0),
            )
        out["wall_s"] = wall
        out["load_average_before"] = load_before
        print(_summary(name, out), flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        raise
    except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
        out = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"ERROR {out['error']}", flush=True)
        if not broker.alive():
            out["error"] += f" (broker exited; log tail:\n{broker.log_tail()})"
    finally:
        if profiler is not None:
            err = profiler.stop()
            if err:
                print(f"  py-spy: {err}", flush=True)
            else:
                print(f"  profile: {profiler.svg_path}", flush=True)
    if profiler is not None:
        out["profile"] = str(profiler.svg_path) if not profiler.error else profiler.error
    results[name] = out
    return out


def _summary(name: str, out: dict) -> str:
    if name == "latency":
        return (
            f"p50 {out['p50_ms']:.2f} ms, p99 {out['p99_ms']:.2f} ms, "
            f"p99.9 {out['p999_ms']:.2f} ms ({out['received']:,}/{out['sent']:,} records)"
        )
    return (
        f"{out['records_per_s']:,.0f} records/s, {out['mb_per_s']:.1f} MB/s ({out['seconds']:.2f}s)"
    )


def bench_broker(name: str, args, settings, payloads, stamp: str, results: dict) -> None:
    """Start ``name``, run the workloads into ``results`` (filled as it goes), stop it."""
    results["profiled"] = bool(args.profile and name == "odradek")
    print(f"\n== {name}", flush=True)
    if args.wait_idle > 0:
        busy = brokers.wait_until_idle(args.wait_idle)
        results["cpu_busy_before_start"] = busy
        if busy is not None and busy > 0.25:
            print(
                f"  the CPUs are still {busy:.0%} busy after waiting {args.wait_idle:.0f}s "
                "for other processes: numbers will be noisy",
                flush=True,
            )
    results["load_average_at_start"] = brokers.load_average()
    broker = make_broker(name, args, stamp)
    results["argv"] = shlex.join(broker.argv)
    results["log"] = str(broker.log_path)
    print(f"  $ {results['argv']}", flush=True)
    try:
        broker.start()
        results["startup_seconds"] = broker.start_seconds
        print(f"  listening on {broker.bootstrap} after {broker.start_seconds:.2f}s", flush=True)
        profile = results["profiled"]
        bootstrap = broker.bootstrap
        produced = None
        if "produce" in args.workloads:
            produced = run_workload(
                "produce",
                broker,
                lambda: workloads.produce_throughput(bootstrap, settings, payloads),
                profile,
                results,
            )
        if "consume" in args.workloads:
            if produced is None or "error" in produced:
                results["consume"] = {"error": "skipped: needs a successful produce run"}
            else:
                run_workload(
                    "consume",
                    broker,
                    lambda: workloads.consume_throughput(
                        bootstrap, settings, produced["topic"], produced["records"]
                    ),
                    profile,
                    results,
                )
        if "latency" in args.workloads:
            if broker.alive():
                run_workload(
                    "latency",
                    broker,
                    lambda: workloads.end_to_end_latency(bootstrap, settings),
                    profile,
                    results,
                )
            else:
                results["latency"] = {"error": "skipped: broker no longer running"}
    except BrokerError as exc:
        results["error"] = str(exc)
        print(f"  {exc}", flush=True)
    finally:
        code = broker.stop()
        results["exit_code"] = code
        print(f"  stopped {name} (exit code {code})", flush=True)


def environment() -> dict:
    env = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "confluent_kafka": getattr(confluent_kafka, "__version__", None)
        or str(confluent_kafka.version()),
        "librdkafka": confluent_kafka.libversion()[0],
    }
    env["odradek_git"] = brokers.tool_version(
        ["git", "-C", str(brokers.BENCH_DIR.parent), "describe", "--always", "--dirty"]
    )
    try:
        env["tansu"] = brokers.tool_version([brokers.find_tansu(), "--version"])
    except BrokerError as exc:
        env["tansu"] = str(exc)
    return env


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workloads.install_signal_handlers()
    now = datetime.now(timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    output = args.output or str(RESULTS_DIR / f"{stamp}.json")
    settings = workloads.Settings(
        records=args.records,
        record_size=args.record_size,
        partitions=args.partitions,
        latency_seconds=args.latency_seconds,
        latency_rate=args.latency_rate,
    )
    names = [args.only] if args.only else list(BROKERS)
    command = shlex.join([os.path.basename(sys.executable), "-m", "bench", *sys.argv[1:]])
    document = {
        "timestamp": now.isoformat(),
        "command": command,
        "settings": settings.__dict__,
        "workloads": args.workloads,
        "environment": environment(),
        "results": {},
    }
    interrupted = False
    try:
        payloads = []
        if "produce" in args.workloads:
            t0 = time.perf_counter()
            payloads = workloads.make_payloads(settings.records, settings.record_size)
            print(
                f"generated {len(payloads):,} x {settings.record_size} B records "
                f"in {time.perf_counter() - t0:.1f}s (not measured)",
                flush=True,
            )
        for name in names:
            results = document["results"].setdefault(name, {})
            bench_broker(name, args, settings, payloads, stamp, results)
            workloads.check_stop()
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: brokers stopped, partial results follow", flush=True)
    except Exception:  # noqa: BLE001 - still print what we have
        document["harness_error"] = traceback.format_exc()
        print(document["harness_error"], flush=True)

    rows = report.evaluate(document["results"])
    document["table"] = rows
    document["interrupted"] = interrupted
    print(f"\n$ {command}")
    print(
        f"{settings.records:,} records x {settings.record_size} B, {settings.partitions} "
        f"partitions; latency {settings.latency_rate:,}/s for {settings.latency_seconds:g}s; "
        f"confluent-kafka {document['environment']['confluent_kafka']} (librdkafka "
        f"{document['environment']['librdkafka']}); "
        f"{document['environment']['tansu']}\n"
    )
    print(report.render_table(rows))
    print("(odradek/tansu: above 1x is better for throughput, below 1x for latency)")
    notes = report.render_notes(document["results"])
    if notes:
        print("\nnotes:\n" + notes)
    report.write_json(Path(output), document)
    print(f"\nresults: {output}")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
