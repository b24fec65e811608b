"""``odradek transactions``: the installed command against a real broker, with a transaction
left hanging the way an application leaves one: a confluent-kafka transactional producer
that began a transaction, produced and flushed, and never committed or aborted."""

from __future__ import annotations

import time
from datetime import datetime

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, OffsetSpec
from test_cli import Cli, assert_one_error_line

TOPIC = "orders"
TRANSACTIONAL_ID = "payments"
# Partition 0 holds these committed records at offsets 0 and 1, then the open transaction's
# two records; partition 1 holds the transaction's one record at offset 0.
COMMITTED = [b"paid-1", b"paid-2"]
IN_TRANSACTION = {0: [b"pending-1", b"pending-2"], 1: [b"pending-3"]}
START_OFFSET = {0: len(COMMITTED), 1: 0}
# Far longer than a test: the coordinator must not abort the transaction on its own.
TXN_TIMEOUT_MS = 300_000
TIMEOUT_S = 20.0
# What the CLI promises for a broker that cannot be reached (its timeouts are ~10 s).
UNREACHABLE_REPORTED_WITHIN_SECONDS = 15


@pytest.fixture
def cli(odradek_broker) -> Cli:
    return Cli(odradek_broker.bootstrap_servers)


@pytest.fixture
def coordinator(odradek_broker) -> str:
    """The id of the one broker, which coordinates every transactional id."""
    return str(odradek_broker.broker.config.node_id)


@pytest.fixture
def hanging(cli) -> confluent_kafka.Producer:
    """A transaction of TRANSACTIONAL_ID open in both partitions of TOPIC; the producer is
    kept alive so that the coordinator still has it Ongoing."""
    bootstrap = cli.bootstrap_servers
    cli.ok("topics", "create", TOPIC, "--partitions", "2")
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for value in COMMITTED:
        plain.produce(TOPIC, value=value, partition=0)
    assert plain.flush(TIMEOUT_S) == 0
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "transactional.id": TRANSACTIONAL_ID,
                                         "transaction.timeout.ms": TXN_TIMEOUT_MS})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    for partition, values in IN_TRANSACTION.items():
        for value in values:
            producer.produce(TOPIC, value=value, partition=partition)
    assert producer.flush(TIMEOUT_S) == 0
    return producer


def rows(cli: Cli, *args: str) -> list[list[str]]:
    """The rows of the table a command prints, each split into its cells."""
    lines = cli.lines(*args)
    ruled = [i for i, line in enumerate(lines) if line.lstrip().startswith("─")]
    if not ruled:
        return []
    return [line.split() for line in lines[ruled[0] + 1:] if line.strip()]


def producer_rows(cli: Cli, partition: int) -> list[list[str]]:
    return rows(cli, "transactions", "describe-producers", "--topic", TOPIC,
                "--partition", str(partition))


def producer_id(cli: Cli) -> str:
    [[listed_id, _, pid, _]] = rows(cli, "transactions", "list")
    assert listed_id == TRANSACTIONAL_ID
    return pid


