"""Group configs (Kafka's GroupConfig, KIP-848 and KIP-932): set on a GROUP resource with
confluent-kafka's admin client or ``odradek configs``, shown by DescribeConfigs above the
broker's values, checked as Kafka checks them, and used by the group at once: a share group
set to ``share.auto.offset.reset=earliest`` reads what was written before it, beside one
that starts at the end, and a consumer group's members are told its own heartbeat interval."""

from __future__ import annotations

from datetime import timedelta

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from group_members import wait_until
from raw_client import RawClient
from test_cli import Cli, assert_one_error_line
from test_share_groups import SHARE_CONFIGS, poll, poll_until_some, produce, share_consumer

from odradek.protocol.api import ApiKey

# The broker's default stays "latest": only the group set to "earliest" reads the past.
pytestmark = pytest.mark.odradek_config(**{**SHARE_CONFIGS, "share_auto_offset_reset": "latest"})

TIMEOUT_SECONDS = 15


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def alter(bootstrap: str, group: str, **changes: str | None) -> None:
    """Sets each change with a value, deletes each None, on the group's resource."""
    entries = [ConfigEntry(name.replace("_", "."), value, incremental_operation=(
        AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET))
        for name, value in changes.items()]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    client = admin(bootstrap)  # alive until its answer has come
    client.incremental_alter_configs([resource])[resource].result(TIMEOUT_SECONDS)


def described(bootstrap: str, group: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.GROUP, group)
    client = admin(bootstrap)
    return client.describe_configs([resource])[resource].result(TIMEOUT_SECONDS)


def test_a_share_group_set_to_earliest_reads_what_was_written_before_it(bootstrap,
                                                                        create_topic):
    create_topic("backlog")
    old = produce(bootstrap, "backlog", 5)
    alter(bootstrap, "from-start", share_auto_offset_reset="earliest")
    from_start = share_consumer(bootstrap, "from-start", "backlog")
    from_end = share_consumer(bootstrap, "from-end", "backlog")
    try:
        got = [m.value() for m in poll_until_some(from_start)]
        while len(got) < len(old):
            got += [m.value() for m in poll(from_start)]
        assert got == old
        # the other group takes the broker's "latest": joined after the backlog, it sees
        # only what comes next (polled until its share-partition has started)
        for _ in range(10):
            assert poll(from_end, 0.3) == []
        new = produce(bootstrap, "backlog", 1, start=5)
        assert [m.value() for m in poll_until_some(from_end)] == new
    finally:
        from_start.close()
        from_end.close()


def test_describe_configs_shows_a_groups_own_values_above_the_brokers(bootstrap):
    alter(bootstrap, "tuned", share_record_lock_duration_ms="1500",
          share_isolation_level="read_committed")

    configs = described(bootstrap, "tuned")
    assert {name: (c.value, c.source) for name, c in configs.items()} == {
        "consumer.session.timeout.ms": ("45000", ConfigSource.DEFAULT_CONFIG.value),
        "consumer.heartbeat.interval.ms": ("5000", ConfigSource.DEFAULT_CONFIG.value),
        "share.session.timeout.ms": ("45000", ConfigSource.DEFAULT_CONFIG.value),
        "share.heartbeat.interval.ms": ("500", ConfigSource.STATIC_BROKER_CONFIG.value),
        "share.record.lock.duration.ms": ("1500", ConfigSource.GROUP_CONFIG.value),
        "share.auto.offset.reset": ("latest", ConfigSource.STATIC_BROKER_CONFIG.value),
        "share.isolation.level": ("read_committed", ConfigSource.GROUP_CONFIG.value),
    }
    # the group's value, then its broker synonym's chain (confluent-kafka keys them by name)
    synonyms = configs["share.record.lock.duration.ms"].synonyms
    assert list(synonyms) == ["share.record.lock.duration.ms",
                              "group.share.record.lock.duration.ms"]
    assert synonyms["share.record.lock.duration.ms"].source == ConfigSource.GROUP_CONFIG.value

    alter(bootstrap, "tuned", share_record_lock_duration_ms=None)  # back to the broker's
    lock = described(bootstrap, "tuned")["share.record.lock.duration.ms"]
    assert (lock.value, lock.source) == ("2000", ConfigSource.STATIC_BROKER_CONFIG.value)


