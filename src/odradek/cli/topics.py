"""``odradek topics``: create, list, describe, alter, delete and reassign topics."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable
from typing import Annotated, Optional

import typer
from confluent_kafka import KafkaError, TopicCollection
from confluent_kafka.admin import (
    ConfigResource,
    NewPartitions,
    NewTopic,
    PartitionMetadata,
    ResourceType,
    TopicDescription,
)
from rich.console import Console
from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

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
from odradek.cli.reassignments import OngoingReassignment, Reassignments

app = typer.Typer(help="Create, list, describe, alter, delete and reassign topics.",
                  no_args_is_help=True)

# How often `reassign` asks the controller whether its reassignments are done: a follower
# catches up in fetch round trips, so half a second adds little and costs the controller
# little.
REASSIGNMENT_POLL_INTERVAL_S = 0.5

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


@app.command()
def reassign(
    topic: str,
    replicas: Annotated[Optional[list[str]], typer.Option(
        "--replicas", metavar="PARTITION=BROKER,...",
        help="Move a partition to these brokers, the first its preferred leader, "
             "e.g. 0=2,3,1 (repeatable).")] = None,
    cancel: Annotated[bool, typer.Option(
        "--cancel", help="Cancel reassignments in progress: the partitions go back to "
                         "their replicas from before.")] = False,
    partitions: Annotated[Optional[list[int]], typer.Option(
        "--partition", min=0, show_default="every partition being reassigned",
        help="With --cancel: a partition whose reassignment to cancel (repeatable).")] = None,
    wait: Annotated[bool, typer.Option(
        "--wait/--no-wait", help="Wait until the reassignments are done and show the "
                                 "partitions' replicas, or return once they started.")] = True,
    timeout: Annotated[float, typer.Option(
        min=0, help="Seconds to wait for the reassignments to finish.")] = 120,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Move partitions of a topic to other brokers while it is in use (KIP-455), or cancel
    their reassignment.

    The new replicas copy the partition from its leader; once they are all in sync they
    replace the old ones, which delete their copy.
    """
    if cancel and replicas:
        fail("--cancel takes no --replicas: it sends partitions back where they were")
    if partitions and not cancel:
        fail("--partition goes with --cancel; --replicas names the partitions to reassign")
    if not cancel and not replicas:
        fail("nothing to do: give --replicas PARTITION=BROKER,... or --cancel")
    with Kafka(bootstrap_server, command_config) as kafka:
        reassignments = Reassignments(kafka)
        # Where each partition ends up: its target, or for a cancel its replicas from
        # before (None if nothing is in progress; the controller refuses that one).
        expected = (_cancellations(kafka, reassignments, topic, partitions) if cancel
                    else _targets(replicas))
        refused = reassignments.alter(
            {(topic, p): None if cancel else target for p, target in expected.items()})
        started = {p: target for p, target in expected.items()
                   if p not in {error.partition for error in refused}}
        for partition, target in started.items():
            if cancel:
                back = "" if target is None else f": back to replicas {_join(target)}"
                output.line(f"Cancelling the reassignment of topic {topic} partition "
                            f"{partition}{back}.")
            else:
                output.line(f"Reassigning topic {topic} partition {partition} to replicas "
                            f"{_join(target)}.")
        if refused:
            fail("; ".join(str(error) for error in refused))
        if not wait:
            return
        deadline = time.monotonic() + timeout
        _wait_for_reassignments(reassignments, topic, started, timeout)
        for partition, now in _replicas(kafka, topic, started, deadline).items():
            output.line(f"Topic {topic} partition {partition}: replicas {_join(now)}.")


