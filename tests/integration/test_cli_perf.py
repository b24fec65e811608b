"""``odradek perf produce|consume`` against a broker, as ``kafka-producer-perf-test.sh`` and
``kafka-consumer-perf-test.sh`` are used: what they report is what reached the topic, the
producer keeps to --throughput, transactions commit, and bad input is one error line."""

from __future__ import annotations

import re
import time

import confluent_kafka
import pytest
from test_cli import Cli, assert_one_error_line

TOTAL = re.compile(r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg "
                   r"latency, [\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, "
                   r"\d+ ms 99\.9th\.$")
HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
          "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


@pytest.fixture
def cli(odradek_broker, create_topic) -> Cli:
    create_topic("load", partitions=3)
    return Cli(odradek_broker.bootstrap_servers)


def read_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[bytes]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "check", "auto.offset.reset": "earliest",
        "isolation.level": isolation, "enable.partition.eof": True})
    consumer.subscribe([topic])
    values, ends, deadline = [], set(), time.monotonic() + 30
    try:
        while len(ends) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF
                ends.add(message.partition())
            else:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_produce_reports_kafkas_total_line_for_what_reached_the_topic(cli):
    [total] = cli.lines("perf", "produce", "--topic", "load", "--num-records", "3000",
                        "--record-size", "100", "--throughput", "-1",
                        "--producer-props", "acks=all", "--producer-props", "linger.ms=5")
    assert int(TOTAL.match(total).group(1)) == 3000
    values = read_all(cli.bootstrap_servers, "load")
    assert len(values) == 3000
    assert {len(v) for v in values} == {100} and values[0].isalpha() and values[0].isupper()


def test_produce_keeps_to_its_throughput(cli):
    started = time.monotonic()
    cli.ok("perf", "produce", "--topic", "load", "--num-records", "300", "--record-size", "10",
           "--throughput", "200")
    assert time.monotonic() - started >= 1.4  # 300 records at 200/s: 1.5 s at the least


def test_payloads_come_from_a_file_and_transactions_commit(cli, tmp_path):
    payloads = tmp_path / "payloads"
    payloads.write_bytes(b"alpha;beta;gamma")
    [total] = cli.lines("perf", "produce", "--topic", "load", "--num-records", "500",
                        "--payload-file", str(payloads), "--payload-delimiter", ";",
                        "--throughput", "-1", "--transaction-duration-ms", "50")
    assert TOTAL.match(total)
    values = read_all(cli.bootstrap_servers, "load", isolation="read_committed")
    assert len(values) == 500 and set(values) <= {b"alpha", b"beta", b"gamma"}


def test_consume_reports_kafkas_line_for_every_record(cli):
    cli.ok("perf", "produce", "--topic", "load", "--num-records", "2000", "--record-size", "64",
           "--throughput", "-1")
    header, line = cli.lines("perf", "consume", "--topic", "load", "--num-records", "2000")
    assert header == HEADER
    fields = line.split(", ")
    assert len(fields) == 10
    assert float(fields[2]) == pytest.approx(2000 * 64 / 2**20, abs=1e-4)
    assert int(fields[4]) == 2000
    assert int(fields[6]) + int(fields[7]) > 0  # the join and the fetching took some time


def test_consume_past_the_end_gives_up_after_its_timeout(cli):
    cli.ok("perf", "produce", "--topic", "load", "--num-records", "10", "--record-size", "8",
           "--throughput", "-1")
    result = cli.run("perf", "consume", "--topic", "load", "--num-records", "11",
                     "--timeout", "5000", "--hide-header")
    assert_one_error_line(result, "10 records of 11", "timeout (5000 ms) exceeded")
    [line] = result.stdout.splitlines()  # the statistics of what came, then the error
    assert line.split(", ")[4] == "10"


@pytest.mark.parametrize(("args", "fragment"), [
    (("produce", "--topic", "load", "--num-records", "1", "--throughput", "-1"),
     "exactly one of --record-size and --payload-file"),
    (("produce", "--topic", "nowhere", "--num-records", "1", "--throughput", "-1",
      "--record-size", "1", "--producer-props", "allow.auto.create.topics=false"), "nowhere"),
    (("consume", "--topic", "nowhere", "--num-records", "1"), "nowhere"),
    (("produce", "--topic", "load", "--num-records", "1", "--throughput", "-1",
      "--record-size", "1", "--producer-props", "acks"), "key=value"),
])
def test_bad_input_is_one_error_line(cli, args, fragment):
    assert_one_error_line(cli.run("perf", *args), fragment)
