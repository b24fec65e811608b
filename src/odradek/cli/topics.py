"""``odradek topics``: create, list, describe, alter and delete topics."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from confluent_kafka import KafkaError, TopicCollection
from confluent_kafka.admin import (
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
    TopicDescription,
)

from odradek.cli import output
from odradek.cli.arguments import (
    DEFAULT_BOOTSTRAP_SERVERS,
    BootstrapServers,
    ClientProperties,
    key_value_pairs,
)
from odradek.cli.client import (
    ADMIN_OPERATION_TIMEOUTS,
    ADMIN_TIMEOUTS,
    REQUEST_TIMEOUT_SECONDS,
    Kafka,
)
from odradek.cli.configs import alter_configs, describe_configs, non_default
from odradek.cli.errors import fail

app = typer.Typer(help="Create, list, describe, alter and delete topics.", no_args_is_help=True)

Configs = Annotated[Optional[list[str]], typer.Option(
    "--config", metavar="KEY=VALUE", help="A topic config, e.g. retention.ms=60000 (repeatable).")]


def _topic(name: str) -> str:
    return f"topic {name!r}"


@app.command()
def create(
    name: str,
    partitions: Annotated[Optional[int], typer.Option(
        min=1, show_default="the broker's num.partitions", help="Number of partitions.")] = None,
    replication_factor: Annotated[Optional[int], typer.Option(
        min=1, show_default="the broker's default.replication.factor",
        help="Replicas per partition.")] = None,
    configs: Configs = None,
    if_not_exists: Annotated[bool, typer.Option(
        "--if-not-exists", help="Succeed if the topic already exists.")] = False,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Create a topic."""
    # -1 asks the broker for its default (CreateTopics v4+, KIP-464).
    topic = NewTopic(name, num_partitions=partitions or -1,
                     replication_factor=replication_factor or -1,
                     config=dict(key_value_pairs(configs, "--config")))
    ignore = {KafkaError.TOPIC_ALREADY_EXISTS} if if_not_exists else set()
    with Kafka(bootstrap_server, command_config) as kafka:
        for created, _ in kafka.settle(
                kafka.admin.create_topics([topic], **ADMIN_OPERATION_TIMEOUTS), _topic, ignore):
            output.line(f"Created topic {created}.")


@app.command("list")
def list_topics(
    internal: Annotated[bool, typer.Option(
        "--internal", help="Include internal topics such as __consumer_offsets.")] = False,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """List topic names, one per line."""
    with Kafka(bootstrap_server, command_config) as kafka:
        for name, topic in sorted(_describe_topics(kafka, names=None).items()):
            if internal or not topic.is_internal:
                output.line(name)


@app.command()
def describe(
    names: Annotated[Optional[list[str]], typer.Argument(
        show_default="all but internal ones", help="Topics to describe.")] = None,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Show each topic's id, configs not at their default, and partitions with their leader,
    replicas and in-sync replicas."""
    with Kafka(bootstrap_server, command_config) as kafka:
        descriptions = _describe_topics(kafka, names)
        if not names:
            descriptions = {name: topic for name, topic in sorted(descriptions.items())
                            if not topic.is_internal}
        if not descriptions:
            output.note("no topics")
            return
        resources = {name: ConfigResource(ResourceType.TOPIC, name) for name in descriptions}
        configs = describe_configs(kafka, list(resources.values()))
    for name, topic in descriptions.items():
        settings = ",".join(f"{entry.name}={entry.value}"
                            for entry in non_default(configs[resources[name]]))
        replication_factor = len(topic.partitions[0].replicas) if topic.partitions else 0
        output.line(f"Topic: {topic.name}  TopicId: {topic.topic_id}  "
                    f"PartitionCount: {len(topic.partitions)}  "
                    f"ReplicationFactor: {replication_factor}  Configs: {settings}")
        output.table(
            ["Partition", "Leader", "Replicas", "Isr"],
            ([p.id, p.leader.id if p.leader else "none", _ids(p.replicas), _ids(p.isr)]
             for p in sorted(topic.partitions, key=lambda p: p.id)),
        )


@app.command()
def delete(
    names: list[str],
    if_exists: Annotated[bool, typer.Option(
        "--if-exists", help="Succeed for topics that do not exist.")]
    = False,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Delete topics and all their records."""
    ignore = {KafkaError.UNKNOWN_TOPIC_OR_PART} if if_exists else set()
    with Kafka(bootstrap_server, command_config) as kafka:
        for deleted, _ in kafka.settle(
                kafka.admin.delete_topics(names, **ADMIN_OPERATION_TIMEOUTS), _topic, ignore):
            output.line(f"Deleted topic {deleted}.")


@app.command()
def alter(
    name: str,
    partitions: Annotated[Optional[int], typer.Option(
        min=1, help="New total number of partitions (can only grow).")] = None,
    configs: Configs = None,
    delete_configs: Annotated[Optional[list[str]], typer.Option(
        "--delete-config", metavar="KEY",
        help="Return a topic config to the broker's default (repeatable).")] = None,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Add partitions to a topic or change some of its configs."""
    settings = key_value_pairs(configs, "--config")
    if partitions is None and not settings and not delete_configs:
        fail("nothing to change: give --partitions, --config or --delete-config")
    with Kafka(bootstrap_server, command_config) as kafka:
        if partitions is not None:
            kafka.result(kafka.admin.create_partitions(
                [NewPartitions(name, partitions)], **ADMIN_OPERATION_TIMEOUTS)[name], _topic(name))
        if settings or delete_configs:
            alter_configs(kafka, ResourceType.TOPIC, name, settings, delete_configs or [])
    output.line(f"Altered topic {name}.")


def _describe_topics(kafka: Kafka, names: list[str] | None) -> dict[str, TopicDescription]:
    """DescribeTopics for ``names``, or for every topic when None (from Metadata, whose
    is_internal flag librdkafka only exposes here)."""
    names = names or list(kafka.admin.list_topics(timeout=REQUEST_TIMEOUT_SECONDS).topics)
    if not names:
        return {}
    return dict(kafka.settle(
        kafka.admin.describe_topics(TopicCollection(names), **ADMIN_TIMEOUTS), _topic))


def _ids(nodes: list) -> str:
    return ",".join(str(node.id) for node in nodes)
