"""``odradek share-groups``: the installed command against a real broker, with a share
group made by confluent-kafka's ShareConsumer."""

from __future__ import annotations

import time

import pytest
from test_cli import Cli, assert_one_error_line
from test_share_groups import SHARE_CONFIGS, poll, produce, share_consumer

pytestmark = pytest.mark.odradek_config(**SHARE_CONFIGS)

TOPIC = "jobs"


@pytest.fixture
def cli(odradek_broker) -> Cli:
    return Cli(odradek_broker.bootstrap_servers)


def test_a_share_group_is_listed_described_reset_and_deleted(cli, create_topic):
    create_topic(TOPIC)
    produce(cli.bootstrap_servers, TOPIC, 50)
    consumer = share_consumer(cli.bootstrap_servers, "workers", TOPIC,
                              **{"max.poll.records": 20})
    try:
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 20 and time.monotonic() < deadline:
            got += poll(consumer)
        consumer.commit_sync(20)  # the records polled are accepted
        assert ["workers", "Stable"] in [line.split() for line in cli.lines("share-groups",
                                                                            "list")]
        described = cli.lines("share-groups", "describe", "workers")
        assert described[0].split()[:6] == ["Group:", "workers", "State:", "Stable",
                                            "Members:", "1"]
        [row] = [line.split() for line in described if line.split()[:1] == [TOPIC]]
        assert row == [TOPIC, "0", str(len(got)), str(50 - len(got))]
        assert_one_error_line(cli.run("share-groups", "reset-offsets", "workers", "--topic",
                                      TOPIC, "--to-earliest", "--execute"),
                              "share group 'workers'", "NON_EMPTY_GROUP")
    finally:
        consumer.close()

    dry_run = cli.ok("share-groups", "reset-offsets", "workers", "--topic", TOPIC,
                     "--to-offset", "5")
    assert "dry run" in dry_run.stdout + dry_run.stderr
    cli.ok("share-groups", "reset-offsets", "workers", "--topic", TOPIC, "--to-offset", "5",
           "--execute")
    [row] = [line.split() for line in cli.lines("share-groups", "describe", "workers")
             if line.split()[:1] == [TOPIC]]
    assert row == [TOPIC, "0", "5", "45"]

    cli.ok("share-groups", "delete", "workers")
    assert "workers" not in cli.ok("share-groups", "list").stdout
    assert_one_error_line(cli.run("share-groups", "describe", "workers"),
                          "share group 'workers'", "does not exist")


def test_the_reset_of_a_share_group_is_checked_before_anything_is_sent(cli):
    assert_one_error_line(cli.run("share-groups", "reset-offsets", "g", "--topic", TOPIC),
                          "exactly one of")
