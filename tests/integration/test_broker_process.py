"""`odradek broker` as users run it: a process, stopped with SIGTERM or Ctrl-C."""

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import uvloop
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.log.checkpoint import CLEAN_SHUTDOWN_FILE
from odradek.server.broker import Broker
from odradek.server.config import BrokerConfig
from odradek.server.socket_server import SocketServer

ODRADEK = str(Path(sys.executable).with_name("odradek"))
STARTUP_SECONDS = 15
SHUTDOWN_SECONDS = 15


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data_dir: Path, port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [ODRADEK, "broker", "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--set", f"log.dirs={data_dir}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.05)
    process.kill()
    pytest.fail(f"broker did not start: {process.communicate()[0]}")


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 2})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(10) == 0


def consume_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "log_level": 2})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 10
        while len(values) < count and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(count, 0.5) if not m.error()]
        return values
    finally:
        consumer.close()


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_broker_exits_cleanly_and_restarts_with_its_data(tmp_path, stop_signal):
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    values = [b"record-%d" % i for i in range(100)]
    broker = start_broker(tmp_path, port)
    try:
        produce(bootstrap, "events", values)
        broker.send_signal(stop_signal)
        output, _ = broker.communicate(timeout=SHUTDOWN_SECONDS)
    finally:
        broker.kill()
    assert broker.returncode == 0, output
    assert "stopped" in output
    assert "Traceback" not in output

    restarted = start_broker(tmp_path, port)
    try:
        assert consume_all(bootstrap, "events", len(values)) == values
    finally:
        restarted.terminate()
        restarted.communicate(timeout=SHUTDOWN_SECONDS)


def test_a_bad_config_is_one_line_and_a_non_zero_exit(tmp_path):
    result = subprocess.run([ODRADEK, "broker", "--set", "num.partitions=zero",
                             "--set", f"log.dirs={tmp_path}"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0
    assert "num.partitions" in result.stderr


def test_a_port_in_use_is_one_line_and_a_non_zero_exit(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([ODRADEK, "broker", "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                                 "--set", f"log.dirs={tmp_path}"],
                                capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "address already in use" in result.stderr.lower()


def test_a_port_taken_while_the_broker_starts_stops_it_cleanly_with_the_error(
        tmp_path, monkeypatch):
    """Another socket bound the broker's port (SO_REUSEADDR, as the broker's) after the
    broker bound it, and listened before the broker did: the start fails with the error,
    and what had started is stopped as at a clean shutdown, the port let go."""
    port = free_port()
    with socket.socket() as rival:
        rival.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        rival.bind(("127.0.0.1", port))
        start_serving = SocketServer.start_serving

        async def taken_first(server: SocketServer, dispatcher) -> None:
            rival.listen()
            await start_serving(server, dispatcher)

        monkeypatch.setattr(SocketServer, "start_serving", taken_first)
        broker = Broker(BrokerConfig.load(None, {
            "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(tmp_path)}))
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            uvloop.run(broker.start())
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()

    monkeypatch.undo()
    restarted = start_broker(tmp_path, port)
    try:
        produce(f"127.0.0.1:{port}", "events", [b"after the failed start"])
    finally:
        restarted.terminate()
        restarted.communicate(timeout=SHUTDOWN_SECONDS)


def test_large_records_come_back_whole_from_a_broker_process_that_reuses_freed_buffers(
        tmp_path):
    # The process keeps freed buffers for the next request (runner.reuse_freed_buffers):
    # each record, produced and fetched through buffers earlier ones used, reads back as sent.
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    values = [bytes([i]) * 900_000 for i in range(30)]
    broker = start_broker(tmp_path, port)
    try:
        produce(bootstrap, "large", values)
        assert consume_all(bootstrap, "large", len(values)) == values
    finally:
        broker.terminate()
        broker.communicate(timeout=SHUTDOWN_SECONDS)
