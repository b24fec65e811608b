"""``odradek groups``: the installed command against a real broker, with groups made by
confluent-kafka consumers as applications make them."""

from __future__ import annotations

from datetime import datetime, timezone

import confluent_kafka
import pytest
from group_members import (
    BROKER_CONFIGS,
    CONSUMER_PROTOCOL,
    CONSUMER_PROTOCOL_CONFIGS,
    GROUP_TIMEOUT_SECONDS,
    Member,
    owns_all,
    poll_until,
)
from test_cli import Cli, assert_one_error_line, closed_port, odradek

pytestmark = pytest.mark.odradek_config(**BROKER_CONFIGS, **CONSUMER_PROTOCOL_CONFIGS)

TOPIC = "orders"
# Records produced to each partition, and how many of them group "g" consumed and committed.
PRODUCED = {0: 6, 1: 4}
CONSUMED = {0: 4, 1: 1}
# Record i of a partition has the timestamp BASE_MS + i seconds.
BASE_MS = 1_700_000_000_000


@pytest.fixture
def cli(odradek_broker) -> Cli:
    return Cli(odradek_broker.bootstrap_servers)


@pytest.fixture
def group(cli) -> str:
    """Group "g" has consumed CONSUMED records of each partition of TOPIC, committed and
    left; it is Empty."""
    bootstrap = cli.bootstrap_servers
    cli.ok("topics", "create", TOPIC, "--partitions", str(len(PRODUCED)))
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for partition, count in PRODUCED.items():
        for i in range(count):
            producer.produce(TOPIC, value=f"{partition}-{i}".encode(), partition=partition,
                             timestamp=BASE_MS + i * 1000)
    assert producer.flush(GROUP_TIMEOUT_SECONDS) == 0
    member = Member(bootstrap, "g", TOPIC, "app", **{"enable.auto.commit": False})
    try:
        poll_until([member], lambda: len(member.records) == sum(PRODUCED.values()))
        member.consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, p, n)
                                        for p, n in CONSUMED.items()], asynchronous=False)
    finally:
        member.close()
    return "g"


def offset_rows(cli: Cli, group: str) -> dict[int, list[str]]:
    """partition -> [current offset, log end offset, lag, member] from ``describe --offsets``."""
    return {int(row[1]): row[2:] for row in (line.split() for line in
            cli.lines("groups", "describe", group, "--offsets")) if row[:1] == [TOPIC]}


def committed(cli: Cli, group: str) -> dict[int, int]:
    return {p: int(row[0]) for p, row in offset_rows(cli, group).items()}


def plan(result) -> dict[int, tuple[str, str]]:
    """partition -> (current, new) from a reset-offsets plan."""
    return {int(row[1]): (row[2], row[3]) for row in (line.split() for line in
            result.stdout.splitlines()) if row[:1] == [TOPIC]}


def test_a_group_that_committed_is_listed_and_described_with_its_offsets_and_lag(cli, group):
    assert [line.split() for line in cli.lines("groups", "list")[2:]] == [
        ["g", "classic", "Empty", "consumer"]]
    assert [line.split()[0] for line in cli.lines("groups", "list", "--state", "stable")
            if line.split()[:1] == ["g"]] == []

    described = cli.lines("groups", "describe", group)
    assert described[0].split()[:8] == ["Group:", "g", "Type:", "classic", "State:", "Empty",
                                        "Members:", "0"]
    assert "MEMBER-ID" in described[1]
    assert offset_rows(cli, group) == {
        p: [str(CONSUMED[p]), str(PRODUCED[p]), str(PRODUCED[p] - CONSUMED[p]), "-"]
        for p in PRODUCED}
    assert "CURRENT-OFFSET" not in cli.ok("groups", "describe", group, "--members").stdout


def test_a_running_group_shows_its_members_and_cannot_have_its_offsets_reset(cli, group):
    member = Member(cli.bootstrap_servers, group, TOPIC, "watcher",
                    **{"enable.auto.commit": False})
    try:
        poll_until([member], owns_all([member], len(PRODUCED)))
        [heading, *members] = cli.lines("groups", "describe", group, "--members")
        assert "State: Stable" in heading and "Members: 1" in heading
        [row] = [line.split() for line in members if "watcher" in line]
        assert row[1:] == ["-", "watcher", "/127.0.0.1", f"{TOPIC}:0,1"]
        assert {p: row[3] for p, row in offset_rows(cli, group).items()} == {
            0: row[0], 1: row[0]}

        result = cli.run("groups", "reset-offsets", group, "--topic", TOPIC, "--to-earliest",
                         "--execute")
        assert_one_error_line(result, "group 'g' has 1 active member", "inactive")
        assert_one_error_line(cli.run("groups", "delete", group), "group 'g'", "NON_EMPTY_GROUP")
    finally:
        member.close()
    assert committed(cli, group) == CONSUMED