@pytest.mark.parametrize(("changes", "message"), [
    ({"share.auto.offset.reset": "never"},
     ("Invalid value never for configuration share.auto.offset.reset: String must be one of: "
      "latest, earliest")),
    ({"no.such.config": "1"}, "Unknown group config name: no.such.config"),
    ({"share.record.lock.duration.ms": "100"},
     ("share.record.lock.duration.ms must be greater than or equal to "
      "group.share.min.record.lock.duration.ms")),
    ({"consumer.session.timeout.ms": "90000"},
     ("consumer.session.timeout.ms must be less than or equal to "
      "group.consumer.max.session.timeout.ms")),
    ({"share.auto.offset.reset": "earliest", "share.heartbeat.interval.ms": "10"},
     ("share.heartbeat.interval.ms must be greater than or equal to "
      "group.share.min.heartbeat.interval.ms")),
], ids=["bad-value", "unknown-key", "below-min", "above-max", "one-of-two-bad"])
def test_a_bad_group_config_is_invalid_config_with_kafkas_message(bootstrap, changes,
                                                                  message):
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        alter(bootstrap, "checked", **{k.replace(".", "_"): v for k, v in changes.items()})

    error = refused.value.args[0]
    assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert message in error.str()
    # nothing of a refused change is kept, the valid keys beside the bad one included
    assert all(c.source != ConfigSource.GROUP_CONFIG.value
               for c in described(bootstrap, "checked").values())


def test_members_are_told_their_own_groups_heartbeat_interval(odradek_broker, create_topic):
    """Both modern protocols: a consumer group's and a share group's own interval, beside
    groups that take the broker's."""
    create_topic("beats")
    bootstrap = odradek_broker.bootstrap_servers
    alter(bootstrap, "slow-beats", consumer_heartbeat_interval_ms="7000")
    alter(bootstrap, "slow-shares", share_heartbeat_interval_ms="9000")
    with RawClient(odradek_broker.port) as raw:
        def coordinated(group: str) -> None:
            # the first FindCoordinator creates __consumer_offsets: ask until it is led
            wait_until(lambda: raw.find_coordinator(group).error_code == 0,
                       TIMEOUT_SECONDS, "a coordinator")

        def consumer_joined(group: str):
            coordinated(group)
            return raw.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, group_id=group,
                               member_id=f"{group}-m", member_epoch=0, rebalance_timeout=30_000,
                               subscribed_topic_names=["beats"], topic_partitions=[])

        def share_joined(group: str):
            coordinated(group)
            return raw.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, group_id=group,
                               member_id=f"{group}-m", member_epoch=0, rack_id=None,
                               subscribed_topic_names=["beats"])

        answers = {"slow-beats": consumer_joined("slow-beats"),
                   "default-beats": consumer_joined("default-beats"),
                   "slow-shares": share_joined("slow-shares"),
                   "default-shares": share_joined("default-shares")}
    assert {group: (a.error_code, a.heartbeat_interval) for group, a in answers.items()} == {
        "slow-beats": (0, timedelta(milliseconds=7000)),
        "default-beats": (0, timedelta(milliseconds=5000)),
        "slow-shares": (0, timedelta(milliseconds=9000)),
        # the broker's group.share.heartbeat.interval.ms in SHARE_CONFIGS
        "default-shares": (0, timedelta(milliseconds=500)),
    }


def test_the_cli_sets_describes_and_deletes_a_groups_configs(odradek_broker):
    cli = Cli(odradek_broker.bootstrap_servers)

    def own_rows() -> list[list[str]]:
        return [row for row in (line.split() for line in cli.lines(
            "configs", "describe", "--group", "cli-group")) if "GROUP_CONFIG" in row]

    assert own_rows() == []
    cli.ok("configs", "alter", "--group", "cli-group", "--set", "share.auto.offset.reset=earliest")
    assert own_rows() == [["share.auto.offset.reset", "earliest", "GROUP_CONFIG", "false",
                           "false", "false"]]
    cli.ok("configs", "alter", "--group", "cli-group", "--delete", "share.auto.offset.reset")
    assert own_rows() == []
    assert_one_error_line(
        cli.run("configs", "alter", "--group", "cli-group", "--set", "share.isolation.level=x"),
        "group 'cli-group'", "share.isolation.level")
