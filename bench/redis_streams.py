"""Redis Streams as a peer of the Kafka brokers in the benchmark suite: the rows the Kafka
brokers get (one and three producers, one consumer and three in a group, end-to-end latency
at 2,000 records/s, 1 MiB records), measured against a redis-server of our own, so that a
reader sees what a user could pick instead of a Kafka broker.

    .venv/bin/python -m bench.redis_streams [--runs 3] [--quick] [--records N]

One server per persistence mode, each started fresh: ``appendonly no`` (memory only: nothing
survives a restart) and ``appendonly yes`` with ``appendfsync everysec`` (each write reaches
the AOF in the page cache before it is answered, and the AOF is fsynced once a second: a
machine crash loses up to a second, much as a Kafka broker at acks=1 that leaves fsync to the
operating system loses what was not yet flushed).

How the Kafka workloads map onto a stream:

- a topic is one stream (one key, no partitions) and a record one entry whose field ``v``
  holds the value; every run writes a fresh stream and deletes it afterwards. No MAXLEN:
  the stream keeps everything, as a topic without retention does;
- a producer sends pipelines (``transaction=False``) of 1,000 ``XADD`` commands, one round
  trip each: Redis has no batches of its own, and a pipeline is how a client amortises the
  trip;
- a consumer reads with ``XREAD COUNT 10000`` from id 0, each call continuing after the last
  id it got; a consumer group is ``XGROUP CREATE ... 0`` and ``XREADGROUP ... >``, each batch
  acknowledged (``XACK``) in the same round trip as the next read;
- the latency consumer blocks in ``XREAD BLOCK 100``, as a Kafka consumer waits up to
  ``fetch.wait.max.ms=100``.

The clients are redis-py with its pure-Python RESP parser (no ``hiredis``). One such client
process is the limit long before the server is, as one confluent-kafka client in Python is
in the Kafka rows: the server's CPU-seconds per million records are the figure that says
what the server itself costs. The server's CPU comes from /proc for its process tree: an AOF
rewrite child counts only while it is alive at the second reading.
"""

from __future__ import annotations

import argparse
import os
import signal
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path

import redis

from bench.brokers import HOST, Broker, BrokerError, find_executable, free_port, port_open
from bench.processes import in_processes
from bench.rows import Row, Run, describe, measure
from bench.workloads import MB, WorkloadError, _percentile, make_payloads, unique_topic

MODES = (("no", "redis (appendonly no)"), ("yes", "redis (appendonly everysec)"))
RECORD_SIZE = 100
FIELD = b"v"
PIPELINE = 1_000  # XADDs per round trip
READ_COUNT = 10_000  # entries per XREAD/XREADGROUP, as the Kafka consumer's consume(10000)
CLIENTS = 3  # processes of the three-producer and three-consumer rows
GROUP = "bench"

LATENCY_RATE = 2_000  # records/s
LATENCY_WARMUP_S = 1.0  # sent on the same schedule first, not measured
LATENCY_BLOCK_MS = 100
LATENCY_READ_COUNT = 1_000
LATENCY_DRAIN_S = 10.0  # how long the consumer may lag behind the last send
SEND_TIME = struct.Struct(">Q")  # a latency record's first 8 bytes: time.monotonic_ns() sent

LARGE_RECORD = 1024 * 1024
LARGE_BATCH = 8  # 1 MiB XADDs per pipeline, and entries per XREAD

# Not 6379: a Redis the machine runs for something else may come up there at any time.
PREFERRED_PORT = 16379
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0  # SIGTERM, then SIGKILL


# --------------------------------------------------------------------------- the server


class RedisServer(Broker):
    """One ``redis-server`` of our own, in its own session, listening on loopback only.

    It is a Broker for stopping (SIGTERM, SIGKILL after STOP_TIMEOUT_S), CPU accounting and
    its log; it is ready once it answers PING rather than a Kafka Metadata request. Its
    data directory (the AOF) is removed when it stops.
    """

    def __init__(self, appendonly: str, system: str, scratch_dir: Path) -> None:
        port = free_port(PREFERRED_PORT)
        self.data_dir = scratch_dir / f"redis-appendonly-{appendonly}"
        argv = [find_executable("redis-server"), "--port", str(port), "--bind", HOST, "--save", "",
                "--appendonly", appendonly, "--appendfsync", "everysec",
                "--dir", str(self.data_dir), "--daemonize", "no", "--protected-mode", "no"]
        super().__init__(system, argv, port, scratch_dir / f"redis-appendonly-{appendonly}.log",
                         cleanup=[self.data_dir])

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        if port_open(self.port):
            raise BrokerError(f"{self.name}: something already listens on port {self.port}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.monotonic()
        with self.client() as client:
            while not _answers_ping(client):
                if self.proc.poll() is not None:
                    raise BrokerError(f"{self.name} exited with code {self.proc.returncode}; "
                                      f"log {self.log_path}:\n{self.log_tail(8)}")
                if time.monotonic() - t0 > timeout:
                    raise BrokerError(f"{self.name} did not answer PING in {timeout:.0f} s")
                time.sleep(0.05)
        self.start_seconds = time.monotonic() - t0

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port)


