"""A replicated odradek cluster (a real ZooKeeper, brokers as processes): produce throughput
with one and three replicas, failover after kill -9 and after a controlled shutdown, and
thousands of replicated partitions.

    .venv/bin/python -m bench.cluster [--records 1000000] [--runs 3] [--repeats 3]
                                      [--partitions-total 3000] [--quick] [--sections ...]
                                      [--wait-idle S] [--output FILE]

Every cluster is an ``odradek.cluster.local.LocalCluster`` in a fresh temporary directory,
stopped in a ``finally`` and then removed. It measures and never asserts: a wait that does
not end within its bound is reported as "did not happen within N s". See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from rich.console import Console
from rich.table import Table

from bench import brokers, report, workloads
from bench.brokers import RESULTS_DIR
from odradek.cluster.local import STOP_TIMEOUT_S, LocalCluster, LocalClusterError

SECTIONS = ("throughput", "failover", "partitions")
# What --quick changes, unless given: the whole run in under three minutes.
DEFAULTS = {"records": 1_000_000, "partitions_total": 3_000, "wait_idle": 20.0}
QUICK = {"records": 200_000, "partitions_total": 300, "wait_idle": 5.0}
PARTITIONS = 6  # of the throughput and failover topics
REPLICAS = 3
# The failover and many-partitions clusters: a killed broker's partitions move only once its
# ZooKeeper session has expired, so this is the floor of a failover after kill -9.
SESSION_TIMEOUT_MS = 6000
# The throughput clusters keep the broker's default zookeeper.session.timeout.ms.
DEFAULT_SESSION_TIMEOUT_MS = 18000
# Between Metadata requests while timing a failover: the resolution of the failover times.
METADATA_POLL_S = 0.05
FAILOVER_WAIT_S = SESSION_TIMEOUT_MS / 1000 + 60
# A restarted broker catching up and rejoining every ISR; 3,000 new partitions getting
# leaders and full ISRs (waits scale with the partitions: see many_partitions).
ISR_WAIT_S = 120.0
# A partition can refuse acks=all writes until a dead follower leaves its ISR, which
# replica.lag.time.max.ms (30 s) bounds.
PRODUCER_RESUME_WAIT_S = 45.0
BACKGROUND_RATE = 1_000  # records/s written while a broker goes away
BACKGROUND_PRODUCER = {
    "acks": -1,
    "linger.ms": 5,
    "sticky.partitioning.linger.ms": 0,  # every record to a random partition: all six busy
    "log_level": 0,  # a killed broker's refused connections would flood the terminal
}
PARTITIONS_PER_TOPIC = 100
TOPICS_PER_REQUEST = 10
CREATE_TIMEOUT_S = 120.0  # CreateTopics' operation and request timeout, per request
EXTRAPOLATE_BROKERS, EXTRAPOLATE_PARTITIONS = 50, 100_000
LOG_TAIL_LINES = 15
BROKER_LOG_ERROR = re.compile(r" (ERROR|CRITICAL) |^Traceback")
LOG_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
# ZooKeeperServer's log4j line (ISO8601, local time) when it expires a session.
SESSION_EXPIRED = re.compile(r"^(\S+ \S+) .*Expiring session 0x")


# --------------------------------------------------------------------------- clusters


@contextmanager
def running_cluster(result: dict, broker_count: int, configs: dict[str, str] | None = None,
                    session_timeout_ms: int = SESSION_TIMEOUT_MS) -> Iterator[LocalCluster]:
    """A started cluster in a fresh temporary directory, stopped and removed afterwards.
    Error lines of the broker logs go to ``result``; on a failure, the logs' tails too."""
    directory = Path(tempfile.mkdtemp(prefix="odradek-bench-cluster-"))
    cluster = LocalCluster(directory, broker_count, configs, session_timeout_ms)
    try:
        t0 = time.monotonic()
        cluster.start()
        result["start_s"] = time.monotonic() - t0
        yield cluster
    except Exception:
        result["log_tails"] = log_tails(cluster)
        for name, tail in result["log_tails"].items():
            print(f"    the end of {name}'s log:\n      " + tail.replace("\n", "\n      "))
        raise
    finally:
        try:
            cluster.stop()
        except LocalClusterError as exc:  # every process is gone all the same
            result["stop_error"] = str(exc)
        result["broker_log_errors"] = broker_log_errors(cluster)
        for line in result["broker_log_errors"][:30]:
            print(f"    {line}")
        shutil.rmtree(directory, ignore_errors=True)