def last_stable_offset(bootstrap: str, partition: int) -> int:
    """The partition's latest offset for a read_committed reader: its last stable offset."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = confluent_kafka.TopicPartition(TOPIC, partition)
    return admin.list_offsets(
        {tp: OffsetSpec.latest()},
        isolation_level=confluent_kafka.IsolationLevel.READ_COMMITTED,
        request_timeout=TIMEOUT_S)[tp].result(TIMEOUT_S).offset


class ReadCommittedConsumer:
    """A read_committed confluent-kafka consumer of one partition, from its first offset."""

    def __init__(self, bootstrap: str, partition: int) -> None:
        self.tp = confluent_kafka.TopicPartition(TOPIC, partition, 0)
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": "readers",
            "isolation.level": "read_committed", "enable.partition.eof": True})
        self.consumer.assign([self.tp])

    def read_to_end(self) -> tuple[list[bytes], int]:
        """The values read until the consumer reports the end of what it may read, and its
        position there; raises TimeoutError if it does not get there in time."""
        values = []
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = self.consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value())
            elif message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                [position] = self.consumer.position([self.tp])
                return values, position.offset
            else:
                raise AssertionError(message.error())
        raise TimeoutError(f"the consumer did not reach the end in {TIMEOUT_S} s: {values}")

    def log_end_offset(self) -> int:
        _, high = self.consumer.get_watermark_offsets(self.tp, timeout=TIMEOUT_S)
        return high

    def close(self) -> None:
        self.consumer.close()


# --- list --------------------------------------------------------------------------------

def test_list_without_transactions_says_so(cli):
    result = cli.ok("transactions", "list")

    assert result.stdout == ""
    assert "no transactions" in result.stderr


def test_list_shows_a_hanging_transaction_as_ongoing_at_its_coordinator(
        cli, hanging, coordinator):
    [[listed_id, listed_coordinator, pid, state]] = rows(cli, "transactions", "list")

    assert (listed_id, listed_coordinator, state) == (TRANSACTIONAL_ID, coordinator, "Ongoing")
    assert int(pid) >= 0


FILTERS = [
    (["--state", "Ongoing"], True),
    (["--state", "Empty", "--state", "Ongoing"], True),
    (["--state", "Empty"], False),
    (["--producer-id", "{pid}"], True),
    (["--producer-id", "{other_pid}"], False),
    (["--duration-ms", "0"], True),
    (["--duration-ms", str(3_600_000)], False),
]


@pytest.mark.parametrize(("filters", "shown"), FILTERS,
                         ids=[" ".join(filters) for filters, _ in FILTERS])
def test_list_filters_by_state_producer_id_and_duration(cli, hanging, filters, shown):
    pid = producer_id(cli)
    args = [f.format(pid=pid, other_pid=int(pid) + 1) for f in filters]

    listed = rows(cli, "transactions", "list", *args)

    assert [row[0] for row in listed] == ([TRANSACTIONAL_ID] if shown else [])


def test_list_names_an_unknown_state_and_the_known_ones(cli, hanging):
    result = cli.run("transactions", "list", "--state", "Ongoing", "--state", "Hanging")

    assert_one_error_line(result, "unknown transaction state 'Hanging'", "Ongoing",
                          "PrepareCommit")


# --- describe ----------------------------------------------------------------------------

def test_describe_shows_state_producer_timeout_start_time_and_partitions(
        cli, hanging, coordinator):
    pid = producer_id(cli)
    begun_before = datetime.now().astimezone()

    lines = cli.lines("transactions", "describe", TRANSACTIONAL_ID)

    heading = lines[0]
    for field in (f"TransactionalId: {TRANSACTIONAL_ID}", f"Coordinator: {coordinator}",
                  "State: Ongoing", f"ProducerId: {pid}", "ProducerEpoch: 0",
                  f"TimeoutMs: {TXN_TIMEOUT_MS}"):
        assert field in heading, heading
    started = datetime.fromisoformat(heading.split("StartTime: ")[1].strip())
    assert abs((begun_before - started).total_seconds()) < 60
    assert rows(cli, "transactions", "describe", TRANSACTIONAL_ID) == [
        [TOPIC, str(partition)] for partition in IN_TRANSACTION]


def test_describe_of_an_unknown_transactional_id_is_one_error_line(cli, hanging):
    result = cli.run("transactions", "describe", "refunds")

    assert_one_error_line(result, "transactional id 'refunds'", "does not exist",
                          "TRANSACTIONAL_ID_NOT_FOUND")


def test_describe_of_an_id_between_transactions_shows_it_empty(cli):
    cli.ok("topics", "create", TOPIC)
    producer = confluent_kafka.Producer({"bootstrap.servers": cli.bootstrap_servers,
                                         "transactional.id": TRANSACTIONAL_ID})
    producer.init_transactions(TIMEOUT_S)

    heading = cli.lines("transactions", "describe", TRANSACTIONAL_ID)[0]

    assert "State: Empty" in heading and "StartTime: -" in heading


# --- describe-producers ------------------------------------------------------------------

def test_describe_producers_shows_where_the_open_transaction_starts(cli, hanging):
    pid = producer_id(cli)

    for partition, values in IN_TRANSACTION.items():
        [[row_pid, epoch, coordinator_epoch, last_sequence, last_timestamp, start]] = \
            producer_rows(cli, partition)
        assert (row_pid, epoch, coordinator_epoch) == (pid, "0", "-")
        assert last_sequence == str(len(values) - 1)
        assert abs(int(last_timestamp) / 1000 - time.time()) < 60
        assert start == str(START_OFFSET[partition])


def test_describe_producers_of_a_partition_without_producers_says_so(cli):
    cli.ok("topics", "create", TOPIC)

    result = cli.ok("transactions", "describe-producers", "--topic", TOPIC, "--partition", "0")

    assert result.stdout == ""
    assert "no active producers" in result.stderr


# --- abort -------------------------------------------------------------------------------

def test_abort_at_the_start_offset_lets_read_committed_consumers_past_the_transaction(
        cli, hanging):
    bootstrap = cli.bootstrap_servers
    pid = producer_id(cli)
    reader = ReadCommittedConsumer(bootstrap, 0)
    try:
        # Hanging: read_committed readers stop where the transaction starts.
        assert reader.read_to_end() == (COMMITTED, START_OFFSET[0])
        assert last_stable_offset(bootstrap, 0) == START_OFFSET[0]

        assert cli.lines("transactions", "abort", "--topic", TOPIC, "--partition", "0",
                         "--start-offset", str(START_OFFSET[0])) == [
            f"Aborted the transaction of producer {pid} (epoch 0) on topic {TOPIC} "
            f"partition 0."]

        # The aborted records are skipped; the reader reaches the end of the log.
        values, position = reader.read_to_end()
        assert values == []
        assert position == reader.log_end_offset() == last_stable_offset(bootstrap, 0)
        assert position > START_OFFSET[0] + len(IN_TRANSACTION[0])  # past the marker too
    finally:
        reader.close()
    [[_, _, coordinator_epoch, _, _, start]] = producer_rows(cli, 0)
    assert (coordinator_epoch, start) == ("0", "-")


def test_abort_of_a_producer_named_outright(cli, hanging):
    bootstrap = cli.bootstrap_servers
    [[pid, epoch, _, _, _, _]] = producer_rows(cli, 1)
    assert last_stable_offset(bootstrap, 1) == START_OFFSET[1]

    cli.ok("transactions", "abort", "--topic", TOPIC, "--partition", "1",
           "--producer-id", pid, "--producer-epoch", epoch, "--coordinator-epoch", "0")

    reader = ReadCommittedConsumer(bootstrap, 1)
    try:
        values, position = reader.read_to_end()
        assert values == []
        assert position == reader.log_end_offset() == last_stable_offset(bootstrap, 1)
    finally:
        reader.close()
    # The other partition's part of the transaction is still open.
    assert last_stable_offset(bootstrap, 0) == START_OFFSET[0]


def test_abort_at_an_offset_where_no_transaction_starts_names_the_open_ones(cli, hanging):
    result = cli.run("transactions", "abort", "--topic", TOPIC, "--partition", "0",
                     "--start-offset", "1")

    assert_one_error_line(result, f"topic '{TOPIC}' partition 0",
                          "no open transaction starts at offset 1",
                          f"start at: {START_OFFSET[0]}")
    assert last_stable_offset(cli.bootstrap_servers, 0) == START_OFFSET[0]


@pytest.mark.parametrize("options", [
    [],
    ["--start-offset", "2", "--producer-id", "0"],
    ["--producer-id", "0", "--producer-epoch", "0"],
], ids=lambda options: " ".join(options) or "neither")
def test_abort_takes_a_start_offset_or_a_whole_producer(cli, options):
    result = cli.run("transactions", "abort", "--topic", TOPIC, "--partition", "0", *options)

    assert_one_error_line(result, "--start-offset", "--producer-id", "--producer-epoch",
                          "--coordinator-epoch")


# --- errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    ["describe-producers", "--topic", "ghost", "--partition", "0"],
    ["abort", "--topic", "ghost", "--partition", "0", "--start-offset", "0"],
], ids=lambda command: command[0])
def test_an_unknown_topic_is_one_error_line(cli, command):
    result = cli.run("transactions", *command)

    assert_one_error_line(result, "topic 'ghost': does not exist")
    assert "ghost" not in cli.lines("topics", "list")  # not created by asking


def test_an_unknown_partition_is_one_error_line(cli, hanging):
    result = cli.run("transactions", "describe-producers", "--topic", TOPIC, "--partition", "7")

    assert_one_error_line(result, f"topic '{TOPIC}' has no partition 7 (it has 2)")
