"""A local cluster: a ZooKeeper server and odradek brokers as real processes on loopback,
for ``odradek cluster`` and for tests.

Everything of one cluster lives in its directory::

    odradek-cluster/
      cluster.json         {"brokers": [1, 2, 3], "configs": {...}, ...} of the last start
      zookeeper/           the ZooKeeperServer's directory (see odradek.cluster.zookeeper)
      broker-1/
        broker.json        {"pid": 4712, "port": 40125, "internal_port": 40126, ...}
        broker.log         the broker's standard output and error, appended to by every start
        data/              log.dirs
      broker-2/ ...

Each broker has two listeners on loopback: ``PLAINTEXT`` for clients and ``INTERNAL`` for
replication between brokers (``inter.broker.listener.name``), as a deployment separates
the networks. Ports are picked at the first start and kept across restarts, so a client
that knew a broker finds it again.

Like the ZooKeeper JVM, every broker runs in a session of its own, leading its own process
group, which is what every signal here goes to: it outlives the process that started it
(``odradek cluster up`` starts a cluster and exits; ``odradek cluster down`` finds it again
with :meth:`LocalCluster.from_directory`), and a pid in ``broker.json`` counts only while
that process's command line still names this broker's directory, so a stale file never
gets another process signalled.

These classes are not thread-safe.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, suppress
from pathlib import Path

from kio.schema.metadata.v12.request import MetadataRequest

from odradek.client.connection import BrokerConnection, BrokerConnectionError
from odradek.cluster.process import (
    POLL_INTERVAL_S,
    command_line,
    log_tail,
    wait_for_exit,
    write_json,
)
from odradek.cluster.zookeeper import (
    KILL_WAIT_S,
    LOG_TAIL_LINES,
    ZooKeeperServer,
    ZooKeeperServerError,
)

HOST = "127.0.0.1"
CLIENT_LISTENER = "PLAINTEXT"
INTER_BROKER_LISTENER = "INTERNAL"
# A first start that finds a port taken tries again on others, this many times in all; the
# broker's error for it has this in it (its bind's or its listen's).
PORT_ATTEMPTS = 3
PORT_TAKEN = "in use"
# A broker connecting to ZooKeeper, loading its logs and joining the controller's view takes
# a second or two; a loaded CI machine, several times that.
START_TIMEOUT_S = 30.0
# SIGTERM starts a controlled shutdown: the controller moves this broker's leaderships
# (up to controlled.shutdown.max.retries + 1 attempts, 5 s apart by default) before the
# broker flushes and closes its logs.
STOP_TIMEOUT_S = 60.0
# How long start() waits for one TCP connection attempt to the client port.
CONNECT_TIMEOUT_S = 0.2
# How long start() waits for a broker's metadata before asking again.
METADATA_TIMEOUT_S = 2.0


class BrokerProcessError(RuntimeError):
    """A broker could not be started, or the process in its directory is not running."""


class LocalClusterError(RuntimeError):
    """No cluster was started in a directory, or some of its processes could not be
    started or stopped."""


# What starting or signalling a process may raise: a start that failed, a process that
# survived SIGKILL, or a signal the OS refused.
PROCESS_ERRORS = (BrokerProcessError, ZooKeeperServerError, OSError)


class BrokerProcess:
    """One odradek broker, ``odradek broker --set ...``, in an OS process of its own."""

    def __init__(self, node_id: int, directory: Path, zookeeper_connect: str, port: int = 0,
                 internal_port: int = 0, configs: dict[str, str] | None = None) -> None:
        """``port`` and ``internal_port`` 0 pick free ports at the first start; later starts
        keep them. ``configs`` are broker configs applied after the ones derived here, so
        they may override any of them."""
        self.node_id = node_id
        self.directory = Path(directory).resolve()
        self.zookeeper_connect = zookeeper_connect
        self._port = port
        self._internal_port = internal_port
        self.configs = dict(configs or {})
        self._process: subprocess.Popen | None = None
        self._pid: int | None = None

    @classmethod
    def from_directory(cls, directory: Path) -> BrokerProcess:
        """The broker last started in ``directory``, perhaps by another process, which can be
        stopped, killed, paused and restarted from here."""
        try:
            state = json.loads((Path(directory) / "broker.json").read_text())
        except FileNotFoundError:
            raise BrokerProcessError(f"no broker was started in {directory}") from None
        broker = cls(state["node_id"], directory, state["zookeeper_connect"], state["port"],
                     state["internal_port"], state["configs"])
        broker._pid = state["pid"]
        return broker

    @property
    def port(self) -> int:
        """The client (PLAINTEXT) listener's port; 0 until the first start picks one."""
        return self._port

    @property
    def internal_port(self) -> int:
        """The inter-broker (INTERNAL) listener's port; 0 until the first start picks one."""
        return self._internal_port

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self._port}"

    @property
    def pid(self) -> int | None:
        """The broker's process id since the last start (None before any)."""
        return self._pid

    @property
    def running(self) -> bool:
        """Whether the process is alive; a paused broker is running, though it answers
        nothing."""
        if self._process is not None:
            return self._process.poll() is None
        return self._pid is not None and _names_directory(self._pid, self.directory)

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    def broker_configs(self) -> dict[str, str]:
        """What the broker is started with, as ``--set key=value``."""
        return {
            "listeners": f"{CLIENT_LISTENER}://{HOST}:{self._port},"
                         f"{INTER_BROKER_LISTENER}://{HOST}:{self._internal_port}",
            "listener.security.protocol.map":
                f"{CLIENT_LISTENER}:PLAINTEXT,{INTER_BROKER_LISTENER}:PLAINTEXT",
            "inter.broker.listener.name": INTER_BROKER_LISTENER,
            "broker.id": str(self.node_id),
            "node.id": str(self.node_id),
            "zookeeper.connect": self.zookeeper_connect,
            "log.dirs": str(self.data_dir),
            **self.configs,
        }

    def start(self, wait_s: float = START_TIMEOUT_S) -> BrokerProcess:
        """Launches the broker and returns once it listens on its client port, which it
        does only after it has registered in ZooKeeper. If it exits or does not listen
        within ``wait_s``, it is killed and the error quotes the end of its log.

        At its first start, a broker whose ports another process took meanwhile (ports
        are picked free, then let go until the broker binds them) is started again on
        other ports, up to ``PORT_ATTEMPTS`` times; a restart keeps its ports."""
        if self.running:
            raise BrokerProcessError(
                f"broker {self.node_id} in {self.directory} is already running "
                f"(pid {self._pid})")
        if self._pid is None:  # a first start
            for _ in range(PORT_ATTEMPTS - 1):
                log_start = self._log_size()
                try:
                    return self._launch(wait_s, log_start)
                except BrokerProcessError:
                    if PORT_TAKEN not in self._log_since(log_start):
                        raise
                self._port = self._internal_port = 0  # _claim_ports picks others
        return self._launch(wait_s, self._log_size())

    def _launch(self, wait_s: float, log_start: int) -> BrokerProcess:
        self._claim_ports()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "odradek.cli.main", "broker"]
        for key, value in self.broker_configs().items():
            command += ["--set", f"{key}={value}"]
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True,
                                             cwd=self.directory)
        self._pid = self._process.pid
        self._write_broker_json()
        try:
            self._wait_until_serving(wait_s, log_start)
        except BrokerProcessError:
            self.kill()
            raise
        return self

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM, on which the broker does a controlled shutdown and closes its logs
        cleanly; SIGKILL if it has not exited within ``timeout_s``. Returns once it has
        exited; does nothing if it is not running."""
        if not self.running:
            return
        with suppress(ProcessLookupError):  # it exited meanwhile
            os.killpg(self._pid, signal.SIGTERM)
            # A paused broker keeps SIGTERM pending until it runs again.
            os.killpg(self._pid, signal.SIGCONT)
        if not self._wait_for_exit(timeout_s):
            self.kill()

    def kill(self) -> None:
        """SIGKILL, as a crash would end it; returns once it has exited. Its ZooKeeper
        session lives on until ``zookeeper.session.timeout.ms`` passes, and only then do the
        other brokers see it gone. Does nothing if it is not running."""
        if not self.running:
            return
        with suppress(ProcessLookupError):
            os.killpg(self._pid, signal.SIGKILL)
        if not self._wait_for_exit(KILL_WAIT_S):
            raise BrokerProcessError(f"broker {self.node_id} (pid {self._pid}) survived SIGKILL")

    def pause(self) -> None:
        """SIGSTOP: the broker holds its connections and its ZooKeeper session (until the
        session times out) and answers nothing, as a broker in a long GC pause."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def restart(self, wait_s: float = START_TIMEOUT_S) -> BrokerProcess:
        """Stops (controlled shutdown) and starts again on the same ports and data."""
        self.stop()
        return self.start(wait_s)

    def _claim_ports(self) -> None:
        unpicked = [name for name in ("_port", "_internal_port") if not getattr(self, name)]
        for name, port in zip(unpicked, free_ports(len(unpicked))):
            setattr(self, name, port)

    def _write_broker_json(self) -> None:
        write_json(self.directory / "broker.json", {
            "node_id": self.node_id, "pid": self._pid, "port": self._port,
            "internal_port": self._internal_port, "zookeeper_connect": self.zookeeper_connect,
            "configs": self.configs})

    def _wait_until_serving(self, timeout_s: float, log_start: int) -> None:
        """Until the broker says, in its log after ``log_start``, that it listens on its
        client port. A connection accepted there proves less: another process may hold
        the port, and then this broker fails to listen, and says that instead."""
        deadline = time.monotonic() + timeout_s
        listening = f" listening on {HOST}:{self._port} (listener {CLIENT_LISTENER},"
        while listening not in self._log_since(log_start):
            if self._process.poll() is not None:
                raise self._start_error(f"exited with code {self._process.returncode}")
            if time.monotonic() >= deadline:
                raise self._start_error(f"did not listen within {timeout_s} s")
            time.sleep(POLL_INTERVAL_S)

    def _log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def _log_since(self, offset: int) -> str:
        with self.log_path.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def known_brokers(self) -> set[int]:
        """The node ids this broker's metadata lists; none when it does not answer."""
        try:
            return asyncio.run(self._metadata_brokers())
        except (BrokerConnectionError, TimeoutError):
            return set()

    async def _metadata_brokers(self) -> set[int]:
        connection = await BrokerConnection.open(
            HOST, self._port, client_id="odradek-cluster", connect_timeout_s=CONNECT_TIMEOUT_S)
        try:
            answer = await connection.send(
                MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                include_topic_authorized_operations=False),
                timeout_s=METADATA_TIMEOUT_S)
        finally:
            connection.close()
        return {broker.node_id for broker in answer.brokers}

    def _start_error(self, what: str) -> BrokerProcessError:
        return BrokerProcessError(
            f"broker {self.node_id} on {self.bootstrap} {what}; the end of {self.log_path}:\n"
            f"{log_tail(self.log_path, LOG_TAIL_LINES)}")

    def _wait_for_exit(self, timeout_s: float) -> bool:
        return wait_for_exit(lambda: self.running, timeout_s)

    def _signal(self, signum: signal.Signals) -> None:
        if not self.running:
            raise BrokerProcessError(f"broker {self.node_id} in {self.directory} is not running")
        os.killpg(self._pid, signum)