def log_tails(cluster: LocalCluster) -> dict[str, str]:
    logs = {"zookeeper": cluster.zookeeper.log_path}
    logs |= {f"broker {i}": b.log_path for i, b in sorted(cluster.brokers.items())}
    tails = {}
    for name, path in logs.items():
        try:
            with path.open(errors="replace") as log:
                tails[name] = "".join(deque(log, LOG_TAIL_LINES)).rstrip()
        except OSError:
            tails[name] = "(no log)"
    return tails


def broker_log_errors(cluster: LocalCluster) -> list[str]:
    """Every ERROR or CRITICAL line of the brokers' logs with the traceback after it,
    prefixed with the broker id: a broker bug the numbers might hide."""
    found = []
    for node_id, broker in sorted(cluster.brokers.items()):
        try:
            lines = broker.log_path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        quoting = False
        for line in lines:
            # A traceback's lines carry no timestamp of their own.
            quoting = bool(BROKER_LOG_ERROR.search(line)) or (
                quoting and not LOG_TIMESTAMP.match(line))
            if quoting:
                found.append(f"broker {node_id}: {line}")
    return found


def process_cpu(cluster: LocalCluster) -> dict[str, float | None]:
    """CPU seconds (utime + stime from /proc/<pid>/stat) of each broker and of ZooKeeper."""
    cpu = {f"broker {i}": brokers.tree_cpu_seconds(b.pid) if b.running else None
           for i, b in sorted(cluster.brokers.items())}
    cpu["zookeeper"] = brokers.tree_cpu_seconds(cluster.zookeeper.pid)
    return cpu


def session_expired_after(cluster: LocalCluster, killed_at: float) -> float | None:
    """Seconds from ``killed_at`` (``time.time()``) until ZooKeeper expired a session, from
    its log. A session expires ``zookeeper.session.timeout.ms`` after the broker's last
    message to ZooKeeper (it pings every third of that), rounded up to ZooKeeper's next
    tick (500 ms): from a third earlier than kill time + session timeout to a tick later."""
    with cluster.zookeeper.log_path.open(errors="replace") as log:
        for line in log:
            if match := SESSION_EXPIRED.search(line):
                expired = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                if expired >= killed_at - 0.001:  # the log's resolution is a millisecond
                    return expired - killed_at
    return None


def expiry_times(cluster: LocalCluster, killed_at: float, seen: dict[str, float | None]
                 ) -> dict:
    """``seen`` (seconds after a kill -9 at ``killed_at``) counted from the moment ZooKeeper
    expired the session, and from kill time + the session timeout."""
    expired = session_expired_after(cluster, killed_at)
    return {
        "session_expired_s": expired,
        "after_session_expiry_s": {k: None if None in (v, expired) else v - expired
                                   for k, v in seen.items()},
        "after_kill_plus_timeout_s": {k: None if v is None else v - SESSION_TIMEOUT_MS / 1000
                                      for k, v in seen.items()},
    }


# --------------------------------------------------------------------------- Metadata


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def metadata(client: AdminClient, timeout_s: float = 10.0) -> ClusterMetadata | None:
    try:
        return client.list_topics(timeout=timeout_s)
    except KafkaException:
        return None  # no broker answered in time: a failover under way


def partitions_of(md: ClusterMetadata, topics: set[str]) -> dict[tuple[str, int], object]:
    return {(t.topic, p.id): p for t in md.topics.values() if t.topic in topics
            for p in t.partitions.values()}


def fully_replicated(topics: set[str], count: int) -> Callable[[ClusterMetadata], bool]:
    """Every one of the ``count`` partitions of ``topics`` has a leader and REPLICAS in-sync
    replicas."""
    def check(md: ClusterMetadata) -> bool:
        found = partitions_of(md, topics)
        return len(found) == count and all(
            p.leader >= 0 and len(p.isrs) == REPLICAS for p in found.values())
    return check


def moved_off(led: set[tuple[str, int]], victim: int, *, to_another: bool
              ) -> Callable[[ClusterMetadata], bool]:
    """No partition of ``led`` is led by ``victim``; with ``to_another``, each has a leader."""
    gone = (victim, -1) if to_another else (victim,)

    def check(md: ClusterMetadata) -> bool:
        found = partitions_of(md, {topic for topic, _ in led})
        return all(tp in found and found[tp].leader not in gone for tp in led)
    return check


def out_of_isrs(topics: set[str], victim: int) -> Callable[[ClusterMetadata], bool]:
    def check(md: ClusterMetadata) -> bool:
        return all(victim not in p.isrs for p in partitions_of(md, topics).values())
    return check


