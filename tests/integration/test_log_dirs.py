"""JBOD (seeds: "JBOD broker tolerates one disk failure"): a broker with two log dirs loses
one and keeps serving the partitions of the other.

A disk is made to fail for real, without root: its directory is renamed away and a file
takes its place, as when a disk drops out from under its mount point. Descriptors already
open keep working (as on a failing disk until a write reaches a bad sector), and the next
file the broker opens there fails with ENOTDIR. A segment of 100 bytes makes every produce
roll, so the next produce to the failed dir opens a file. (``chmod 000`` does not stop
root, and a small tmpfs needs a mount.)
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build
from odradek.testing.embedded import EmbeddedBroker

TIMEOUT_SECONDS = 10
# Smaller than two one-record batches: every produce after the first rolls a new segment.
ROLL_EVERY_BATCH = 100


@pytest.fixture
def disks(tmp_path) -> tuple[Path, Path]:
    return tmp_path / "disk-a", tmp_path / "disk-b"


def broker_on(disks: tuple[Path, Path]) -> EmbeddedBroker:
    return EmbeddedBroker(disks[0].parent, log_dirs=",".join(str(d) for d in disks))


def pull(disk: Path) -> Path:
    """The disk drops out: its directory goes, a file is left where it was mounted."""
    pulled = disk.with_name(disk.name + "-pulled")
    os.rename(disk, pulled)
    disk.write_text("nothing mounted here")
    return pulled


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic("events", 2, 1, config={"segment.bytes": str(ROLL_EVERY_BATCH)})
    admin.create_topics([topic])["events"].result(TIMEOUT_SECONDS)


def produce(bootstrap: str, partition: int, value: bytes):
    """The offset the record got, or the error it failed with (no retries: the broker's)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "retries": 0,
                                         "message.timeout.ms": 5000})
    reports = []
    producer.produce("events", value, partition=partition,
                     on_delivery=lambda error, message: reports.append(error or message.offset()))
    producer.flush(TIMEOUT_SECONDS)
    [report] = reports
    return report


def watermarks(bootstrap: str, partition: int):
    """(low, high) by ListOffsets, or the error."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "jbod"})
    try:
        return consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition("events", partition), TIMEOUT_SECONDS)
    except confluent_kafka.KafkaException as e:
        return e.args[0]
    finally:
        consumer.close()


def log_dir_errors(bootstrap: str) -> dict[str, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [broker] = admin.describe_log_dirs()
    finally:
        admin.close()
    return {Path(d["log_dir"]).name: d["error_code"] for d in broker["log_dirs"]}


def fetch_error(embedded: EmbeddedBroker, partition: int) -> ErrorCode:
    """The error a Fetch of the partition gets, through the broker's own handler (clients
    retry a storage error on fetch without telling the application)."""
    request = build(request_class(ApiKey.FETCH, 12), replica_id=-1, max_wait=0, min_bytes=1,
                    max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                    topics=[{"topic": "events", "partitions": [{
                        "partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
                        "last_fetched_epoch": -1, "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20}]}],
                    forgotten_topics_data=[], rack_id="")
    async def handle():
        outcome = embedded.handle(ApiKey.FETCH, 12, request)
        return await outcome if inspect.isawaitable(outcome) else outcome

    [topic] = embedded.call(handle()).responses
    [answer] = topic.partitions
    return answer.error_code


def test_a_failed_log_dir_answers_kafka_storage_error_and_the_other_keeps_serving(disks,
                                                                                   caplog):
    with broker_on(disks) as broker:
        create_topic(broker.bootstrap_servers)
        assert (produce(broker.bootstrap_servers, 0, b"a0"),
                produce(broker.bootstrap_servers, 1, b"b0")) == (0, 0)
        assert (disks[0] / "events-0").is_dir() and (disks[1] / "events-1").is_dir()

        pull(disks[1])

        failed = produce(broker.bootstrap_servers, 1, b"b1")
        assert failed.code() == confluent_kafka.KafkaError.KAFKA_STORAGE_ERROR
        assert produce(broker.bootstrap_servers, 0, b"a1") == 1
        assert watermarks(broker.bootstrap_servers, 0) == (0, 2)
        assert watermarks(broker.bootstrap_servers, 1).code() == (
            confluent_kafka.KafkaError.KAFKA_STORAGE_ERROR)
        assert fetch_error(broker, 1) == ErrorCode.kafka_storage_error
        assert fetch_error(broker, 0) == ErrorCode.none
        assert log_dir_errors(broker.bootstrap_servers) == {
            "disk-a": ErrorCode.none, "disk-b": ErrorCode.kafka_storage_error}
    assert f"log dir {disks[1]} is offline" in caplog.text
    assert "['events-1'] answer KAFKA_STORAGE_ERROR" in caplog.text


def test_a_restart_without_a_log_dir_serves_the_others_and_never_recreates_its_partitions(
        disks):
    with broker_on(disks) as broker:
        create_topic(broker.bootstrap_servers)
        produce(broker.bootstrap_servers, 0, b"a0")
        produce(broker.bootstrap_servers, 1, b"b0")
    pulled = pull(disks[1])
    disks[1].unlink()  # not even the mount point is left

    with broker_on(disks) as broker:
        assert produce(broker.bootstrap_servers, 0, b"a1") == 1
        stranded = produce(broker.bootstrap_servers, 1, b"b1")
        assert stranded.code() == confluent_kafka.KafkaError.KAFKA_STORAGE_ERROR
        assert log_dir_errors(broker.bootstrap_servers) == {
            "disk-a": ErrorCode.none, "disk-b": ErrorCode.kafka_storage_error}
    assert not disks[1].exists()  # not recreated empty...
    assert not (disks[0] / "events-1").exists()  # ...nor in the other dir

    os.rename(pulled, disks[1])  # the disk is back, with its data
    with broker_on(disks) as broker:
        assert watermarks(broker.bootstrap_servers, 1) == (0, 1)
        assert produce(broker.bootstrap_servers, 1, b"b1") == 1
