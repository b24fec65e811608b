"""``odradek groups``: list, describe, reset the offsets of and delete consumer groups.

Like Kafka's ``kafka-consumer-groups.sh``: offsets are reset only for a group without
members (its members would overwrite them), and a reset is a dry run unless ``--execute``.
Groups of both protocols are shown with their type: ``classic`` (JoinGroup/SyncGroup) or
``consumer`` (KIP-848). A consumer-protocol group is also described with the epochs and
target assignments librdkafka's admin client does not return, from a ConsumerGroupDescribe
sent to its coordinator by the CLI itself.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, Optional

import typer
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import ConsumerGroupDescription, OffsetSpec

from odradek.cli import output
from odradek.cli.arguments import DEFAULT_BOOTSTRAP_SERVERS, BootstrapServers, ClientProperties
from odradek.cli.broker_requests import BrokerAddress, describe_error, exchange_with_broker
from odradek.cli.client import ADMIN_TIMEOUTS, Kafka
from odradek.cli.consume import UNUSED_GROUP_ID
from odradek.cli.errors import fail
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build

app = typer.Typer(help="List, describe, reset the offsets of and delete consumer groups.",
                  no_args_is_help=True)

# Kafka's names for the group states, as kafka-consumer-groups.sh prints them.
_STATES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}
_TYPES = {ConsumerGroupType.CLASSIC: "classic", ConsumerGroupType.CONSUMER: "consumer"}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# librdkafka's offset for "no committed offset" (RD_KAFKA_OFFSET_INVALID).
_NO_OFFSET = -1001


def _group(name: str) -> str:
    return f"group {name!r}"


@app.command("list")
def list_groups(
    state: Annotated[Optional[str], typer.Option(
        metavar="STATE", help="Only groups in this state: Empty, Stable, PreparingRebalance, "
        "CompletingRebalance or Dead.")] = None,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """List consumer groups: id, type (classic or consumer), state and protocol type."""
    options = {} if state is None else {"states": {_parse_state(state)}}
    with Kafka(bootstrap_server, command_config) as kafka:
        listed = kafka.result(kafka.admin.list_consumer_groups(**options, **ADMIN_TIMEOUTS),
                              "listing groups")
        for error in listed.errors:  # a broker that could not list its groups
            raise error if isinstance(error, KafkaException) else KafkaException(error)
    output.table(["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"], (
        [g.group_id, _TYPES.get(g.type, "-"), _STATES.get(g.state, str(g.state)),
         "" if g.is_simple_consumer_group else "consumer"]
        for g in sorted(listed.valid, key=lambda g: g.group_id)))


@app.command()
def describe(
    groups: Annotated[list[str], typer.Argument(help="Groups to describe.")],
    members: Annotated[bool, typer.Option("--members", help="Show only the members.")] = False,
    offsets: Annotated[bool, typer.Option(
        "--offsets", help="Show only the committed offsets and lag.")] = False,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Show each group's type and state, its members with their assignment (and, in a
    consumer-protocol group, the group, assignment and member epochs and each member's
    target assignment), and per partition the committed offset, log end offset and lag."""
    show_members, show_offsets = (members or not offsets), (offsets or not members)
    with Kafka(bootstrap_server, command_config) as kafka:
        described = _describe_groups(kafka, groups)
        unknown = [name for name in groups if described[name].state is ConsumerGroupState.DEAD]
        if unknown:
            fail("; ".join(f"{_group(name)}: does not exist" for name in unknown))
        epochs = {name: _consumer_group(kafka, described[name]) for name in groups}
        committed = {name: _committed(kafka, name) for name in groups}
        assigned = {(tp.topic, tp.partition) for d in described.values()
                    for m in d.members for tp in m.assignment.topic_partitions}
        # A topic deleted since the group committed has no end: shown as "-".
        ends = _list_offsets(kafka, {tp for c in committed.values() for tp in c} | assigned,
                             OffsetSpec.latest(), ignore={KafkaError.UNKNOWN_TOPIC_OR_PART})
    for name in groups:
        group, consumer = described[name], epochs[name]
        state = consumer.group_state if consumer else _STATES.get(group.state, group.state)
        header = (f"Group: {name}  Type: {_TYPES.get(group.type, '-')}  State: {state}  "
                  f"Members: {len(group.members)}  Assignor: {group.partition_assignor or '-'}")
        if consumer:
            header += (f"  Group-epoch: {consumer.group_epoch}  "
                       f"Assignment-epoch: {consumer.assignment_epoch}")
        output.line(header)
        if show_members and consumer:
            output.table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "EPOCH",
                          "ASSIGNMENT", "TARGET-ASSIGNMENT"], (
                [m.member_id, m.instance_id or "-", m.client_id, m.client_host,
                 m.member_epoch, _described_assignment(m.assignment),
                 _described_assignment(m.target_assignment)]
                for m in sorted(consumer.members, key=lambda m: m.member_id)))
        elif show_members:
            output.table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"], (
                [m.member_id, m.group_instance_id or "-", m.client_id, m.host,
                 _assignment(m.assignment.topic_partitions)]
                for m in sorted(group.members, key=lambda m: m.member_id)))
        if show_offsets:
            owners = {(tp.topic, tp.partition): m.member_id
                      for m in group.members for tp in m.assignment.topic_partitions}
            rows = []
            for tp in sorted(set(owners) | set(committed[name])):
                current, end = committed[name].get(tp), ends.get(tp)
                lag = "-" if current is None or end is None else max(0, end - current)
                rows.append([*tp, _or_dash(current), _or_dash(end), lag,
                             owners.get(tp, "-")])
            output.table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                          "MEMBER-ID"], rows)


