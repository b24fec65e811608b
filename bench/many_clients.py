"""Many clients at once: a broker holding 1,000 idle connections while 100 producers send
100 records/s each, and what that does to the end-to-end latency a probe client sees.

    .venv/bin/python -m bench.many_clients [--runs 3] [--quick]

The idle connections are plain TCP connections from this process that never send a byte:
what a fleet of connected, quiet clients costs a broker (its connection objects, its
selector). The producers are confluent-kafka producers, 25 to a process (spawned), each
sending one 100-byte record every 10 ms to a 6-partition topic (``linger.ms=5``). The probe
is the suite's latency workload (``workloads.end_to_end_latency``) at 2,000 records/s into a
topic of its own (created, like the producers', before the load starts), run while all of
that goes on; its p99 is the row's figure. All clients share the broker's two cores with it,
as they would share a small machine.
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import tempfile
import time
from contextlib import ExitStack
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path

from bench import brokers, workloads
from bench.brokers import HOST, Broker
from bench.rows import Row, Run, describe, measure

IDLE_CONNECTIONS = 1_000
PRODUCERS = 100
PRODUCERS_PER_PROCESS = 25
PRODUCER_INTERVAL_S = 0.01  # 100 records/s each
PRODUCER_CONFIG = {"acks": 1, "linger.ms": 5, "log_level": 0}
QUICK = {"idle": 200, "producers": 25, "probe_seconds": 3.0}
FULL = {"idle": IDLE_CONNECTIONS, "producers": PRODUCERS, "probe_seconds": 10.0}
STEADY_S = 2.0  # the background load runs this long before the probe starts


def many_clients_rows(running: list[Broker], runs: int, quick: bool) -> list[Row]:
    """One row per broker: the probe's p99 under the load, measured ``runs`` times."""
    sizes = QUICK if quick else FULL
    name = (f"probe p99 beside {sizes['idle']:,} idle connections and "
            f"{sizes['producers']} producers at 100 records/s")
    rows = {broker.name: Row("many clients", name, broker.name, "ms", higher_is_better=False,
                             note="p50, p99.9 and max beside it")
            for broker in running}
    for _ in range(runs):
        for broker in running:
            measure(rows[broker.name], 1, lambda: probe_under_load(broker, **sizes))
    return list(rows.values())


def probe_under_load(broker: Broker, idle: int, producers: int, probe_seconds: float) -> Run:
    topic = workloads.unique_topic("many-clients")
    workloads.create_topic(broker.bootstrap, topic, 6)
    # The probe's topic too is created before the load: an overloaded broker can take longer
    # than the admin client's timeout to answer CreateTopics, and the row measures records.
    settings = workloads.Settings(latency_seconds=probe_seconds)
    probe_topic = workloads.unique_topic("latency")
    workloads.create_topic(broker.bootstrap, probe_topic, settings.partitions)
    context = multiprocessing.get_context("spawn")
    stop, sent = context.Event(), context.Value("q", 0)
    processes = [context.Process(target=_producers, daemon=True, args=(
        broker.bootstrap, topic, min(PRODUCERS_PER_PROCESS, producers - first), stop, sent))
        for first in range(0, producers, PRODUCERS_PER_PROCESS)]
    with ExitStack() as stack:
        for _ in range(idle):
            stack.enter_context(socket.create_connection((HOST, broker.port), timeout=10))
        for process in processes:
            process.start()
        try:
            time.sleep(STEADY_S)
            cpu, before = broker.cpu_now(), sent.value
            t0 = time.monotonic()
            probe = workloads.end_to_end_latency(broker.bootstrap, settings, probe_topic)
            seconds = time.monotonic() - t0
            background = (sent.value - before) / seconds
            cpu = broker.cpu_now() - cpu
        finally:
            stop.set()
            for process in processes:
                process.join(30)
                if process.is_alive():
                    process.kill()
    if any(process.exitcode for process in processes):
        raise workloads.WorkloadError(
            f"producer processes exited with {[p.exitcode for p in processes]}")
    return {"value": probe["p99_ms"], "p50_ms": probe["p50_ms"], "p999_ms": probe["p999_ms"],
            "max_ms": probe["max_ms"], "background_records_per_s": background,
            "broker_cpu_s_per_s": cpu / seconds, "rss_mb": broker.rss_mb()}


def _producers(bootstrap: str, topic: str, count: int, stop: Event,
               sent: Synchronized) -> None:
    """``count`` producers in this process, each sending a record every
    PRODUCER_INTERVAL_S until ``stop``; adds what they sent to ``sent`` as it goes."""
    from confluent_kafka import Producer  # noqa: PLC0415 - in the spawned child only

    clients = [Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
               for _ in range(count)]
    value = bytes(100)
    due = time.monotonic()
    while not stop.is_set():
        for client in clients:
            client.produce(topic, value)
            client.poll(0)
        with sent.get_lock():
            sent.value += count
        due += PRODUCER_INTERVAL_S
        time.sleep(max(0.0, due - time.monotonic()))
    for client in clients:
        client.flush(10)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.many_clients",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK['idle']} idle connections, {QUICK['producers']} "
                             "producers, 3 s of probe")
    args = parser.parse_args()
    workloads.install_signal_handlers()
    log_dir = Path(tempfile.mkdtemp(prefix="bench-many-clients-"))
    with brokers.odradek_and_tansu(log_dir) as running:
        for row in many_clients_rows(running, args.runs, args.quick):
            print(describe(row))

if __name__ == "__main__":
    main()