@app.command("reassignments")
def list_reassignments(
    topics: Annotated[Optional[list[str]], typer.Argument(
        show_default="all topics", help="Topics whose reassignments to list.")] = None,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """List the partition reassignments in progress: each partition's replicas, and the
    replicas being added and removed."""
    with Kafka(bootstrap_server, command_config) as kafka:
        ongoing = [r for r in Reassignments(kafka).ongoing() if not topics or r.topic in topics]
    if not ongoing:
        output.note("no reassignments in progress")
        return
    output.table(["Topic", "Partition", "Replicas", "Adding", "Removing"],
                 ([r.topic, r.partition, _join(r.replicas), _join(r.adding),
                   _join(r.removing)] for r in ongoing))


def _targets(items: list[str]) -> dict[int, tuple[int, ...]]:
    """``--replicas 0=2,3,1``: partition 0 to brokers 2, 3 and 1."""
    targets: dict[int, tuple[int, ...]] = {}
    for partition, brokers in key_value_pairs(items, "--replicas"):
        try:
            index, replicas = int(partition), tuple(int(b) for b in brokers.split(","))
        except ValueError:
            fail(f"--replicas takes PARTITION=BROKER,BROKER,..., got {partition}={brokers}")
        if index in targets:
            fail(f"--replicas names partition {index} twice")
        targets[index] = replicas
    return targets


def _cancellations(kafka: Kafka, reassignments: Reassignments, topic: str,
                   partitions: list[int] | None) -> dict[int, tuple[int, ...] | None]:
    """The partitions whose reassignment to cancel, each with its replicas from before."""
    ongoing = {r.partition: r.original_replicas for r in reassignments.ongoing(
        {topic: partitions or list(_partition_metadata(kafka, topic))})}
    if not partitions and not ongoing:
        fail(f"{_topic(topic)}: there is no reassignment in progress to cancel "
             "(NO_REASSIGNMENT_IN_PROGRESS)")
    return {p: ongoing.get(p) for p in partitions or ongoing}


def _wait_for_reassignments(reassignments: Reassignments, topic: str,
                            partitions: Collection[int], timeout_s: float) -> None:
    """Returns once the controller no longer lists the reassignment of any of
    ``partitions``, showing which are still going on; fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(stderr=True, highlight=False),
                  transient=True) as progress:
        task = progress.add_task(f"Reassigning topic {topic}", total=len(partitions))
        while (ongoing := reassignments.ongoing({topic: partitions})) and (
                time.monotonic() < deadline):
            progress.update(task, completed=len(partitions) - len(ongoing),
                            description=_progress(topic, ongoing))
            time.sleep(REASSIGNMENT_POLL_INTERVAL_S)
    if ongoing:  # failing once the progress display is gone, so the line stands alone
        fail(f"{_topic(topic)}: the reassignment of partition "
             f"{_join(r.partition for r in ongoing)} did not finish within "
             f"{timeout_s:g} s; it goes on (see `odradek topics reassignments`)")


def _progress(topic: str, ongoing: list[OngoingReassignment]) -> str:
    return f"Reassigning topic {topic}: " + "; ".join(
        f"partition {r.partition} adding {_join(r.adding) or '-'}, "
        f"removing {_join(r.removing) or '-'}" for r in ongoing)


def _replicas(kafka: Kafka, topic: str, expected: dict[int, tuple[int, ...] | None],
              deadline: float) -> dict[int, list[int]]:
    """Each partition's replicas from Metadata. The broker answering may not have seen the
    controller's last write yet, so this waits (until ``deadline``) to see ``expected``."""
    while True:
        metadata = _partition_metadata(kafka, topic)
        replicas = {p: metadata[p].replicas for p in sorted(expected) if p in metadata}
        if time.monotonic() >= deadline or all(
                target is None or tuple(replicas.get(p, ())) == target
                for p, target in expected.items()):
            return replicas
        time.sleep(REASSIGNMENT_POLL_INTERVAL_S)


def _partition_metadata(kafka: Kafka, topic: str) -> dict[int, PartitionMetadata]:
    """The partitions of ``topic`` from Metadata, failing if it does not exist. Asks for
    every topic: a Metadata request naming a topic would create it where the brokers
    auto-create topics (librdkafka's admin client allows that, as a producer does)."""
    metadata = kafka.admin.list_topics(timeout=REQUEST_TIMEOUT_SECONDS).topics.get(topic)
    error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART) if metadata is None else metadata.error
    if error is not None:
        fail(kafka.describe(error, _topic(topic)))
    return metadata.partitions


def _describe_topics(kafka: Kafka, names: list[str] | None) -> dict[str, TopicDescription]:
    """DescribeTopics for ``names``, or for every topic when None (from Metadata, whose
    is_internal flag librdkafka only exposes here)."""
    names = names or list(kafka.admin.list_topics(timeout=REQUEST_TIMEOUT_SECONDS).topics)
    if not names:
        return {}
    return dict(kafka.settle(
        kafka.admin.describe_topics(TopicCollection(names), **ADMIN_TIMEOUTS), _topic))


def _ids(nodes: list) -> str:
    return _join(node.id for node in nodes)


def _join(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)