def watch(client: AdminClient, conditions: dict[str, Callable[[ClusterMetadata], bool]],
          timeout_s: float, since: float, poll_s: float = METADATA_POLL_S
          ) -> dict[str, float | None]:
    """Seconds from ``since`` (a monotonic time) until each condition first held on a
    Metadata response, asked every ``poll_s``; None for a condition that did not hold
    within ``timeout_s`` of ``since``, which is printed."""
    seen: dict[str, float | None] = dict.fromkeys(conditions)
    pending = dict(conditions)
    while pending:
        workloads.check_stop()
        md = metadata(client, timeout_s=min(10.0, max(1.0, timeout_s)))
        now = time.monotonic()
        for name, condition in list(pending.items()):
            if md is not None and condition(md):
                seen[name] = now - since
                del pending[name]
        if pending and now - since > timeout_s:
            for name in pending:
                print(f"    {name}: did not happen within {timeout_s:.0f} s")
            break
        time.sleep(poll_s if pending else 0)
    return seen


def wait_until(predicate: Callable[[], bool], timeout_s: float) -> float | None:
    t0 = time.monotonic()
    while not predicate():
        workloads.check_stop()
        if time.monotonic() - t0 > timeout_s:
            return None
        time.sleep(METADATA_POLL_S)
    return time.monotonic() - t0


def pick_victim(md: ClusterMetadata, topics: set[str]) -> tuple[int, set[tuple[str, int]]]:
    """The broker leading most partitions of ``topics``, the controller only if no other
    leads any (its failover would add a controller election), and the partitions it leads."""
    led: dict[int, set[tuple[str, int]]] = {}
    for tp, p in partitions_of(md, topics).items():
        led.setdefault(p.leader, set()).add(tp)
    led.pop(-1, None)
    candidates = [b for b in led if b != md.controller_id] or list(led)
    victim = max(sorted(candidates), key=lambda b: len(led[b]))
    return victim, led[victim]


def survivor_admin(cluster: LocalCluster, victim: int) -> AdminClient:
    """An admin client of a surviving broker only, connected before any clock starts."""
    survivor = min(b for b in cluster.brokers if b != victim)
    client = admin(cluster.brokers[survivor].bootstrap)
    client.list_topics(timeout=10)
    return client


# --------------------------------------------------------------------------- 1. throughput


@dataclass(frozen=True)
class ThroughputRow:
    name: str
    brokers: int
    replication_factor: int
    acks: int
    configs: dict[str, str] = field(default_factory=dict)


THROUGHPUT_ROWS = (
    ThroughputRow("1 broker, RF 1, acks=1", 1, 1, 1),
    ThroughputRow("3 brokers, RF 3, acks=1", 3, 3, 1),
    ThroughputRow("3 brokers, RF 3, acks=all, min.insync.replicas=2", 3, 3, -1,
                  {"min.insync.replicas": "2"}),
)


def high_watermarks_reach(bootstrap: str, topic: str, records: int, timeout_s: float
                          ) -> float | None:
    """Seconds until the high watermarks of ``topic``'s PARTITIONS partitions sum to
    ``records``: with acks=1, followers are still copying when the producer is done."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-cluster",
                         "log_level": 0})
    try:
        def replicated() -> bool:
            return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                       for p in range(PARTITIONS)) >= records
        return wait_until(replicated, timeout_s)
    finally:
        consumer.close()


def throughput_run(cluster: LocalCluster, settings: workloads.Settings,
                   payloads: list[bytes], row: ThroughputRow) -> dict:
    """One produce workload into a new topic, with every process's CPU seconds meanwhile."""
    before, client = process_cpu(cluster), brokers.own_cpu_seconds()
    machine = brokers.machine_cpu_seconds()
    run = workloads.produce_throughput(cluster.bootstrap_servers, settings, payloads,
                                       row.replication_factor, row.acks)
    # The CPU of copying to the followers counts too, though acks=1 does not wait for it.
    run["replicated_after_flush_s"] = high_watermarks_reach(
        cluster.bootstrap_servers, run["topic"], run["records"], ISR_WAIT_S)
    if run["replicated_after_flush_s"] is None:
        print(f"    the high watermarks did not reach the end within {ISR_WAIT_S:.0f} s")
    after = process_cpu(cluster)
    run["client_cpu_s"] = brokers.own_cpu_seconds() - client
    run["cpu_s"] = {name: after[name] - before[name] for name in before
                    if before[name] is not None and after[name] is not None}
    # Everything else on the machine meanwhile (other people's tests): noise.
    run["other_cpu_s"] = max(0.0, brokers.machine_cpu_seconds() - machine
                             - run["client_cpu_s"] - sum(run["cpu_s"].values()))
    broker_cpu = sum(v for name, v in run["cpu_s"].items() if name.startswith("broker"))
    run["broker_cpu_s_per_million"] = broker_cpu / run["records"] * 1e6
    return run


