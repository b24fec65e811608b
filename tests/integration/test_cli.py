"""The ``odradek`` client commands, run as a user runs them: the installed command in a
subprocess, against a real broker, reading what it prints."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

ODRADEK = str(Path(sys.executable).with_name("odradek"))
# Generous: a command that hangs fails the test instead of the whole run.
COMMAND_TIMEOUT_SECONDS = 60
# What the CLI promises for a broker that cannot be reached (its timeouts are ~10 s).
UNREACHABLE_REPORTED_WITHIN_SECONDS = 15


def odradek(*args: str, stdin: str | bytes | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "ODRADEK_BOOTSTRAP_SERVERS"}
    environment.update(env or {})
    return subprocess.run([ODRADEK, *args], input=stdin, capture_output=True,
                          text=not isinstance(stdin, bytes), env=environment,
                          timeout=COMMAND_TIMEOUT_SECONDS)


class Cli:
    """``odradek`` aimed at one broker, asserting success unless told otherwise."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers

    def run(self, *args: str, stdin: str | bytes | None = None) -> subprocess.CompletedProcess:
        return odradek(*args, "-b", self.bootstrap_servers, stdin=stdin)

    def ok(self, *args: str, stdin: str | bytes | None = None) -> subprocess.CompletedProcess:
        result = self.run(*args, stdin=stdin)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result

    def lines(self, *args: str) -> list[str]:
        return self.ok(*args).stdout.splitlines()


@pytest.fixture
def cli(odradek_broker) -> Cli:
    return Cli(odradek_broker.bootstrap_servers)


