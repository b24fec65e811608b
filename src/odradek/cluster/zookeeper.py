"""``ZooKeeperServer``: a real ZooKeeper server in a JVM subprocess, for ``odradek cluster``
and for tests.

The server is Apache ZooKeeper's standalone ``ZooKeeperServerMain`` as Debian packages it
(``libzookeeper-java``). Everything of one server lives in its directory::

    zookeeper/
      zoo.cfg            written at every start from the constructor's arguments
      log4j.properties   ZooKeeper's log to the JVM's standard output
      zookeeper.log      the JVM's standard output and error, appended to by every start
      server.json        {"pid": 4711, "port": 40123, ...} of the last start
      data/              ZooKeeper's snapshots and transaction logs, kept across restarts

The JVM runs in a session of its own, leading its own process group, which is what every
signal here goes to. A Ctrl-C meant for the terminal that started it does not reach it, and
it outlives the process that started it: ``odradek cluster up`` starts a server and exits,
``odradek cluster down`` finds it again with :meth:`ZooKeeperServer.from_directory` and
stops it. A pid in ``server.json`` counts only while that process still runs this
directory's ``zoo.cfg``, so a stale file (after a crash or a reboot) never gets another
process signalled.

This class is not thread-safe.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from odradek.cluster.process import (
    POLL_INTERVAL_S,
    command_line,
    log_tail,
    wait_for_exit,
    write_json,
)

CLASSPATH_ENV = "ODRADEK_ZOOKEEPER_CLASSPATH"
# Debian's libzookeeper-java: the server jar, whose manifest brings in the libraries it
# needs, and slf4j's log4j binding with log4j itself, without which ZooKeeper logs nothing.
DEBIAN_CLASSPATH = (
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
)
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1} - %m%n
"""

# A live server answers a four letter word at once; a paused one accepts the connection
# (the kernel does) and never answers.
RUOK_TIMEOUT_S = 1.0
# A SIGKILLed process is gone as soon as the kernel has freed it; longer means it is stuck
# in the kernel (D state) and waiting on will not help.
KILL_WAIT_S = 5.0
# Lines of zookeeper.log quoted in an error: enough for the head of a Java stack trace.
LOG_TAIL_LINES = 30


class ZooKeeperServerError(RuntimeError):
    """The server could not be started, or the process in its directory is not running."""