def replicated_throughput(args: argparse.Namespace, result: dict) -> None:
    """Each row on a cluster of its own, ``--runs`` times (a new topic each): the medians,
    and the best records/s."""
    settings = workloads.Settings(records=args.records, partitions=PARTITIONS)
    payloads = workloads.make_payloads(settings.records, settings.record_size)
    rows = result["rows"] = []
    for row in THROUGHPUT_ROWS:
        out: dict = {"row": row.name, "brokers": row.brokers,
                     "replication_factor": row.replication_factor, "acks": row.acks,
                     "broker_configs": row.configs, "runs": []}
        rows.append(out)
        if args.wait_idle > 0:
            out["cpu_busy_before"] = brokers.wait_until_idle(args.wait_idle)
        out["load_average_before"] = brokers.load_average()
        print(f"  {row.name}: {args.runs} x {args.records:,} records ...", flush=True)
        try:
            with running_cluster(out, row.brokers, row.configs,
                                 DEFAULT_SESSION_TIMEOUT_MS) as cluster:
                for _ in range(args.runs):
                    run = throughput_run(cluster, settings, payloads, row)
                    out["runs"].append(run)
                    print(f"    {run['records_per_s']:,.0f} records/s, "
                          f"{run['mb_per_s']:.1f} MB/s, broker CPU "
                          f"{run['broker_cpu_s_per_million']:.1f} s per million records",
                          flush=True)
        except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
            out["error"] = f"{type(exc).__name__}: {exc}"
            print(f"    ERROR {out['error'].splitlines()[0]}", flush=True)
        if runs := out["runs"]:
            for key in ("records_per_s", "mb_per_s", "broker_cpu_s_per_million",
                        "client_cpu_s", "other_cpu_s"):
                out[key] = statistics.median(run[key] for run in runs)
            out["best_records_per_s"] = max(run["records_per_s"] for run in runs)
            out["cpu_s"] = {name: statistics.median(run["cpu_s"][name] for run in runs)
                            for name in runs[0]["cpu_s"]}
        workloads.check_stop()
    base = rows[0].get("records_per_s")
    for out in rows:
        if base and "records_per_s" in out:
            out["ratio_to_single_broker"] = out["records_per_s"] / base


# --------------------------------------------------------------------------- 2. failover