def assert_one_error_line(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ")
    for fragment in fragments:
        assert fragment in line


def describe_line(cli: Cli, topic: str) -> str:
    [line] = [line for line in cli.lines("topics", "describe", topic) if line.startswith("Topic:")]
    return line


# --- topics -------------------------------------------------------------------------------

def test_a_created_topic_is_listed_and_described_with_its_partitions_and_configs(cli):
    assert cli.lines("topics", "create", "orders", "--partitions", "3",
                     "--config", "retention.ms=3600000") == ["Created topic orders."]

    assert "orders" in cli.lines("topics", "list")
    output = cli.lines("topics", "describe", "orders")
    heading = describe_line(cli, "orders")
    assert "PartitionCount: 3" in heading
    assert "ReplicationFactor: 1" in heading
    assert "retention.ms=3600000" in heading
    topic_id = heading.split("TopicId: ")[1].split()[0]
    assert len(topic_id) == 22  # a Kafka Uuid in base64
    partition_rows = [line.split() for line in output if line.split()[:1] in (["0"], ["1"], ["2"])]
    assert partition_rows == [["0", "0", "0", "0"], ["1", "0", "0", "0"], ["2", "0", "0", "0"]]


def test_describe_without_names_describes_every_topic(cli):
    cli.ok("topics", "create", "a")
    cli.ok("topics", "create", "b")

    headings = [line for line in cli.lines("topics", "describe") if line.startswith("Topic:")]

    assert [heading.split()[1] for heading in headings] == ["a", "b"]


def test_creating_an_existing_topic_fails_unless_if_not_exists(cli):
    cli.ok("topics", "create", "orders")

    assert_one_error_line(cli.run("topics", "create", "orders"), "'orders'", "already exists")
    assert cli.lines("topics", "create", "orders", "--if-not-exists") == []


def test_alter_adds_partitions_and_sets_and_deletes_configs(cli):
    cli.ok("topics", "create", "orders", "--partitions", "1", "--config", "retention.ms=3600000")

    cli.ok("topics", "alter", "orders", "--partitions", "4", "--config", "cleanup.policy=compact",
           "--delete-config", "retention.ms")

    heading = describe_line(cli, "orders")
    assert "PartitionCount: 4" in heading
    assert "cleanup.policy=compact" in heading
    assert "retention.ms" not in heading


def test_alter_without_a_change_is_refused(cli):
    cli.ok("topics", "create", "orders")

    assert_one_error_line(cli.run("topics", "alter", "orders"), "nothing to change")


def test_a_deleted_topic_is_no_longer_listed(cli):
    cli.ok("topics", "create", "orders")
    cli.ok("topics", "create", "payments")

    assert cli.lines("topics", "delete", "orders") == ["Deleted topic orders."]

    assert cli.lines("topics", "list") == ["payments"]


def test_deleting_a_missing_topic_fails_unless_if_exists(cli):
    assert_one_error_line(cli.run("topics", "delete", "ghost"), "topic 'ghost'", "does not exist")
    assert cli.lines("topics", "delete", "ghost", "--if-exists") == []


def test_the_bootstrap_servers_can_come_from_the_environment(odradek_broker):
    env = {"ODRADEK_BOOTSTRAP_SERVERS": odradek_broker.bootstrap_servers}
    assert odradek("topics", "create", "orders", env=env).returncode == 0

    assert odradek("topics", "list", env=env).stdout.splitlines() == ["orders"]


# --- produce and consume ------------------------------------------------------------------

def test_produced_lines_come_back_with_keys_and_headers_as_text(cli):
    cli.ok("topics", "create", "orders", "--partitions", "1")

    produced = cli.ok("produce", "orders", "--key-separator", ":", "--header", "source=cli",
                      "--header", "trace=7", stdin="k1:v1\nno key here\nk2:a:b\n")

    assert produced.stderr.strip() == "3 records produced to orders"
    assert cli.lines("consume", "orders", "--from-beginning", "--max-messages", "3",
                     "--print-key", "--print-headers", "--print-offset") == [
        "Partition:0\tOffset:0\tsource:cli,trace:7\tk1\tv1",
        "Partition:0\tOffset:1\tsource:cli,trace:7\tnull\tno key here",
        "Partition:0\tOffset:2\tsource:cli,trace:7\tk2\ta:b",
    ]
    assert cli.lines("consume", "orders", "--from-beginning", "--max-messages", "3") == [
        "v1", "no key here", "a:b"]


def test_consume_as_json_prints_one_object_per_record(cli):
    cli.ok("topics", "create", "orders", "--partitions", "1")
    before_ms = int(time.time() * 1000)
    cli.ok("produce", "orders", "--key-separator", "=", "--header", "h=1", "--header", "h=2",
           stdin="user-1=signed up\n")

    [line] = cli.lines("consume", "orders", "--from-beginning", "--max-messages", "1",
                       "--format", "json")

    record = json.loads(line)
    assert record.pop("timestamp") >= before_ms
    assert record == {
        "topic": "orders", "partition": 0, "offset": 0, "timestamp_type": "CreateTime",
        "key": "user-1", "value": "signed up", "headers": [["h", "1"], ["h", "2"]],
    }


def test_the_null_marker_produces_null_keys_and_tombstones(cli):
    cli.ok("topics", "create", "orders", "--partitions", "1")
    cli.ok("produce", "orders", "--key-separator", ":", "--null-marker", "NULL",
           stdin="NULL:v\nk:NULL\n")

    records = [json.loads(line) for line in cli.lines(
        "consume", "orders", "--from-beginning", "--max-messages", "2", "--format", "json")]

    assert [(r["key"], r["value"]) for r in records] == [(None, "v"), ("k", None)]


def test_binary_values_are_shown_replaced_or_as_base64(cli):
    cli.ok("topics", "create", "blobs", "--partitions", "1")
    cli.ok("produce", "blobs", stdin=b"\xff\xfeok\n")

    def value(*options: str) -> str:
        [line] = cli.lines("consume", "blobs", "--from-beginning", "--max-messages", "1",
                           "--format", "json", *options)
        return json.loads(line)["value"]

    assert value() == "\ufffd\ufffdok"
    assert base64.b64decode(value("--binary", "base64")) == b"\xff\xfeok"


def test_kcat_like_format_names_topic_partition_offset_and_key(cli):
    cli.ok("topics", "create", "orders", "--partitions", "1")
    cli.ok("produce", "orders", "--key-separator", ":", stdin="k:v\n")

    assert cli.lines("consume", "orders", "--from-beginning", "--max-messages", "1",
                     "--format", "kcat-like") == ["Topic orders [0] at offset 0: key k: v"]


def test_produce_to_one_partition_and_consume_from_an_offset_there(cli):
    cli.ok("topics", "create", "orders", "--partitions", "3")
    cli.ok("produce", "orders", "--partition", "2", stdin="a\nb\nc\nd\n")

    assert cli.lines("consume", "orders", "--partition", "2", "--offset", "2",
                     "--max-messages", "2") == ["c", "d"]
    assert cli.lines("consume", "orders", "--partition", "1", "--from-beginning",
                     "--timeout", "1") == []


def test_consume_from_an_offset_reads_every_partition_from_there(cli):
    cli.ok("topics", "create", "orders", "--partitions", "2")
    cli.ok("produce", "orders", "--partition", "0", stdin="a0\nb0\n")
    cli.ok("produce", "orders", "--partition", "1", stdin="a1\nb1\n")

    assert sorted(cli.lines("consume", "orders", "--offset", "1", "--max-messages", "2")) == [
        "b0", "b1"]


def test_consume_from_a_timestamp_starts_at_the_first_record_at_or_after_it(cli):
    cli.ok("topics", "create", "orders", "--partitions", "1")
    cli.ok("produce", "orders", stdin="old-1\nold-2\n")
    time.sleep(0.05)
    boundary_ms = int(time.time() * 1000)
    time.sleep(0.05)
    cli.ok("produce", "orders", stdin="new-1\nnew-2\n")
    iso = (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=boundary_ms))

    for since in (str(boundary_ms), iso.isoformat()):
        assert cli.lines("consume", "orders", "--from-timestamp", since,
                         "--max-messages", "2") == ["new-1", "new-2"]
    assert cli.lines("consume", "orders", "--from-timestamp", str(boundary_ms + 3_600_000),
                     "--timeout", "1") == []


