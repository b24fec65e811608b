"""A broker killed at any moment (SIGKILL) restarts and serves every acknowledged record,
once, at its original offset; a torn tail is cut with a log line saying what was cut; lost
index files are rebuilt. The broker runs as users run it: an `odradek broker` process.
And the flush policy: ``flush.ms`` fsyncs in the background, moving the recovery point."""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.records import Record, build_batch
from odradek.replication import partition as replication
from odradek.testing.embedded import EmbeddedBroker

ODRADEK = str(Path(sys.executable).with_name("odradek"))
STARTUP_SECONDS = 15
TIMEOUT_SECONDS = 15
CRASH_CYCLES = 8
PARTITIONS = 3
# Small segments: the crashes hit rolls and every restart has many segments to load.
SEGMENT_BYTES = 8192
LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)")


class BrokerProcess:
    """`odradek broker` on ``data_dir`` and an ephemeral port, its output in
    ``data_dir/../broker-<n>.log``. Ready once it logs where it listens: a port picked
    beforehand could be taken meanwhile by any other process on the machine."""

    starts = 0

    def __init__(self, data_dir: Path, **configs: object) -> None:
        BrokerProcess.starts += 1
        self.log_path = data_dir.parent / f"broker-{BrokerProcess.starts}.log"
        settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data_dir),
                    **{key.replace("_", "."): value for key, value in configs.items()}}
        command = [ODRADEK, "broker"]
        for key, value in settings.items():
            command += ["--set", f"{key}={value}"]
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline and self.process.poll() is None:
            listening = LISTENING.search(self.output())
            if listening:
                self.bootstrap = f"127.0.0.1:{listening.group(1)}"
                return
            time.sleep(0.05)
        self.process.kill()
        pytest.fail(f"broker did not start: {self.output()}")

    def output(self) -> str:
        return self.log_path.read_text()

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(TIMEOUT_SECONDS)

    def stop(self) -> None:
        self.process.terminate()
        assert self.process.wait(TIMEOUT_SECONDS) == 0, self.output()


def create_topic(bootstrap: str, name: str, partitions: int, **configs: object) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, partitions, 1,
                     config={k.replace("_", "."): str(v) for k, v in configs.items()})
    admin.create_topics([topic])[name].result(TIMEOUT_SECONDS)


def read_partition(bootstrap: str, topic: str, partition: int) -> dict[int, bytes]:
    """Every record of the partition, by offset (each offset must come once)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-recovery",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                 TIMEOUT_SECONDS)
        consumer.assign([TopicPartition(topic, partition, 0)])
        records: dict[int, bytes] = {}
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while len(records) < high and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            assert message.offset() not in records, f"offset {message.offset()} served twice"
            records[message.offset()] = message.value()
        assert sorted(records) == list(range(high)), "the log has a gap"
        return records
    finally:
        consumer.close()


def produce_until_stopped(bootstrap: str, topic: str, cycle: int, stop: threading.Event,
                          acked: list[tuple[int, int, bytes]]) -> None:
    """Sends records as fast as acks=all allows, noting each acknowledged one."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": False, "linger.ms": 2,
                         "message.timeout.ms": 3000, "log_level": 0})

    def delivered(error, message) -> None:
        if error is None:
            acked.append((message.partition(), message.offset(), message.value()))

    sequence = 0
    while not stop.is_set():
        try:
            producer.produce(topic, f"cycle-{cycle}-record-{sequence}".encode(),
                             on_delivery=delivered)
            sequence += 1
        except BufferError:
            pass
        producer.poll(0.001)
    producer.purge()  # unsent records: never acknowledged
    producer.flush(5)


def test_every_acknowledged_record_survives_sigkill_at_its_offset(tmp_path):
    seed = random.randrange(2**32)
    chance = random.Random(seed)
    data_dir = tmp_path / "data"
    acked: list[tuple[int, int, bytes]] = []
    for cycle in range(CRASH_CYCLES):
        broker = BrokerProcess(data_dir)
        if cycle == 0:
            create_topic(broker.bootstrap, "acked", PARTITIONS, segment_bytes=SEGMENT_BYTES)
        stop = threading.Event()
        producer = threading.Thread(target=produce_until_stopped,
                                    args=(broker.bootstrap, "acked", cycle, stop, acked))
        producer.start()
        time.sleep(chance.uniform(0.3, 1.2))  # the moment of the crash, whatever it hits
        broker.kill()
        stop.set()
        producer.join()

    broker = BrokerProcess(data_dir)
    try:
        logs = {p: read_partition(broker.bootstrap, "acked", p) for p in range(PARTITIONS)}
    finally:
        broker.stop()
    assert len(acked) > 1000, f"too few records acknowledged to mean anything (seed {seed})"
    missing = [(p, offset, value) for p, offset, value in acked if logs[p].get(offset) != value]
    assert missing == [], f"{len(missing)} acknowledged records lost or moved (seed {seed})"