@app.command("reset-offsets")
def reset_offsets(
    group: str,
    topics: Annotated[list[str], typer.Option(
        "--topic", metavar="TOPIC[:P,P...]",
        help="A topic, or some of its partitions (repeatable).")],
    to_earliest: Annotated[bool, typer.Option(
        "--to-earliest", help="To each partition's first offset.")] = False,
    to_latest: Annotated[bool, typer.Option(
        "--to-latest", help="To each partition's log end offset.")] = False,
    to_datetime: Annotated[Optional[str], typer.Option(
        metavar="ISO8601", help="To the first record at or after this date-time (local time "
        "unless it has an offset).")] = None,
    to_offset: Annotated[Optional[int], typer.Option(help="To this offset.")] = None,
    shift_by: Annotated[Optional[int], typer.Option(
        help="Move the committed offset by this many records (negative: back).")] = None,
    execute: Annotated[bool, typer.Option(
        "--execute", help="Commit the new offsets; without it only the plan is shown.")] = False,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Move a group's committed offsets; the group must have no active members. New offsets
    are kept within each partition's earliest and log end offsets."""
    given = [to_earliest, to_latest, to_datetime is not None, to_offset is not None,
             shift_by is not None]
    if sum(given) != 1:
        fail("give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset "
             "and --shift-by")
    timestamp_ms = _timestamp_ms(to_datetime) if to_datetime is not None else None
    wanted = [_parse_topic(spec) for spec in topics]
    with Kafka(bootstrap_server, command_config) as kafka:
        state = _describe_groups(kafka, [group])[group]
        if state.members:
            fail(f"{_group(group)} has {len(state.members)} active member(s) (state "
                 f"{_STATES.get(state.state, state.state)}): offsets can be reset only when "
                 f"the group is inactive")
        partitions = sorted({(topic, p) for topic, only in wanted
                             for p in _partitions(kafka, topic, only)})
        current = _committed(kafka, group, partitions)
        earliest = _list_offsets(kafka, partitions, OffsetSpec.earliest())
        latest = _list_offsets(kafka, partitions, OffsetSpec.latest())
        if timestamp_ms is not None:
            at_time = _list_offsets(kafka, partitions, OffsetSpec.for_timestamp(timestamp_ms))
        plan = []
        for tp in partitions:
            if to_earliest:
                new = earliest[tp]
            elif to_latest:
                new = latest[tp]
            elif timestamp_ms is not None:
                new = at_time[tp] if at_time[tp] >= 0 else latest[tp]  # none that late: end
            elif to_offset is not None:
                new = to_offset
            elif tp not in current:
                fail(f"cannot shift {_group(group)} on {tp[0]}:{tp[1]}: it has no committed "
                     f"offset there")
            else:
                new = current[tp] + shift_by
            plan.append((tp, current.get(tp), min(max(new, earliest[tp]), latest[tp])))
        if execute and plan:
            request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, new)
                                                           for (t, p), _, new in plan])
            result = kafka.result(kafka.admin.alter_consumer_group_offsets(
                [request], **ADMIN_TIMEOUTS)[group], _group(group))
            for tp in result.topic_partitions:
                if tp.error is not None:
                    fail(kafka.describe(tp.error, f"{_group(group)} on {tp.topic}:{tp.partition}"))
    output.table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"], (
        [t, p, _or_dash(old), new] for (t, p), old, new in plan))
    output.note(f"Committed new offsets for {_group(group)}." if execute else
                "Dry run: nothing changed; add --execute to commit these offsets.")