class BackgroundProducer(threading.Thread):
    """Writes BACKGROUND_RATE records/s (acks=all) to a topic until stopped, noting each
    partition's deliveries: the longest gap between two deliveries to a partition is how
    long a producer saw it unavailable."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="background-producer", daemon=True)
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, **BACKGROUND_PRODUCER})
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.last_delivery: dict[int, float] = {}
        self.longest_gap: dict[int, float] = {}
        self.delivered = self.failed = 0
        self.first_error: str | None = None

    def run(self) -> None:
        value, period = os.urandom(100), 1 / BACKGROUND_RATE
        due = time.monotonic()
        while not self.halt.is_set():
            try:
                self.producer.produce(self.topic, value, on_delivery=self._on_delivery)
            except BufferError:
                pass  # the queue is full while partitions are unavailable: skip this one
            self.producer.poll(0)
            due += period
            time.sleep(max(0.0, due - time.monotonic()))
        self.producer.flush(10)

    def _on_delivery(self, error, message) -> None:
        now = time.monotonic()
        with self.lock:
            if error is not None:
                self.failed += 1
                self.first_error = self.first_error or str(error)
                return
            self.delivered += 1
            partition = message.partition()
            if (last := self.last_delivery.get(partition)) is not None:
                self.longest_gap[partition] = max(self.longest_gap.get(partition, 0.0),
                                                  now - last)
            self.last_delivery[partition] = now

    def delivered_to_all_since(self, since: float) -> bool:
        with self.lock:
            times = list(self.last_delivery.values())
        return len(times) == PARTITIONS and min(times) > since

    def stop(self) -> None:
        self.halt.set()
        self.join(30)


def failover_trial(cluster: LocalCluster, topics: set[str], kill: bool) -> dict:
    """A new RF 3 topic with a producer writing to it; the broker leading most of its
    partitions is killed (or stopped: a controlled shutdown) and the time until a surviving
    broker's Metadata shows them all led elsewhere is measured; then it is restarted and
    the trial ends once every ISR is full again."""
    topic = workloads.unique_topic("failover")
    topics.add(topic)
    workloads.create_topic(cluster.bootstrap_servers, topic, PARTITIONS,
                           replication_factor=REPLICAS)
    everyone = admin(cluster.bootstrap_servers)
    full = fully_replicated(topics, PARTITIONS * len(topics))
    trial: dict = {"topic": topic}
    producer = BackgroundProducer(cluster.bootstrap_servers, topic)
    producer.start()
    try:
        started = time.monotonic()
        if wait_until(lambda: producer.delivered_to_all_since(started), 30) is None:
            trial["note"] = "the producer had not reached every partition within 30 s"
            print(f"    {trial['note']}")
        md = everyone.list_topics(timeout=10)
        victim, led = pick_victim(md, {topic})
        trial |= {"victim": victim, "victim_was_controller": victim == md.controller_id,
                  "partitions_led": len(led)}
        watcher = survivor_admin(cluster, victim)
        stopped: dict = {}

        def controlled_shutdown() -> None:
            try:
                cluster.brokers[victim].stop()
            except Exception as exc:  # noqa: BLE001 - reported with the trial
                stopped["error"] = str(exc)
            stopped["exit_s"] = time.monotonic() - t0

        stopping = threading.Thread(target=controlled_shutdown, daemon=True)
        t0, killed_at = time.monotonic(), time.time()
        if kill:
            cluster.brokers[victim].kill()
        else:
            stopping.start()
        seen = watch(watcher, {"led elsewhere": moved_off(led, victim, to_another=True)},
                     FAILOVER_WAIT_S, since=t0)
        moved = trial["failover_s"] = seen["led elsewhere"]
        if kill:
            trial |= expiry_times(cluster, killed_at, seen)
        else:
            stopping.join(STOP_TIMEOUT_S + 10)
            trial |= {f"shutdown_{k}": v for k, v in stopped.items()}
        resumed_since = t0 + (moved or 0)
        if wait_until(lambda: producer.delivered_to_all_since(resumed_since),
                      PRODUCER_RESUME_WAIT_S) is None:
            print(f"    producer: some partition had no delivery within "
                  f"{PRODUCER_RESUME_WAIT_S:.0f} s of the failover")
    finally:
        producer.stop()
    with producer.lock:
        trial |= {"producer_longest_gap_s": max(producer.longest_gap.values(), default=None),
                  "producer_delivered": producer.delivered, "producer_failed": producer.failed,
                  "producer_first_error": producer.first_error}
    t1 = time.monotonic()
    cluster.brokers[victim].start()
    trial["restart_s"] = time.monotonic() - t1
    trial["full_isrs_again_s"] = watch(everyone, {"full ISRs": full}, ISR_WAIT_S,
                                       since=t1, poll_s=0.2)["full ISRs"]
    return trial


def failover(args: argparse.Namespace, result: dict) -> None:
    result["zookeeper_session_timeout_ms"] = SESSION_TIMEOUT_MS
    with running_cluster(result, REPLICAS) as cluster:
        topics: set[str] = set()
        for kill, name in ((True, "kill -9"), (False, "controlled shutdown")):
            trials = result[name] = {"trials": []}
            for i in range(args.repeats):
                print(f"  {name} {i + 1}/{args.repeats} ...", flush=True)
                trial = failover_trial(cluster, topics, kill)
                trials["trials"].append(trial)
                print(f"    broker {trial['victim']} (led {trial['partitions_led']}): "
                      f"{_seconds(trial['failover_s'])}; producer's longest gap "
                      f"{_seconds(trial['producer_longest_gap_s'])}", flush=True)
            trials["failover_median_s"] = _median([t["failover_s"] for t in trials["trials"]])


# --------------------------------------------------------------------------- 3. partitions


def read_znodes(connect: str) -> dict[str, int]:
    """Every znode's path and data length, read level by level with pipelined requests."""
    zk = KazooClient(hosts=connect, timeout=10)
    zk.start(timeout=10)
    sizes: dict[str, int] = {}
    try:
        level = ["/"]
        while level:
            gets = [(path, zk.get_async(path), zk.get_children_async(path)) for path in level]
            level = []
            for path, data, children in gets:
                try:
                    sizes[path] = len(data.get(timeout=30)[0] or b"")
                    level += [f"{path.rstrip('/')}/{child}" for child in children.get(30)]
                except NoNodeError:
                    pass  # an ephemeral znode gone meanwhile
    finally:
        zk.stop()
        zk.close()
    return sizes


