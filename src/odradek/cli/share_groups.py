"""``odradek share-groups``: list, describe, reset the offsets of and delete share groups
(KIP-932), like Kafka's ``kafka-share-groups.sh``.

librdkafka's admin client has no share-group calls, so the command sends the requests
itself: ListGroups (type "share") to every broker, and to the group's coordinator
ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteGroups. A
group's start offset in a partition is where its records not yet acknowledged or archived
begin; a reset moves it, only while the group has no member, and is a dry run unless
``--execute``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode

from odradek.cli import output
from odradek.cli.arguments import DEFAULT_BOOTSTRAP_SERVERS, BootstrapServers, ClientProperties
from odradek.cli.broker_requests import (
    BrokerAddress,
    describe_error,
    exchange_with_any_broker,
    exchange_with_broker,
)
from odradek.cli.client import REQUEST_TIMEOUT_SECONDS, Kafka
from odradek.cli.consume import UNUSED_GROUP_ID
from odradek.cli.errors import fail
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build

app = typer.Typer(help="List, describe, reset the offsets of and delete share groups.",
                  no_args_is_help=True)

SHARE_GROUP_TYPE = "share"


def _group(name: str) -> str:
    return f"share group {name!r}"


def _request(api_key: ApiKey, version: int, **fields: Any) -> Any:
    return build(request_class(api_key, version), **fields)


def _coordinator(kafka: Kafka, group: str) -> BrokerAddress:
    found = exchange_with_any_broker(kafka, _request(ApiKey.FIND_COORDINATOR, 4, key_type=0,
                                                     coordinator_keys=[group]))
    [coordinator] = found.coordinators
    if coordinator.error_code != ErrorCode.none:
        fail(f"{_group(group)}: {describe_error(coordinator.error_code, coordinator.error_message)}")
    return BrokerAddress(coordinator.node_id, coordinator.host, coordinator.port)


@app.command("list")
def list_groups(
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """List share groups: id and state."""
    with Kafka(bootstrap_server, command_config) as kafka:
        cluster = kafka.admin.list_topics(timeout=REQUEST_TIMEOUT_SECONDS)
        rows = []
        for broker in sorted(cluster.brokers.values(), key=lambda b: b.id):
            listed = exchange_with_broker(kafka, BrokerAddress(broker.id, broker.host, broker.port),
                           _request(ApiKey.LIST_GROUPS, 5, types_filter=[SHARE_GROUP_TYPE]))
            if listed.error_code != ErrorCode.none:
                fail(f"ListGroups: broker {broker.id}: {describe_error(listed.error_code, None)}")
            rows += [[g.group_id, g.group_state] for g in listed.groups]
    output.table(["GROUP", "STATE"], sorted(rows))


@app.command()
def describe(
    groups: Annotated[list[str], typer.Argument(help="Share groups to describe.")],
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Show each share group's state and epoch, its members with their assignment, and per
    partition its start offset and lag (records not yet acknowledged or archived)."""
    with Kafka(bootstrap_server, command_config) as kafka:
        for name in groups:
            coordinator = _coordinator(kafka, name)
            described = exchange_with_broker(kafka, coordinator, _request(
                ApiKey.SHARE_GROUP_DESCRIBE, 1, group_ids=[name],
                include_authorized_operations=False)).groups[0]
            offsets = _offsets(kafka, coordinator, name)
            if described.error_code == ErrorCode.group_id_not_found and not offsets:
                fail(f"{_group(name)}: does not exist")
            if described.error_code not in (ErrorCode.none, ErrorCode.group_id_not_found):
                fail(f"{_group(name)}: "
                     f"{describe_error(described.error_code, described.error_message)}")
            state = described.group_state if described.error_code == ErrorCode.none else "Empty"
            output.line(f"Group: {name}  State: {state}  Members: {len(described.members)}  "
                        f"Group-epoch: {described.group_epoch}")
            output.table(["MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "ASSIGNMENT"], (
                [m.member_id, m.client_id, m.client_host, m.member_epoch,
                 " ".join(f"{t.topic_name}:{','.join(map(str, sorted(t.partitions)))}"
                          for t in m.assignment.topic_partitions) or "-"]
                for m in sorted(described.members, key=lambda m: m.member_id)))
            output.table(["TOPIC", "PARTITION", "START-OFFSET", "LAG"], (
                [topic, partition, start, "-" if lag < 0 else lag]
                for (topic, partition), (start, lag) in sorted(offsets.items())))


