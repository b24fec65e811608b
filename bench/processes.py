"""Client processes started together: the three-producer and three-consumer rows.

One Python client is the limit of a process long before a broker is, so those rows run each
client in a process of its own (``spawn``: nothing of the parent's librdkafka or sockets is
inherited). Each process prepares untimed (imports, connects, generates its values, joins
its group) and reports ready; the clock starts when all are, with one start signal, and
stops at the last entry any of them handled. Their times are CLOCK_MONOTONIC, which every
process of the machine shares. A script that uses this needs the ``if __name__ ==
"__main__"`` guard: ``spawn`` imports the main module again in every child.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event

from bench.brokers import Broker
from bench.workloads import WorkloadError

READY_TIMEOUT_S = 60.0  # for a client process to import, connect and prepare
RUN_TIMEOUT_S = 600.0

# What a client process runs: given its arguments, it prepares (untimed) and returns the
# timed part, which answers how many entries it handled and the time.monotonic() at which
# it handled the last.
Job = Callable[..., Callable[[], tuple[int, float]]]


@dataclass(frozen=True)
class ClientsRun:
    """What the client processes of one run did together."""

    seconds: float  # from the start signal to the last entry any of them handled
    broker_cpu_s: float  # the broker's CPU-seconds meanwhile
    records: int  # the entries they handled


def in_processes(broker: Broker, job: Job, arguments: list[tuple]) -> ClientsRun:
    """Runs ``job(*arguments[i])`` in one spawned process per entry and starts their timed
    parts at once, when every one is ready. Raises WorkloadError when one fails, dies or
    outlasts its time."""
    context = multiprocessing.get_context("spawn")
    reports = context.Queue()
    start = context.Event()
    children = [context.Process(target=_client_process, daemon=True,
                                args=(job, index, args, reports, start))
                for index, args in enumerate(arguments)]
    for child in children:
        child.start()
    try:
        _collect(reports, "ready", children, READY_TIMEOUT_S)
        cpu = broker.cpu_now()
        t0 = time.monotonic()
        start.set()
        done = _collect(reports, "done", children, RUN_TIMEOUT_S)
        cpu = broker.cpu_now() - cpu
    finally:
        for child in children:
            child.kill()  # it has reported all it will, or the run has failed
            child.join()
    return ClientsRun(seconds=max(finished_at for _, finished_at in done) - t0,
                      broker_cpu_s=cpu, records=sum(count for count, _ in done))


def _client_process(job: Job, index: int, arguments: tuple, reports: Queue,
                    start: Event) -> None:
    """A client process's body: reports ("ready", index), waits for ``start``, reports
    ("done", index, (count, finished_at)), or ("failed", index, error) when anything
    raised."""
    try:
        timed = job(*arguments)
        reports.put(("ready", index, None))
        start.wait()
        reports.put(("done", index, timed()))
    except Exception as exc:  # noqa: BLE001 - handed to the parent, which fails the run
        reports.put(("failed", index, f"{type(exc).__name__}: {exc}"))


def _collect(reports: Queue, kind: str, children: list, timeout: float) -> list:
    """The payloads of one ``kind`` report from every child, in child order. Raises
    WorkloadError when a child failed, died or the time is up."""
    got: dict[int, object] = {}
    deadline = time.monotonic() + timeout
    while len(got) < len(children):
        try:
            what, index, payload = reports.get(timeout=0.1)
        except queue.Empty:
            dead = [child.exitcode for child in children if child.exitcode not in (None, 0)]
            if dead:
                raise WorkloadError(f"client processes exited with {dead}") from None
            if time.monotonic() > deadline:
                raise WorkloadError(f"client processes not {kind} in {timeout:.0f} s") from None
            continue
        if what == "failed":
            raise WorkloadError(f"client process {index}: {payload}")
        got[index] = payload
    return [got[index] for index in range(len(children))]