class ZooKeeperServer:
    def __init__(self, directory: Path, port: int = 0, host: str = "127.0.0.1",
                 tick_time_ms: int = 500, max_session_timeout_ms: int = 60000) -> None:
        """``port`` 0 picks a free port at the first start; later starts keep it.

        ZooKeeper checks sessions once a tick and grants session timeouts from two ticks up
        to ``max_session_timeout_ms``: the short default tick lets tests expire sessions
        within seconds."""
        self.directory = Path(directory).resolve()
        self.port = port
        self.host = host
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self._process: subprocess.Popen | None = None
        self._pid: int | None = None

    @classmethod
    def from_directory(cls, directory: Path) -> ZooKeeperServer:
        """The server last started in ``directory``, perhaps by another process, which can be
        stopped, killed, paused and restarted from here."""
        try:
            state = json.loads((Path(directory) / "server.json").read_text())
        except FileNotFoundError:
            raise ZooKeeperServerError(f"no ZooKeeper was started in {directory}") from None
        server = cls(directory, state["port"], state["host"], state["tick_time_ms"],
                     state["max_session_timeout_ms"])
        server._pid = state["pid"]
        return server

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The JVM's process id since the last start (None before any)."""
        return self._pid

    @property
    def running(self) -> bool:
        """Whether the JVM is alive; a paused server is running, though it answers nothing."""
        if self._process is not None:
            return self._process.poll() is None
        return self._pid is not None and _runs_config(self._pid, self.config_path)

    @property
    def config_path(self) -> Path:
        return self.directory / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"

    def ruok(self) -> bool:
        """Whether the server answers ZooKeeper's ``ruok`` with ``imok``: it is serving."""
        return self._four_letter_word(b"ruok") == b"imok"

    def _four_letter_word(self, word: bytes) -> bytes | None:
        """The server's whole answer to ``word`` (it closes the connection after it); None
        when it cannot be reached or does not answer in time."""
        try:
            with socket.create_connection((self.host, self.port), RUOK_TIMEOUT_S) as s:
                s.sendall(word)
                answer = b""
                while chunk := s.recv(4096):
                    answer += chunk
                return answer
        except OSError:
            return None

    def start(self, timeout_s: float = 30) -> ZooKeeperServer:
        """Launches the JVM and returns once it serves requests from its data directory. If
        it exits or is not serving within ``timeout_s``, it is killed and the error quotes
        the end of its log."""
        if self.running:
            raise ZooKeeperServerError(
                f"ZooKeeper in {self.directory} is already running (pid {self._pid})")
        command = [_java(), "-cp", _classpath(),
                   f"-Dlog4j.configuration={self._log4j_path.as_uri()}",
                   MAIN_CLASS, str(self.config_path)]
        self._claim_port()
        self._write_config()
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True,
                                             cwd=self.directory)
        self._pid = self._process.pid
        self._write_server_json()
        try:
            self._wait_until_serving(timeout_s)
        except ZooKeeperServerError:
            self.kill()
            raise
        return self

    def stop(self, timeout_s: float = 10) -> None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout_s``; returns once it
        has exited. Does nothing if it is not running."""
        if not self.running:
            return
        os.killpg(self._pid, signal.SIGTERM)
        # A paused JVM keeps SIGTERM pending until it runs again.
        os.killpg(self._pid, signal.SIGCONT)
        if not self._wait_for_exit(timeout_s):
            self.kill()

    def kill(self) -> None:
        """SIGKILL, as a crash would end it; returns once it has exited. Writes ZooKeeper
        acknowledged are on disk (it fsyncs its transaction log first) and a start finds
        them. Does nothing if it is not running."""
        if not self.running:
            return
        os.killpg(self._pid, signal.SIGKILL)
        if not self._wait_for_exit(KILL_WAIT_S):
            raise ZooKeeperServerError(f"ZooKeeper (pid {self._pid}) survived SIGKILL")

    def pause(self) -> None:
        """SIGSTOP: the server holds its connections and sessions and answers nothing, as a
        server in a long GC pause or behind a partition."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def restart(self, timeout_s: float = 30) -> ZooKeeperServer:
        """Stops and starts again on the same port and data."""
        self.stop()
        return self.start(timeout_s)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def _log4j_path(self) -> Path:
        return self.directory / "log4j.properties"

    def _claim_port(self) -> None:
        """Picks the port at the first start; fails on a port someone else listens on, which
        would otherwise answer our `ruok` while our server fails to bind it."""
        try:
            self.port = _bind(self.host, self.port)
        except OSError as e:
            raise ZooKeeperServerError(
                f"cannot listen on {self.connect_string}: {e.strerror}") from None

    @property
    def _data_dir(self) -> Path:
        return self.directory / "data"

    def _write_config(self) -> None:
        self._data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={self._data_dir}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            f"minSessionTimeout={2 * self.tick_time_ms}\n"
            f"maxSessionTimeout={self.max_session_timeout_ms}\n"
            # the AdminServer would take port 8080
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat,conf\n")
        self._log4j_path.write_text(LOG4J_PROPERTIES)

    def _write_server_json(self) -> None:
        state = {"pid": self._pid, "port": self.port, "host": self.host,
                 "tick_time_ms": self.tick_time_ms,
                 "max_session_timeout_ms": self.max_session_timeout_ms}
        write_json(self.directory / "server.json", state)

    def _wait_until_serving(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not self._serves_our_data():
            if self._process.poll() is not None:
                raise self._start_error(f"exited with code {self._process.returncode}")
            if time.monotonic() >= deadline:
                raise self._start_error(f"did not serve requests within {timeout_s} s")
            time.sleep(POLL_INTERVAL_S)

    def _serves_our_data(self) -> bool:
        """Whether the server on our port serves requests from our data directory, as its
        ``conf`` says. ``ruok`` tells less: the port is picked free and let go until the JVM
        binds it, and another server that took it meanwhile answers ``imok`` too."""
        answer = self._four_letter_word(b"conf")
        return answer is not None and f"dataDir={self._data_dir}{os.sep}".encode() in answer

    def _start_error(self, what: str) -> ZooKeeperServerError:
        return ZooKeeperServerError(
            f"ZooKeeper on {self.connect_string} {what}; the end of {self.log_path}:\n"
            f"{log_tail(self.log_path, LOG_TAIL_LINES)}")

    def _wait_for_exit(self, timeout_s: float) -> bool:
        return wait_for_exit(lambda: self.running, timeout_s)

    def _signal(self, signum: signal.Signals) -> None:
        if not self.running:
            raise ZooKeeperServerError(f"ZooKeeper in {self.directory} is not running")
        os.killpg(self._pid, signum)


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home, "bin", "java")) if java_home else shutil.which("java")
    if java is None or not Path(java).exists():
        raise ZooKeeperServerError(
            "no Java runtime: set JAVA_HOME or put java on PATH (Debian's "
            "openjdk-17-jre-headless package; `make test` installs it)")
    return java


def _classpath() -> str:
    configured = os.environ.get(CLASSPATH_ENV)
    entries = configured.split(os.pathsep) if configured else DEBIAN_CLASSPATH
    # A directory's wildcard (`lib/*`, as in Apache's tarball) stands for that directory.
    missing = [entry for entry in entries if not Path(entry.removesuffix("*")).exists()]
    if missing:
        raise ZooKeeperServerError(
            f"ZooKeeper's server is not installed ({', '.join(missing)} missing): install "
            f"Debian's libzookeeper-java package (`make test` does), or set {CLASSPATH_ENV} "
            "to the classpath of a ZooKeeper server")
    return os.pathsep.join(entries)


def _bind(host: str, port: int) -> int:
    """Binds ``port`` (0: any free one) as ZooKeeper will, with SO_REUSEADDR, and returns it.
    Fails only while another socket listens there: the connections a stopped server leaves
    in TIME_WAIT do not stop it from listening again."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        return s.getsockname()[1]


def _runs_config(pid: int, config_path: Path) -> bool:
    """Whether process ``pid`` is alive and was started with ``config_path``: not a process
    that reused the pid, and not a zombie (whose command line is empty)."""
    return os.fsencode(config_path) in command_line(pid)