def znode_census(connect: str, partitions: int, broker_count: int) -> dict:
    """ZooKeeper's data for the cluster, and per partition and per broker, extrapolated
    linearly to EXTRAPOLATE_BROKERS brokers and EXTRAPOLATE_PARTITIONS partitions."""
    sizes = read_znodes(connect)

    def under(prefix: str) -> dict[str, int]:
        return {p: n for p, n in sizes.items() if p == prefix or p.startswith(prefix + "/")}

    topics, ids, brokers_tree = under("/brokers/topics"), under("/brokers/ids"), under("/brokers")
    states = [n for p, n in topics.items() if p.endswith("/state")]
    census = {
        "znodes": len(sizes), "data_bytes": sum(sizes.values()),
        "path_bytes": sum(len(p) for p in sizes),
        "brokers_znodes": len(brokers_tree), "brokers_data_bytes": sum(brokers_tree.values()),
        "partition_states": len(states),
        "state_bytes_mean": sum(states) / len(states) if states else None,
        # /brokers/topics (assignments, partitions/<p>, their states) over the partitions.
        "znodes_per_partition": len(topics) / partitions,
        "bytes_per_partition": sum(topics.values()) / partitions,
        "path_bytes_per_partition": sum(len(p) for p in topics) / partitions,
        "bytes_per_broker_registration": sum(ids.values()) / broker_count,
    }
    rest_znodes = len(sizes) - len(topics) - len(ids)
    rest_bytes = sum(sizes.values()) - sum(topics.values()) - sum(ids.values())
    census["extrapolated"] = {
        "brokers": EXTRAPOLATE_BROKERS, "partitions": EXTRAPOLATE_PARTITIONS,
        "znodes": round(census["znodes_per_partition"] * EXTRAPOLATE_PARTITIONS
                        + (len(ids) - 1) / broker_count * EXTRAPOLATE_BROKERS + 1
                        + rest_znodes),
        "data_bytes": round(census["bytes_per_partition"] * EXTRAPOLATE_PARTITIONS
                            + census["bytes_per_broker_registration"] * EXTRAPOLATE_BROKERS
                            + rest_bytes),
        # Every broker watches every state znode (docs/architecture.md, "A cluster").
        "state_watches": EXTRAPOLATE_BROKERS * EXTRAPOLATE_PARTITIONS,
    }
    return census


def topic_sizes(total: int) -> list[int]:
    per_topic = min(PARTITIONS_PER_TOPIC, total)
    return [per_topic] * (total // per_topic) + ([total % per_topic] if total % per_topic else [])


def many_partitions(args: argparse.Namespace, result: dict) -> None:
    total = args.partitions_total
    sizes = topic_sizes(total)
    names = {f"many-{i:03d}": n for i, n in enumerate(sizes)}
    result |= {"partitions": total, "topics": len(sizes),
               "zookeeper_session_timeout_ms": SESSION_TIMEOUT_MS}
    ready_wait = max(ISR_WAIT_S, total / 10)
    with running_cluster(result, REPLICAS) as cluster:
        everyone = admin(cluster.bootstrap_servers)
        new = [NewTopic(name, n, REPLICAS) for name, n in names.items()]
        print(f"  creating {total:,} partitions ({len(sizes)} topics, RF {REPLICAS}) ...",
              flush=True)
        t0 = time.monotonic()
        for start in range(0, len(new), TOPICS_PER_REQUEST):
            futures = everyone.create_topics(new[start : start + TOPICS_PER_REQUEST],
                                             operation_timeout=CREATE_TIMEOUT_S,
                                             request_timeout=CREATE_TIMEOUT_S)
            for future in futures.values():
                future.result(CREATE_TIMEOUT_S)
        result["create_topics_s"] = time.monotonic() - t0
        result["full_isrs_s"] = watch(everyone, {"full": fully_replicated(set(names), total)},
                                      ready_wait, since=t0, poll_s=0.5)["full"]
        print(f"    created in {_seconds(result['create_topics_s'])}, every partition led "
              f"with {REPLICAS} in-sync replicas after {_seconds(result['full_isrs_s'])}",
              flush=True)
        result["zookeeper"] = znode_census(cluster.zookeeper.connect_string, total, REPLICAS)
        print(f"    ZooKeeper: {result['zookeeper']['znodes']:,} znodes, "
              f"{result['zookeeper']['bytes_per_partition']:.0f} B per partition", flush=True)

        md = everyone.list_topics(timeout=30)
        victim, led = pick_victim(md, set(names))
        result |= {"victim": victim, "victim_was_controller": victim == md.controller_id,
                   "partitions_led": len(led)}
        watcher = survivor_admin(cluster, victim)
        print(f"  kill -9 broker {victim} (leads {len(led):,}) ...", flush=True)
        t_kill, killed_at = time.monotonic(), time.time()
        cluster.brokers[victim].kill()
        # A thousand leaders to move and two thousand ISRs to shrink, one znode each.
        seen = watch(watcher, {"not led by it": moved_off(led, victim, to_another=False),
                               "led by another": moved_off(led, victim, to_another=True),
                               "out of every ISR": out_of_isrs(set(names), victim)},
                     FAILOVER_WAIT_S + ready_wait / 4, since=t_kill, poll_s=0.2)
        result["after_kill_s"] = seen
        result |= expiry_times(cluster, killed_at, seen)
        print(f"    session expired {_seconds(result['session_expired_s'])} after the kill; "
              f"none led by it {_seconds(result['after_session_expiry_s']['not led by it'])}"
              " after that", flush=True)


# --------------------------------------------------------------------------- the report


def _seconds(value: float | None) -> str:
    return "did not happen" if value is None else f"{value:.2f} s"


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.{digits}f}"