def _offsets(kafka: Kafka, coordinator: BrokerAddress, group: str
             ) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, lag) for every partition the group has state
    for."""
    answer = exchange_with_broker(kafka, coordinator, _request(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, groups=[{"group_id": group, "topics": None}]))
    [described] = answer.groups
    if described.error_code != ErrorCode.none:
        fail(f"{_group(group)}: {describe_error(described.error_code, described.error_message)}")
    rows = {}
    for topic in described.topics:
        for partition in topic.partitions:
            if partition.error_code != ErrorCode.none:
                fail(f"{_group(group)} on {topic.topic_name}:{partition.partition_index}: "
                     f"{describe_error(partition.error_code, partition.error_message)}")
            rows[(topic.topic_name, partition.partition_index)] = (partition.start_offset,
                                                                    partition.lag)
    return rows


@app.command("reset-offsets")
def reset_offsets(
    group: Annotated[str, typer.Argument(help="The share group.")],
    topic: Annotated[str, typer.Option("--topic", help="The topic whose offsets to reset.")],
    to_earliest: Annotated[bool, typer.Option("--to-earliest")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest")] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset", min=0)] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Apply; without it, only show "
                                          "the plan.")] = False,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Move the group's start offset in every partition of TOPIC (the group must have no
    member): to the log start, the log end, or an offset (clamped to the log)."""
    if sum((to_earliest, to_latest, to_offset is not None)) != 1:
        fail("give exactly one of --to-earliest, --to-latest, --to-offset")
    with Kafka(bootstrap_server, command_config) as kafka:
        consumer = kafka.consumer(**{"group.id": UNUSED_GROUP_ID})
        low_high = {p: consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                      timeout=REQUEST_TIMEOUT_SECONDS)
                    for p in kafka.partitions(consumer, topic)}
        plan = {p: low if to_earliest else high if to_latest else min(max(to_offset, low), high)
                for p, (low, high) in low_high.items()}
        coordinator = _coordinator(kafka, group)
        current = _offsets(kafka, coordinator, group)
        output.table(["TOPIC", "PARTITION", "START-OFFSET", "NEW-START-OFFSET"], (
            [topic, p, current.get((topic, p), (-1, -1))[0], new]
            for p, new in sorted(plan.items())))
        if not execute:
            output.note("dry run: nothing changed (--execute to apply)")
            return
        answer = exchange_with_broker(kafka, coordinator, _request(
            ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, group_id=group, topics=[{
                "topic_name": topic, "partitions": [
                    {"partition_index": p, "start_offset": new} for p, new in plan.items()]}]))
    if answer.error_code != ErrorCode.none:
        fail(f"{_group(group)}: {describe_error(answer.error_code, answer.error_message)}")
    failures = [f"{topic}:{p.partition_index}: {describe_error(p.error_code, p.error_message)}"
                for t in answer.responses for p in t.partitions
                if p.error_code != ErrorCode.none]
    if failures:
        fail(f"{_group(group)}: " + "; ".join(failures))
    output.line(f"Reset {_group(group)} on {topic}.")


@app.command()
def delete(
    groups: Annotated[list[str], typer.Argument(help="Share groups to delete.")],
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Delete share groups without members, with their state."""
    with Kafka(bootstrap_server, command_config) as kafka:
        for name in groups:
            answer = exchange_with_broker(kafka, _coordinator(kafka, name),
                           _request(ApiKey.DELETE_GROUPS, 2, groups_names=[name]))
            [result] = answer.results
            if result.error_code != ErrorCode.none:
                fail(f"{_group(name)}: {describe_error(result.error_code, None)}")
            output.line(f"Deleted share group {name}.")