def test_max_messages_stops_as_soon_as_that_many_are_printed(cli):
    cli.ok("topics", "create", "orders", "--partitions", "1")
    cli.ok("produce", "orders", stdin="".join(f"r{i}\n" for i in range(10)))

    started = time.monotonic()
    consumed = cli.ok("consume", "orders", "--from-beginning", "--max-messages", "3")

    assert consumed.stdout.splitlines() == ["r0", "r1", "r2"]
    assert consumed.stderr.strip() == "3 records consumed from orders"
    assert time.monotonic() - started < 8  # well before the 10 s idle timeout


def test_consume_without_new_records_ends_after_the_idle_timeout(cli):
    cli.ok("topics", "create", "orders", "--partitions", "1")
    cli.ok("produce", "orders", stdin="already there\n")

    started = time.monotonic()
    assert cli.lines("consume", "orders", "--timeout", "1") == []  # starts at the end
    assert time.monotonic() - started < 8


def consumer_backoff(cli: Cli, *properties: str) -> str:
    """The fetch.queue.backoff.ms the consumer of ``odradek consume`` was created with, as
    librdkafka logs its configuration (``debug=conf``)."""
    result = cli.ok("consume", "orders", "--from-beginning", "--max-messages", "1",
                    "-X", "debug=conf", "-X", "log_level=7", *properties)
    [value] = re.findall(r"^.*\bconsumer-\d+\b.*  fetch\.queue\.backoff\.ms = (\d+)$",
                         result.stderr, re.MULTILINE)
    return value


def test_consume_fetches_again_10_ms_after_a_full_queue_unless_told_otherwise(cli):
    # librdkafka's default, 1000 ms, would pause reading a large topic for a second at a time.
    cli.ok("topics", "create", "orders", "--partitions", "1")
    cli.ok("produce", "orders", stdin="r0\n")

    assert consumer_backoff(cli) == "10"
    assert consumer_backoff(cli, "-X", "fetch.queue.backoff.ms=1000") == "1000"


# --- configs ------------------------------------------------------------------------------

def test_configs_alter_sets_and_deletes_topic_configs_shown_by_describe(cli):
    cli.ok("topics", "create", "orders")
    assert cli.lines("configs", "describe", "--topic", "orders") == []

    cli.ok("configs", "alter", "--topic", "orders", "--set", "retention.ms=1234",
           "--set", "segment.ms=600000")

    rows = {line.split()[0]: line.split()[1:] for line in
            cli.lines("configs", "describe", "--topic", "orders")[2:]}
    assert rows == {"retention.ms": ["1234", "DYNAMIC_TOPIC_CONFIG", "false", "false", "false"],
                    "segment.ms": ["600000", "DYNAMIC_TOPIC_CONFIG", "false", "false", "false"]}

    cli.ok("configs", "alter", "--topic", "orders", "--delete", "retention.ms")

    described = cli.ok("configs", "describe", "--topic", "orders").stdout
    assert "segment.ms" in described and "retention.ms" not in described