def test_a_consumer_protocol_group_shows_its_epochs_and_target_assignments(cli, group):
    members = [Member(cli.bootstrap_servers, "modern", TOPIC, f"m{i}", **CONSUMER_PROTOCOL,
                      **{"group.instance.id": f"pod-{i}"}) for i in range(2)]
    try:
        poll_until(members, owns_all(members, len(PRODUCED)))
        assert ["modern", "consumer", "Stable", "consumer"] in [
            line.split() for line in cli.lines("groups", "list")]
        [heading, _, _, *rows] = cli.lines("groups", "describe", "modern", "--members")
        assert heading.split() == ["Group:", "modern", "Type:", "consumer", "State:", "Stable",
                                   "Members:", "2", "Assignor:", "uniform", "Group-epoch:", "2",
                                   "Assignment-epoch:", "2"]
        described = sorted(row.split()[1:] for row in rows)
        assert described == [
            ["pod-0", "m0", "/127.0.0.1", "2", *([f"{TOPIC}:{m.owned.pop()}"] * 2)]
            if i == 0 else
            ["pod-1", "m1", "/127.0.0.1", "2", *([f"{TOPIC}:{m.owned.pop()}"] * 2)]
            for i, m in enumerate(members)]
    finally:
        for member in members:
            member.close()


def test_reset_to_earliest_is_a_dry_run_until_executed(cli, group):
    dry = cli.ok("groups", "reset-offsets", group, "--topic", TOPIC, "--to-earliest")
    assert plan(dry) == {p: (str(CONSUMED[p]), "0") for p in PRODUCED}
    assert "Dry run" in dry.stderr
    assert committed(cli, group) == CONSUMED

    cli.ok("groups", "reset-offsets", group, "--topic", TOPIC, "--to-earliest", "--execute")

    assert committed(cli, group) == {0: 0, 1: 0}
    resumed = Member(cli.bootstrap_servers, group, TOPIC, "resumed")
    try:
        poll_until([resumed], lambda: len(resumed.records) == sum(PRODUCED.values()))
    finally:
        resumed.close()


def test_shift_by_to_offset_and_to_latest_are_clamped_to_the_log(cli, group):
    cli.ok("groups", "reset-offsets", group, "--topic", TOPIC, "--shift-by", "-2", "--execute")
    assert committed(cli, group) == {0: 2, 1: 0}  # 1 - 2 is clamped to the earliest, 0

    cli.ok("groups", "reset-offsets", group, "--topic", f"{TOPIC}:1", "--to-offset", "3",
           "--execute")
    assert committed(cli, group) == {0: 2, 1: 3}

    result = cli.ok("groups", "reset-offsets", group, "--topic", f"{TOPIC}:0,1", "--to-offset",
                    "100")
    assert plan(result) == {0: ("2", "6"), 1: ("3", "4")}
    cli.ok("groups", "reset-offsets", group, "--topic", TOPIC, "--to-latest", "--execute")
    assert committed(cli, group) == PRODUCED


def test_reset_to_a_datetime_moves_to_the_first_record_at_or_after_it(cli, group):
    moment = datetime.fromtimestamp((BASE_MS + 2500) / 1000, timezone.utc).isoformat()

    cli.ok("groups", "reset-offsets", group, "--topic", TOPIC, "--to-datetime", moment,
           "--execute")

    assert committed(cli, group) == {0: 3, 1: 3}
    later = datetime.fromtimestamp((BASE_MS + 4500) / 1000, timezone.utc).isoformat()
    result = cli.ok("groups", "reset-offsets", group, "--topic", TOPIC, "--to-datetime", later)
    assert plan(result) == {0: ("3", "5"), 1: ("3", "4")}  # no record that late: the end


def test_a_deleted_group_is_gone(cli, group):
    assert cli.lines("groups", "delete", group) == ["Deleted group g."]

    assert not [line for line in cli.lines("groups", "list") if line.split()[:1] == ["g"]]
    assert_one_error_line(cli.run("groups", "describe", group), "group 'g'", "does not exist")
    assert_one_error_line(cli.run("groups", "delete", group), "group 'g'", "GROUP_ID_NOT_FOUND")


@pytest.mark.parametrize("command", [
    ["groups", "describe", "ghost"],
    ["groups", "delete", "ghost"],
], ids=" ".join)
def test_an_unknown_group_is_one_error_line(cli, command):
    assert_one_error_line(cli.run(*command), "group 'ghost'")


def test_resetting_a_missing_topic_or_partition_is_one_error_line(cli, group):
    assert_one_error_line(cli.run("groups", "reset-offsets", group, "--topic", "ghost",
                                  "--to-earliest"), "topic 'ghost'", "does not exist")
    assert_one_error_line(cli.run("groups", "reset-offsets", group, "--topic", f"{TOPIC}:0,7",
                                  "--to-earliest"), "topic 'orders' has no partition 7")


@pytest.mark.parametrize("command", [
    ["groups", "reset-offsets", "g", "--topic", "t"],
    ["groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-offset", "1"],
    ["groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"],
    ["groups", "reset-offsets", "g", "--topic", "t:x", "--to-earliest"],
    ["groups", "list", "--state", "sleepy"],
], ids=" ".join)
def test_a_bad_argument_is_one_error_line_before_anything_is_sent(command):
    result = odradek(*command, "-b", f"127.0.0.1:{closed_port()}")

    assert_one_error_line(result)
    assert "cannot reach" not in result.stderr
