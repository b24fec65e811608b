"""``odradek configs``: describe and change the configs of topics, brokers and groups.

A group's configs (KIP-848, KIP-932) are its own session timeouts and heartbeat intervals, and
for a share group its record lock duration, where it starts reading a partition
(``share.auto.offset.reset``) and its isolation level; a group without them takes the
broker's.

Changes use IncrementalAlterConfigs (KIP-339): only the named keys are set or deleted, the
others keep their values — unlike AlterConfigs, which replaces the whole set.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from odradek.cli import output
from odradek.cli.arguments import (
    DEFAULT_BOOTSTRAP_SERVERS,
    BootstrapServers,
    ClientProperties,
    key_value_pairs,
)
from odradek.cli.client import ADMIN_TIMEOUTS, Kafka
from odradek.cli.errors import fail

app = typer.Typer(help="Describe and change the configs of topics, brokers and groups.",
                  no_args_is_help=True)

TopicName = Annotated[Optional[str], typer.Option("--topic", help="A topic's configs.")]
BrokerId = Annotated[Optional[int], typer.Option("--broker", help="A broker's configs (its id).")]
GroupId = Annotated[Optional[str], typer.Option(
    "--group", help="A consumer or share group's configs.")]


def subject(resource: ConfigResource) -> str:
    if resource.restype == ResourceType.TOPIC:
        return f"topic {resource.name!r}"
    if resource.restype == ResourceType.GROUP:
        return f"group {resource.name!r}"
    return f"broker {resource.name}"


def describe_configs(kafka: Kafka, resources: list[ConfigResource],
                     ) -> dict[ConfigResource, list[ConfigEntry]]:
    """Every config of each resource, sorted by name."""
    return {resource: sorted(entries.values(), key=lambda entry: entry.name)
            for resource, entries in kafka.settle(
                kafka.admin.describe_configs(resources, **ADMIN_TIMEOUTS), subject)}


def non_default(entries: list[ConfigEntry]) -> list[ConfigEntry]:
    """Entries set somewhere (topic, broker or its properties file), not Kafka's defaults."""
    return [entry for entry in entries if not entry.is_default]


def alter_configs(kafka: Kafka, restype: ResourceType, name: str,
                  settings: list[tuple[str, str]], deletions: list[str]) -> None:
    """Sets ``(key, value)`` settings and deletes (returns to default) the named keys."""
    changes = [ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
               for key, value in settings]
    changes += [ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
                for key in deletions]
    resource = ConfigResource(restype, name, incremental_configs=changes)
    kafka.result(kafka.admin.incremental_alter_configs([resource], **ADMIN_TIMEOUTS)[resource],
                 subject(resource))


def _resource(topic: str | None, broker: int | None,
              group: str | None) -> tuple[ResourceType, str]:
    given = [(restype, name) for restype, name in ((ResourceType.TOPIC, topic),
                                                   (ResourceType.BROKER, broker),
                                                   (ResourceType.GROUP, group))
             if name is not None]
    if len(given) != 1:
        fail("give exactly one of --topic, --broker and --group")
    restype, name = given[0]
    return restype, str(name)


@app.command()
def describe(
    topic: TopicName = None,
    broker: BrokerId = None,
    group: GroupId = None,
    all_configs: Annotated[bool, typer.Option("--all", help="Include configs at their default.")]
    = False,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Show a topic's, a broker's or a group's configs: only those not at their default
    unless --all."""
    restype, name = _resource(topic, broker, group)
    with Kafka(bootstrap_server, command_config) as kafka:
        resource = ConfigResource(restype, name)
        entries = describe_configs(kafka, [resource])[resource]
    shown = entries if all_configs else non_default(entries)
    if not shown:
        output.note(f"{subject(resource)} has no configs set (--all shows the defaults)")
        return
    output.table(
        ["Name", "Value", "Source", "Default", "Read-only", "Sensitive"],
        ([entry.name, "(sensitive)" if entry.is_sensitive else entry.value, _source(entry),
          _flag(entry.is_default), _flag(entry.is_read_only), _flag(entry.is_sensitive)]
         for entry in shown),
    )


@app.command()
def alter(
    topic: TopicName = None,
    broker: BrokerId = None,
    group: GroupId = None,
    settings: Annotated[Optional[list[str]], typer.Option(
        "--set", metavar="KEY=VALUE", help="Set a config (repeatable).")] = None,
    deletions: Annotated[Optional[list[str]], typer.Option(
        "--delete", metavar="KEY", help="Return a config to its default (repeatable).")] = None,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Set or delete some configs of a topic, a broker or a group, leaving the others as
    they are."""
    restype, name = _resource(topic, broker, group)
    pairs = key_value_pairs(settings, "--set")
    if not pairs and not deletions:
        fail("nothing to change: give --set KEY=VALUE or --delete KEY")
    with Kafka(bootstrap_server, command_config) as kafka:
        alter_configs(kafka, restype, name, pairs, deletions or [])
    output.line(f"Altered configs of {subject(ConfigResource(restype, name))}.")


def _source(entry: ConfigEntry) -> str:
    # confluent-kafka hands over the wire's int, and its enum lacks some of Kafka's sources
    # (6 DYNAMIC_BROKER_LOGGER_CONFIG, 7 CLIENT_METRICS_CONFIG, 8 GROUP_CONFIG).
    try:
        return ConfigSource(entry.source).name
    except ValueError:
        return str(entry.source)


def _flag(value: bool) -> str:
    return "true" if value else "false"