def test_configs_describe_all_includes_the_defaults(cli):
    cli.ok("topics", "create", "orders")

    rows = [line.split() for line in cli.lines("configs", "describe", "--topic", "orders",
                                               "--all")[2:]]

    assert ["cleanup.policy", "delete", "DEFAULT_CONFIG", "true", "false", "false"] in rows


@pytest.mark.odradek_config(num_partitions=3)
def test_configs_describe_shows_a_brokers_configs_that_are_not_defaults(cli):
    rows = [line.split() for line in cli.lines("configs", "describe", "--broker", "0")[2:]]

    # name, value, source, default (whether a broker lets it change at runtime may vary)
    assert ["num.partitions", "3", "STATIC_BROKER_CONFIG", "false"] in [row[:4] for row in rows]
    assert "log.segment.bytes" in cli.ok("configs", "describe", "--broker", "0", "--all").stdout


# --- errors: one line, non-zero, no traceback ---------------------------------------------

def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# Every client command reaches the cluster through the same bootstrap: each kind stands for
# its group (topics, produce, consume, groups, transactions, acls, quotas, perf).
UNREACHABLE_COMMANDS = [
    ["topics", "create", "orders"], ["produce", "orders"], ["consume", "orders"],
    ["groups", "list"], ["groups", "describe", "g"],
    ["groups", "reset-offsets", "g", "--topic", "t", "--to-earliest"], ["groups", "delete", "g"],
    ["transactions", "list"], ["acls", "list"], ["quotas", "describe"],
    ["perf", "produce", "--topic", "orders", "--num-records", "1", "--record-size", "1",
     "--throughput", "-1"], ["perf", "consume", "--topic", "orders", "--num-records", "1"],
]
# What a dozen commands starting at once on a loaded two-core machine take to start.
STARTUP_SECONDS = 15


def test_an_unreachable_broker_is_one_error_line_within_seconds():
    address = f"127.0.0.1:{closed_port()}"

    started = time.monotonic()
    # each waits out the client's bootstrap timeout: wait for them together
    with ThreadPoolExecutor(len(UNREACHABLE_COMMANDS)) as pool:
        results = list(pool.map(lambda command: odradek(*command, "-b", address, stdin=""),
                                UNREACHABLE_COMMANDS))

    assert time.monotonic() - started < UNREACHABLE_REPORTED_WITHIN_SECONDS + STARTUP_SECONDS
    for result in results:
        assert_one_error_line(result, f"cannot reach a broker at {address}")


@pytest.mark.parametrize("command", [
    ["consume", "ghost"],
    ["topics", "describe", "ghost"],
    ["topics", "alter", "ghost", "--partitions", "2"],
    ["configs", "describe", "--topic", "ghost"],
], ids=" ".join)
def test_a_missing_topic_is_one_error_line(cli, command):
    assert_one_error_line(cli.run(*command), "topic 'ghost'", "does not exist")


@pytest.mark.parametrize("command", [
    ["configs", "alter", "--topic", "orders", "--set", "retention.ms"],
    ["topics", "create", "orders", "--config", "=1"],
    ["produce", "orders", "--header", "nokey"],
    ["configs", "describe", "--topic", "orders", "--broker", "0"],
    ["consume", "orders", "--from-beginning", "--offset", "3"],
    ["consume", "orders", "--from-timestamp", "yesterday"],
    ["topics", "list", "-X", "no.such.property=1"],
], ids=" ".join)
def test_a_bad_argument_is_one_error_line_before_anything_is_sent(command):
    # A closed port: the argument is refused before any connection is tried.
    result = odradek(*command, "-b", f"127.0.0.1:{closed_port()}", stdin="")

    assert_one_error_line(result)
    assert "cannot reach" not in result.stderr


def test_producing_to_a_partition_that_does_not_exist_fails(cli):
    cli.ok("topics", "create", "orders", "--partitions", "1")

    assert_one_error_line(cli.run("produce", "orders", "--partition", "5", stdin="x\n"),
                          "topic 'orders' has no partition 5")


def test_a_record_the_broker_refuses_fails_produce_with_the_brokers_error(cli):
    cli.ok("topics", "create", "orders", "--partitions", "1", "--config", "max.message.bytes=200")

    result = cli.run("produce", "orders", stdin="x" * 1000 + "\n")

    assert_one_error_line(result, "1 record not produced to orders (0 produced)",
                          "MSG_SIZE_TOO_LARGE")