@app.command()
def delete(
    groups: Annotated[list[str], typer.Argument(help="Groups to delete.")],
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Delete groups and their committed offsets; a group must have no members."""
    with Kafka(bootstrap_server, command_config) as kafka:
        for deleted, _ in kafka.settle(
                kafka.admin.delete_consumer_groups(groups, **ADMIN_TIMEOUTS), _group):
            output.line(f"Deleted group {deleted}.")


def _describe_groups(kafka: Kafka, groups: list[str]) -> dict[str, ConsumerGroupDescription]:
    return dict(kafka.settle(
        kafka.admin.describe_consumer_groups(groups, **ADMIN_TIMEOUTS), _group))


def _consumer_group(kafka: Kafka, description: ConsumerGroupDescription) -> Any:
    """A consumer-protocol group as its coordinator describes it (ConsumerGroupDescribe),
    None for a classic group."""
    if description.type is not ConsumerGroupType.CONSUMER:
        return None
    node = description.coordinator
    request = build(request_class(ApiKey.CONSUMER_GROUP_DESCRIBE, 0),
                    group_ids=[description.group_id], include_authorized_operations=False)
    response = exchange_with_broker(kafka, BrokerAddress(node.id, node.host, node.port),
                                    request)
    [described] = response.groups
    if described.error_code != 0:
        fail(f"{_group(description.group_id)}: "
             f"{describe_error(described.error_code, described.error_message)}")
    return described


def _described_assignment(assignment: Any) -> str:
    return " ".join(f"{t.topic_name}:{','.join(map(str, sorted(t.partitions)))}"
                    for t in sorted(assignment.topic_partitions, key=lambda t: t.topic_name)
                    ) or "-"


def _committed(kafka: Kafka, group: str, partitions: list[tuple[str, int]] | None = None
               ) -> dict[tuple[str, int], int]:
    """The group's committed offsets (of ``partitions``, or all); one group per request is
    all librdkafka allows."""
    request = ConsumerGroupTopicPartitions(
        group, None if partitions is None else [TopicPartition(t, p) for t, p in partitions])
    result = kafka.result(kafka.admin.list_consumer_group_offsets(
        [request], **ADMIN_TIMEOUTS)[group], _group(group))
    offsets = {}
    for tp in result.topic_partitions:
        if tp.error is not None:
            fail(kafka.describe(tp.error, f"{_group(group)} on {tp.topic}:{tp.partition}"))
        if tp.offset != _NO_OFFSET:
            offsets[(tp.topic, tp.partition)] = tp.offset
    return offsets


def _list_offsets(kafka: Kafka, partitions, spec: OffsetSpec,
                  ignore: set[int] = frozenset()) -> dict[tuple[str, int], int]:
    """ListOffsets; partitions failing with an error code in ``ignore`` are left out."""
    if not partitions:
        return {}
    futures = kafka.admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions},
                                       **ADMIN_TIMEOUTS)
    return {(tp.topic, tp.partition): info.offset
            for tp, info in kafka.settle(futures, _partition, ignore)}


def _partition(tp: TopicPartition) -> str:
    return f"topic {tp.topic!r} partition {tp.partition}"


def _or_dash(value: object) -> object:
    return "-" if value is None else value


def _partitions(kafka: Kafka, topic: str, only: list[int] | None) -> list[int]:
    # A consumer's metadata request, unlike the admin client's, never auto-creates the topic.
    existing = kafka.partitions(kafka.consumer(**{"group.id": UNUSED_GROUP_ID}), topic)
    missing = sorted(set(only or []) - set(existing))
    if missing:
        fail(f"topic {topic!r} has no partition {','.join(map(str, missing))} "
             f"(it has {len(existing)})")
    return only or existing


def _assignment(partitions: list[TopicPartition]) -> str:
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(topics.items()))


def _parse_state(text: str) -> ConsumerGroupState:
    by_name = {name.lower(): state for state, name in _STATES.items()}
    if text.lower() not in by_name:
        fail(f"--state takes one of {', '.join(_STATES.values())}, got {text!r}")
    return by_name[text.lower()]


def _parse_topic(spec: str) -> tuple[str, list[int] | None]:
    topic, sep, partitions = spec.partition(":")
    try:
        numbers = [int(p) for p in partitions.split(",")] if sep else None
    except ValueError:
        numbers = []
    if not topic or numbers == [] or any(n < 0 for n in numbers or []):
        fail(f"--topic takes TOPIC or TOPIC:PARTITION[,PARTITION...], got {spec!r}")
    return topic, numbers


def _timestamp_ms(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        fail(f"--to-datetime takes an ISO 8601 date-time, got {text!r}")
    # astimezone(): a naive date-time is local time. Integer arithmetic: no float rounding.
    return (moment.astimezone() - _EPOCH) // timedelta(milliseconds=1)