def _row_of_trials(values: list[float | None]) -> str:
    return "  ".join(_num(v) for v in values)


def _median(values: list[float | None]) -> float | None:
    return statistics.median(values) if values and None not in values else None


def throughput_table(result: dict, records: int, runs: int) -> Table:
    table = Table(title=f"replicated produce throughput ({records:,} x 100 B records, "
                        f"{PARTITIONS} partitions, one producer; medians of {runs} runs)")
    for column in ("setup", "records/s", "best", "MB/s", "vs 1 broker", "broker CPU s",
                   "broker CPU s / M records", "ZooKeeper CPU s", "client CPU s",
                   "others' CPU s"):
        table.add_column(column, justify="left" if column == "setup" else "right")
    for out in result["rows"]:
        if "records_per_s" not in out:
            table.add_row(out["row"], "ERROR", (out.get("error") or "no run").splitlines()[0][:60])
            continue
        cpu = out["cpu_s"]
        table.add_row(
            out["row"], _num(out["records_per_s"]), _num(out["best_records_per_s"]),
            _num(out["mb_per_s"], 1),
            f"{out.get('ratio_to_single_broker', 0):.2f}x",
            " + ".join(f"{v:.2f}" for k, v in cpu.items() if k.startswith("broker")),
            _num(out["broker_cpu_s_per_million"], 1), _num(cpu.get("zookeeper"), 1),
            _num(out["client_cpu_s"], 1), _num(out["other_cpu_s"], 1))
    return table


def failover_table(result: dict) -> Table:
    table = Table(title=f"failover of a {PARTITIONS}-partition RF {REPLICAS} topic, a "
                        f"{BACKGROUND_RATE:,} records/s acks=all producer writing "
                        f"(zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}); seconds")
    for column in ("broker goes away by", "until led elsewhere", "median",
                   "session expired (ZK log)", "led elsewhere after expiry", "median",
                   "producer's longest gap", "broker (*controller)"):
        table.add_column(column, justify="left" if column.startswith("broker g") else "right")
    for name in ("kill -9", "controlled shutdown"):
        trials = result.get(name, {}).get("trials", [])
        if not trials:
            continue
        after_expiry = [t.get("after_session_expiry_s", {}).get("led elsewhere")
                        for t in trials]
        table.add_row(
            name, _row_of_trials([t["failover_s"] for t in trials]),
            _num(_median([t["failover_s"] for t in trials])),
            _row_of_trials([t.get("session_expired_s") for t in trials]),
            _row_of_trials(after_expiry), _num(_median(after_expiry)),
            _row_of_trials([t["producer_longest_gap_s"] for t in trials]),
            " ".join(f"{t['victim']}{'*' if t['victim_was_controller'] else ''}"
                     for t in trials))
    return table