class LocalCluster:
    """A ZooKeeper server in ``directory/zookeeper`` and brokers 1..n in
    ``directory/broker-<id>``, started and stopped together::

        with LocalCluster(tmp_path, brokers=3) as cluster:
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
            cluster.brokers[2].kill()

    ``brokers`` is filled at the first start (the brokers need ZooKeeper's address)."""

    def __init__(self, directory: Path, brokers: int = 3, configs: dict[str, str] | None = None,
                 zookeeper_session_timeout_ms: int = 6000) -> None:
        """Every broker gets ``zookeeper.session.timeout.ms`` and then ``configs``: a short
        session makes a killed broker leave the cluster, and its partitions fail over,
        within seconds."""
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, not {brokers}")
        self.directory = Path(directory).resolve()
        self.broker_count = brokers
        self.configs = dict(configs or {})
        self.zookeeper_session_timeout_ms = zookeeper_session_timeout_ms
        self.zookeeper = ZooKeeperServer(self.directory / "zookeeper")
        self.brokers: dict[int, BrokerProcess] = {}

    @classmethod
    def from_directory(cls, directory: Path) -> LocalCluster:
        """The cluster last started in ``directory``, perhaps by another process."""
        directory = Path(directory)
        try:
            state = json.loads((directory / "cluster.json").read_text())
            zookeeper = ZooKeeperServer.from_directory(directory / "zookeeper")
        except (FileNotFoundError, ZooKeeperServerError):
            raise LocalClusterError(f"no cluster was started in {directory}") from None
        cluster = cls(directory, len(state["brokers"]), state["configs"],
                      state["zookeeper_session_timeout_ms"])
        cluster.zookeeper = zookeeper
        for node_id in state["brokers"]:
            # A broker whose start was never reached (an earlier one failed) has no file.
            with suppress(BrokerProcessError):
                cluster.brokers[node_id] = BrokerProcess.from_directory(
                    cluster._broker_directory(node_id))
        return cluster

    @property
    def bootstrap_servers(self) -> str:
        """The client addresses of every broker, comma-separated, as clients take them."""
        return ",".join(broker.bootstrap for _, broker in sorted(self.brokers.items()))

    @property
    def running(self) -> bool:
        """Whether any of the cluster's processes is alive."""
        return self.zookeeper.running or any(b.running for b in self.brokers.values())

    def start(self, wait_s: float = START_TIMEOUT_S) -> LocalCluster:
        """Starts ZooKeeper, then every broker at once, leaving alone those already running;
        returns once all accept connections and each one's metadata lists them all. If any
        fails to start (or the start is interrupted), every process of the cluster is killed
        and the error says why."""
        try:
            if not self.zookeeper.running:
                self.zookeeper.start()
            if not self.brokers:
                self._create_brokers()
            self._write_cluster_json()
            with ThreadPoolExecutor(len(self.brokers)) as pool:
                starts = [pool.submit(broker.start, wait_s) for broker in self.brokers.values()
                          if not broker.running]
            for start in starts:
                start.result()
            self._wait_until_formed(wait_s)
        except BaseException as exc:
            self._stop_all(kill=True)
            if isinstance(exc, PROCESS_ERRORS):
                raise LocalClusterError(str(exc)) from exc
            raise
        return self

    def stop(self) -> None:
        """Stops the brokers (SIGTERM: controlled shutdowns), then ZooKeeper, which they
        need to shut down in a controlled way. Whatever fails, every process is gone when
        this returns or raises."""
        self._stop_all(kill=False)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _broker_directory(self, node_id: int) -> Path:
        return self.directory / f"broker-{node_id}"

    def _create_brokers(self) -> None:
        # All ports picked at once, so that no two brokers are given the same one.
        ports = iter(free_ports(2 * self.broker_count))
        configs = {"zookeeper.session.timeout.ms": str(self.zookeeper_session_timeout_ms),
                   **self.configs}
        for node_id in range(1, self.broker_count + 1):
            self.brokers[node_id] = BrokerProcess(
                node_id, self._broker_directory(node_id), self.zookeeper.connect_string,
                next(ports), next(ports), configs)

    def _wait_until_formed(self, timeout_s: float) -> None:
        """Waits until every broker's metadata lists every broker: a broker accepts
        connections as soon as it has registered, before it has seen the others do so."""
        expected = set(self.brokers)
        deadline = time.monotonic() + timeout_s
        for broker in self.brokers.values():
            while (known := broker.known_brokers()) != expected:
                if time.monotonic() >= deadline:
                    raise BrokerProcessError(
                        f"broker {broker.node_id} on {broker.bootstrap} lists brokers "
                        f"{sorted(known)}, not {sorted(expected)}, after {timeout_s} s")
                time.sleep(POLL_INTERVAL_S)

    def _write_cluster_json(self) -> None:
        write_json(self.directory / "cluster.json", {
            "brokers": sorted(self.brokers), "configs": self.configs,
            "zookeeper_session_timeout_ms": self.zookeeper_session_timeout_ms})

    def _stop_all(self, kill: bool) -> None:
        errors: list[Exception] = []

        def stop(process: BrokerProcess | ZooKeeperServer) -> None:
            try:
                if kill:
                    process.kill()
                else:
                    process.stop()
            except PROCESS_ERRORS as exc:  # whatever went wrong, SIGKILL is the last word
                errors.append(exc)
                with suppress(*PROCESS_ERRORS):
                    process.kill()

        # Brokers one at a time, so that each controlled shutdown finds live brokers to move
        # leaderships to and a controller to move them; ZooKeeper, which that goes through,
        # last.
        with ExitStack() as always:
            always.callback(stop, self.zookeeper)
            for broker in self.brokers.values():
                stop(broker)
        if errors:
            raise LocalClusterError("; ".join(str(e) for e in errors))


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on loopback: all bound at once, then let go."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in sockets]


def _names_directory(pid: int, directory: Path) -> bool:
    """Whether process ``pid`` is alive and has a path under ``directory`` (its
    ``log.dirs``) in its command line: not a process that reused the pid, and not a zombie
    (whose command line is empty)."""
    under = os.fsencode(directory) + os.fsencode(os.sep)
    return any(under in arg for arg in command_line(pid))