def _answers_ping(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@contextmanager
def running_redis(appendonly: str, system: str, scratch_dir: Path) -> Iterator[RedisServer]:
    """A started RedisServer, stopped however the block ends."""
    server = RedisServer(appendonly, system, scratch_dir)
    try:
        server.start()
        yield server
    finally:
        server.stop(STOP_TIMEOUT_S)


@contextmanager
def fresh_stream(client: redis.Redis, kind: str) -> Iterator[str]:
    """The key of a stream no run has used; deleted afterwards, to give its memory back."""
    stream = unique_topic(kind)
    try:
        yield stream
    finally:
        client.delete(stream)


# --------------------------------------------------------------------------- the rows


def redis_rows(runs: int, quick: bool, records: int, scratch_dir: Path) -> list[Row]:
    """Every row of both persistence modes, each measured ``runs`` times against a server
    started for the mode (its log and AOF under ``scratch_dir``). Raises BrokerError when a
    server cannot be started; a failed run is recorded in its row."""
    payloads = make_payloads(records, RECORD_SIZE)
    rows: list[Row] = []
    for appendonly, system in MODES:
        with running_redis(appendonly, system, scratch_dir) as server:
            rows += mode_rows(server, runs, quick, payloads)
    return rows


def mode_rows(server: RedisServer, runs: int, quick: bool, payloads: list[bytes]) -> list[Row]:
    """The six rows of one running server, each measured ``runs`` times in a row."""
    system = server.name
    measured: list[tuple[Row, Callable[[], Run]]] = [
        (Row("throughput", "one producer", system, "records/s"),
         lambda: one_producer(server, payloads)),
        (Row("throughput", "three producers", system, "records/s"),
         lambda: three_producers(server, len(payloads))),
        (Row("throughput", "one consumer", system, "records/s"),
         lambda: one_consumer(server, payloads)),
        (Row("throughput", "three consumers in a group", system, "records/s"),
         lambda: three_consumers(server, payloads)),
        (Row("latency", "end-to-end at 2,000 records/s", system, "ms", higher_is_better=False,
             note="p50; p99, p99.9 and max beside it"),
         lambda: end_to_end_latency(server, 3.0 if quick else 10.0)),
        (Row("large records", "1 MiB records", system, "MB/s",
             note="fetch; produce beside it"),
         lambda: large_records(server, 50 if quick else 200)),
    ]
    return [measure(row, runs, once) for row, once in measured]


def throughput_run(server: RedisServer, records: int, seconds: float,
                   broker_cpu_s: float) -> Run:
    """The run of a throughput row: records/s, and what the server spent on them."""
    return {"value": records / seconds, "mb_per_s": records * RECORD_SIZE / MB / seconds,
            "broker_cpu_s": broker_cpu_s, "broker_cpu_s_per_m": broker_cpu_s / records * 1e6,
            "rss_mb": server.rss_mb(), "seconds": seconds}


def append(client: redis.Redis, stream: str, values: list[bytes], batch: int = PIPELINE) -> None:
    """XADDs ``values`` to ``stream`` in order, ``batch`` of them per round trip."""
    for i in range(0, len(values), batch):
        pipe = client.pipeline(transaction=False)
        for value in values[i : i + batch]:
            pipe.xadd(stream, {FIELD: value})
        pipe.execute()


def read_all(client: redis.Redis, stream: str, expected: int, count: int) -> bytes:
    """Reads ``expected`` entries of ``stream`` from id 0 with XREAD COUNT ``count``, each
    call continuing after the last id the previous one got; returns the last value."""
    last_id, read = b"0", 0
    while read < expected:
        reply = client.xread({stream: last_id}, count=count)
        if not reply:
            raise WorkloadError(f"{stream} ended after {read} of {expected} entries")
        entries = reply[0][1]
        read += len(entries)
        last_id, fields = entries[-1]
    return fields[FIELD]


def one_producer(server: RedisServer, payloads: list[bytes]) -> Run:
    with server.client() as client, fresh_stream(client, "one-producer") as stream:
        cpu = server.cpu_now()
        t0 = time.perf_counter()
        append(client, stream, payloads)
        seconds = time.perf_counter() - t0
        return throughput_run(server, len(payloads), seconds, server.cpu_now() - cpu)


def one_consumer(server: RedisServer, payloads: list[bytes]) -> Run:
    """The stream is filled first, untimed; then read back from the start by one client."""
    with server.client() as client, fresh_stream(client, "one-consumer") as stream:
        append(client, stream, payloads)
        cpu = server.cpu_now()
        t0 = time.perf_counter()
        last = read_all(client, stream, len(payloads), READ_COUNT)
        seconds = time.perf_counter() - t0
        run = throughput_run(server, len(payloads), seconds, server.cpu_now() - cpu)
    if len(last) != RECORD_SIZE:
        raise WorkloadError(f"the last entry holds {len(last)} bytes, not {RECORD_SIZE}")
    return run


def three_producers(server: RedisServer, records: int) -> Run:
    """``records`` XADDed into one stream by CLIENTS processes, a share each; records/s from
    the start signal until the last one's last pipeline came back."""
    shares = [records // CLIENTS + (i < records % CLIENTS) for i in range(CLIENTS)]
    with server.client() as client, fresh_stream(client, "three-producers") as stream:
        clients = in_processes(server, _producer,
                               [(server.port, stream, share) for share in shares])
        length = client.xlen(stream)
        if length != records:
            raise WorkloadError(f"{stream} holds {length} entries, not {records}")
        return throughput_run(server, records, clients.seconds, clients.broker_cpu_s)


def three_consumers(server: RedisServer, payloads: list[bytes]) -> Run:
    """A filled stream (untimed) read by CLIENTS processes in one consumer group from id 0;
    records/s from the start signal until the last entry was read."""
    records = len(payloads)
    with server.client() as client, fresh_stream(client, "three-consumers") as stream:
        append(client, stream, payloads)
        client.xgroup_create(stream, GROUP, id="0")
        clients = in_processes(
            server, _group_consumer,
            [(server.port, stream, f"consumer-{i}") for i in range(CLIENTS)])
        pending = client.xinfo_groups(stream)[0]["pending"]
        if clients.records != records or pending:
            raise WorkloadError(f"the group read {clients.records} of {records} entries and "
                                f"left {pending} unacknowledged")
        return throughput_run(server, records, clients.seconds, clients.broker_cpu_s)


# --------------------------------------------------------------------------- client processes


def _client(port: int) -> redis.Redis:
    """A client process's connection, made before the clock starts."""
    client = redis.Redis(host=HOST, port=port)
    client.ping()
    return client


def _producer(port: int, stream: str, count: int) -> Callable[[], tuple[int, float]]:
    """Generates ``count`` values; the timed part XADDs them."""
    client, values = _client(port), make_payloads(count, RECORD_SIZE)

    def produce() -> tuple[int, float]:
        append(client, stream, values)
        return count, time.monotonic()

    return produce


def _group_consumer(port: int, stream: str,
                    consumer: str) -> Callable[[], tuple[int, float]]:
    client = _client(port)
    return lambda: read_group(client, stream, consumer)


def read_group(client: redis.Redis, stream: str, consumer: str) -> tuple[int, float]:
    """XREADGROUP ``>`` as ``consumer`` until the group has nothing new for it, XACKing each
    batch in the round trip of the next read. The stream is complete before the first read,
    so an empty answer means the group has delivered every entry."""
    read, last_read_at, delivered = 0, time.monotonic(), []
    while True:
        pipe = client.pipeline(transaction=False)
        if delivered:
            pipe.xack(stream, GROUP, *delivered)
        pipe.xreadgroup(GROUP, consumer, {stream: ">"}, count=READ_COUNT)
        reply = pipe.execute()[-1]
        if not reply:
            return read, last_read_at
        last_read_at = time.monotonic()
        entries = reply[0][1]
        read += len(entries)
        delivered = [entry_id for entry_id, _ in entries]


# --------------------------------------------------------------------------- latency


def end_to_end_latency(server: RedisServer, seconds: float) -> Run:
    """One producer thread XADDs a record every 1/LATENCY_RATE s for LATENCY_WARMUP_S and
    then ``seconds``, each opening with its send time; a consumer thread on its own
    connection blocks in XREAD from the last id it got. Latency = receive - send time of
    each record after the warm-up."""
    warmup = int(LATENCY_RATE * LATENCY_WARMUP_S)
    total = warmup + int(LATENCY_RATE * seconds)
    stop = threading.Event()
    with server.client() as client, fresh_stream(client, "latency") as stream, \
            ThreadPoolExecutor(2, thread_name_prefix="latency") as pool:
        received = pool.submit(receive_latencies, server, stream, total, warmup, stop)
        sent = pool.submit(send_on_schedule, client, stream, total, stop)
        try:
            sent.result()
            wait([received], timeout=LATENCY_DRAIN_S)
        finally:
            stop.set()
        latencies_ms = sorted(ns / 1e6 for ns in received.result())
    if not latencies_ms:
        raise WorkloadError("no measured record came back")
    return {"value": _percentile(latencies_ms, 50), "p99_ms": _percentile(latencies_ms, 99),
            "p999_ms": _percentile(latencies_ms, 99.9), "max_ms": latencies_ms[-1],
            "records": len(latencies_ms), "lost": total - warmup - len(latencies_ms)}


def send_on_schedule(client: redis.Redis, stream: str, count: int,
                     stop: threading.Event) -> None:
    """XADDs ``count`` records on a monotonic schedule of LATENCY_RATE a second (one late
    send does not shift the next), each opening with the time it was sent."""
    pad = os.urandom(RECORD_SIZE - SEND_TIME.size)
    period_ns = 1_000_000_000 // LATENCY_RATE
    clock, pack = time.monotonic_ns, SEND_TIME.pack
    start = clock() + 1_000_000
    for i in range(count):
        if stop.is_set():
            return
        delay = start + i * period_ns - clock()
        if delay > 0:
            time.sleep(delay / 1e9)
        client.xadd(stream, {FIELD: pack(clock()) + pad})


def receive_latencies(server: RedisServer, stream: str, total: int, warmup: int,
                      stop: threading.Event) -> list[int]:
    """Nanoseconds from send to receipt of each record after the first ``warmup``, read
    until ``total`` came or ``stop`` is set."""
    latencies: list[int] = []
    clock, unpack = time.monotonic_ns, SEND_TIME.unpack_from
    last_id, seen = b"0", 0
    with server.client() as client:
        while seen < total and not stop.is_set():
            reply = client.xread({stream: last_id}, count=LATENCY_READ_COUNT,
                                 block=LATENCY_BLOCK_MS)
            now = clock()
            if not reply:
                continue
            entries = reply[0][1]
            for _, fields in entries[max(0, warmup - seen):]:
                latencies.append(now - unpack(fields[FIELD])[0])
            seen += len(entries)
            last_id = entries[-1][0]
    return latencies


# --------------------------------------------------------------------------- 1 MiB records


def large_records(server: RedisServer, count: int) -> Run:
    """``count`` 1 MiB values XADDed LARGE_BATCH per pipeline, then read back LARGE_BATCH per
    XREAD: MB/s each way, the read being the row's figure."""
    values = make_payloads(count, LARGE_RECORD)
    with server.client() as client, fresh_stream(client, "large") as stream:
        t0 = time.perf_counter()
        append(client, stream, values, LARGE_BATCH)
        produce_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        last = read_all(client, stream, count, LARGE_BATCH)
        read_s = time.perf_counter() - t0
    if len(last) != LARGE_RECORD:
        raise WorkloadError(f"the last entry holds {len(last)} bytes, not {LARGE_RECORD}")
    megabytes = count * LARGE_RECORD / MB
    return {"value": megabytes / read_s, "produce_mb_per_s": megabytes / produce_s,
            "records": count}


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.redis_streams",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of every row (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help="100,000 records, 3 s of latency, 50 large records")
    parser.add_argument("--records", type=int,
                        help="records of the throughput rows (default 1,000,000; quick 100,000)")
    args = parser.parse_args(argv)
    # SIGTERM raises KeyboardInterrupt as Ctrl-C does, so that the servers are stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    records = args.records or (100_000 if args.quick else 1_000_000)
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as scratch:
        rows = redis_rows(args.runs, args.quick, records, Path(scratch))
    for row in rows:
        print(describe(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