def partitions_table(result: dict) -> Table:
    table = Table(title=f"{result['partitions']:,} partitions ({result['topics']} topics), "
                        f"RF {REPLICAS}, 3 brokers")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("CreateTopics requests done", _seconds(result.get("create_topics_s")))
    table.add_row(f"every partition led, ISR of {REPLICAS}", _seconds(result.get("full_isrs_s")))
    if zk := result.get("zookeeper"):
        ext = zk["extrapolated"]
        table.add_row("ZooKeeper znodes: all / under /brokers",
                      f"{zk['znodes']:,} / {zk['brokers_znodes']:,}")
        table.add_row("ZooKeeper data bytes: all / under /brokers",
                      f"{zk['data_bytes']:,} / {zk['brokers_data_bytes']:,}")
        table.add_row("per partition: znodes, data B, path B",
                      f"{zk['znodes_per_partition']:.2f}, {zk['bytes_per_partition']:.0f}, "
                      f"{zk['path_bytes_per_partition']:.0f}")
        table.add_row("per broker registration: data B",
                      f"{zk['bytes_per_broker_registration']:.0f}")
        table.add_row(f"extrapolated: {ext['brokers']} brokers, {ext['partitions']:,} "
                      "partitions", f"{ext['znodes']:,} znodes, {ext['data_bytes'] / 1e6:.1f}"
                      f" MB data, {ext['state_watches'] / 1e6:.0f}M watches")
    if "after_kill_s" in result:
        table.add_row(f"kill -9 broker {result['victim']}: partitions it led",
                      f"{result['partitions_led']:,}")
        table.add_row("  its session expired (ZooKeeper's log), after the kill",
                      _seconds(result["session_expired_s"]))
        for name in ("not led by it", "led by another", "out of every ISR"):
            table.add_row(f"  {name}: after expiry / after kill + timeout",
                          f"{_seconds(result['after_session_expiry_s'][name])} / "
                          f"{_seconds(result['after_kill_plus_timeout_s'][name])}")
    return table


def render(console: Console, document: dict) -> None:
    results = document["results"]
    if results.get("throughput", {}).get("rows"):
        settings = document["settings"]
        console.print(throughput_table(results["throughput"], settings["records"],
                                       settings["runs"]))
    if "kill -9" in results.get("failover", {}):
        console.print(failover_table(results["failover"]))
    if "create_topics_s" in results.get("partitions", {}):
        console.print(partitions_table(results["partitions"]))
    for name, result in results.items():
        if "error" in result:
            console.print(f"{name}: ERROR {result['error']}", markup=False, highlight=False)


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.cluster",
                                description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, help="records per throughput row (default 1,000,000)")
    p.add_argument("--runs", type=int, default=3,
                   help="produce runs per throughput row, each into a new topic (default 3)")
    p.add_argument("--partitions-total", type=int,
                   help="partitions of the many-partitions cluster (default 3,000)")
    p.add_argument("--repeats", type=int, default=3, help="failovers of each kind (default 3)")
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK['records']:,} records, {QUICK['partitions_total']:,} "
                        f"partitions and --wait-idle {QUICK['wait_idle']:g} unless given")
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma-separated subset of {','.join(SECTIONS)}")
    p.add_argument("--wait-idle", type=float, metavar="S",
                   help="before each throughput row, wait up to S s for the CPUs to be <25%% "
                        "busy (default 20, --quick 5; 0 to skip)")
    p.add_argument("--output", help="JSON path (default bench/results/cluster-<timestamp>.json)")
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    if unknown := set(args.sections) - set(SECTIONS):
        p.error(f"unknown sections: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workloads.install_signal_handlers()  # SIGTERM too ends in the clusters' finally
    now = datetime.now(timezone.utc)
    output = Path(args.output or RESULTS_DIR / f"cluster-{now:%Y%m%dT%H%M%SZ}.json")
    command = shlex.join([os.path.basename(sys.executable), "-m", "bench.cluster",
                          *sys.argv[1:]])
    document: dict = {
        "timestamp": now.isoformat(), "command": command, "settings": vars(args),
        "environment": {
            "cpus": os.cpu_count(), "python": sys.version.split()[0],
            "librdkafka": confluent_kafka.libversion()[0],
            "odradek_git": brokers.tool_version(
                ["git", "-C", str(brokers.BENCH_DIR.parent), "describe", "--always",
                 "--dirty"])},
        "load_average_at_start": brokers.load_average(), "results": {}}
    sections = {"throughput": replicated_throughput, "failover": failover,
                "partitions": many_partitions}
    try:
        for name in args.sections:
            print(f"\n== {name}", flush=True)
            result = document["results"][name] = {}
            t0 = time.monotonic()
            try:
                sections[name](args, result)
            except Exception as exc:  # noqa: BLE001 - report it and go on with the next
                result["error"] = f"{type(exc).__name__}: {exc}"
                result["traceback"] = traceback.format_exc()
                print(f"  ERROR {result['error']}", flush=True)
            result["section_s"] = time.monotonic() - t0
    except KeyboardInterrupt:
        document["interrupted"] = True
        print("\ninterrupted: clusters stopped, partial results follow", flush=True)
    document["load_average_at_end"] = brokers.load_average()
    console = Console(width=None if sys.stdout.isatty() else 180)
    console.print(f"\n$ {command}", markup=False, highlight=False)
    render(console, document)
    report.write_json(output, document)
    print(f"\nresults: {output}")
    return 130 if document.get("interrupted") else 0


if __name__ == "__main__":
    sys.exit(main())