def test_a_torn_tail_is_cut_and_the_log_continues_at_the_next_offset(tmp_path):
    data_dir = tmp_path / "data"
    broker = BrokerProcess(data_dir)
    create_topic(broker.bootstrap, "torn", 1)
    values = [b"record-%d" % i for i in range(20)]
    produce(broker.bootstrap, "torn", values)
    broker.kill()
    active = sorted((data_dir / "torn-0").glob("*.log"))[-1]
    half_batch = bytes(build_batch([Record(20, 0, None, b"x" * 500)]))[:300]
    with open(active, "ab") as f:  # a write the crash tore, then whatever the disk held
        f.write(half_batch + bytes(random.randrange(256) for _ in range(700)))

    broker = BrokerProcess(data_dir)
    try:
        assert list(read_partition(broker.bootstrap, "torn", 0).values()) == values
        assert produce(broker.bootstrap, "torn", [b"after"]) == [20]
    finally:
        broker.stop()
    assert f"{active}: cut 1000 bytes of torn or invalid data at position" in broker.output()


def test_lost_index_files_are_rebuilt_at_restart(tmp_path):
    data_dir = tmp_path / "data"
    broker = BrokerProcess(data_dir)
    create_topic(broker.bootstrap, "indexed", 1, segment_bytes=4096, index_interval_bytes=256)
    values = [b"record-%03d-" % i + b"v" * 100 for i in range(200)]
    produce(broker.bootstrap, "indexed", values)
    broker.stop()
    assert (data_dir / ".kafka_cleanshutdown").exists()
    assert "indexed 0 200" in (data_dir / "recovery-point-offset-checkpoint").read_text()
    segments = sorted((data_dir / "indexed-0").glob("*.log"))
    assert len(segments) > 3
    for segment in (segments[1], segments[-1]):
        segment.with_suffix(".index").unlink()
        segment.with_suffix(".timeindex").write_bytes(b"\x00" * 5)  # impossible length

    broker = BrokerProcess(data_dir)
    try:
        assert seek_and_read(broker.bootstrap, "indexed", 150, 5) == values[150:155]
        assert list(read_partition(broker.bootstrap, "indexed", 0).values()) == values
    finally:
        broker.stop()
    assert "rebuilding lost index files" in broker.output()
    assert segments[1].with_suffix(".index").stat().st_size > 0


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    """Sends ``values`` in order, in batches far smaller than a segment; the offsets they
    were given."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "batch.size": 2000,
                         "max.in.flight": 1})
    offsets: list[int] = []
    errors: list[KafkaError] = []

    def delivered(error, message) -> None:
        if error:
            errors.append(error)
        else:
            offsets.append(message.offset())

    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(TIMEOUT_SECONDS) == 0 and not errors, errors
    return offsets


def seek_and_read(bootstrap: str, topic: str, offset: int, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-recovery",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while len(got) < count and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(count - len(got), 0.2) if not m.error()]
        return got
    finally:
        consumer.close()



def test_flush_ms_fsyncs_in_the_background_and_moves_the_recovery_point(tmp_path):
    with EmbeddedBroker(tmp_path) as broker:
        create_topic(broker.bootstrap_servers, "flushed", 1, flush_ms=100)
        create_topic(broker.bootstrap_servers, "unflushed", 1)
        produce(broker.bootstrap_servers, "flushed", [b"a", b"b"])
        produce(broker.bootstrap_servers, "unflushed", [b"a", b"b"])

        def recovery_point(topic: str) -> int:
            async def read() -> int:  # on the broker's event loop, which owns the log
                hosted = broker.broker.replica_manager.get_partition(
                    replication.TopicPartition(topic, 0))
                return hosted.log.recovery_point
            return broker.call(read())

        deadline = time.monotonic() + TIMEOUT_SECONDS
        while recovery_point("flushed") != 2:
            assert time.monotonic() < deadline, "flush.ms never flushed"
            time.sleep(0.05)
        assert recovery_point("unflushed") == 0  # the default: the OS decides (Kafka's)
