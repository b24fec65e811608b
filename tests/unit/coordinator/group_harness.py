"""A group coordinator on a fake clock and an in-memory ``__consumer_offsets``, driven
the way clients drive it (``groups`` fixture, registered by this directory's conftest)."""

from __future__ import annotations

import itertools
import struct
import uuid
from collections.abc import Callable, Sequence

import pytest
from kio.schema.errors import ErrorCode

from odradek.coordinator.group.consumer_protocol import HeartbeatRequest
from odradek.coordinator.group.heartbeats import HeartbeatResult
from odradek.coordinator.group.coordinator import GroupCoordinator
from odradek.coordinator.group.group import JoinGroupResult, JoinRequest, SyncGroupResult
from odradek.coordinator.group.metadata_manager import (
    GroupMetadataManager,
    TransactionalProducer,
    TransactionalRecord,
)
from odradek.metadata.model import PartitionState, TopicMetadata

GROUP = "g"
SESSION_MS = 10_000
REBALANCE_MS = 30_000
# The consumer protocol (KIP-848): the coordinator's session and heartbeat interval.
CONSUMER_SESSION_MS = 45_000
HEARTBEAT_INTERVAL_MS = 5_000

CONFIG = {
    "group.min.session.timeout.ms": 1_000,
    "group.max.session.timeout.ms": 60_000,
    "group.initial.rebalance.delay.ms": 3_000,
    "group.max.size": 1_000,
    "offset.metadata.max.bytes": 4096,
    "offsets.retention.minutes": 10,
    "offsets.retention.check.interval.ms": 1_000,
    "group.consumer.session.timeout.ms": CONSUMER_SESSION_MS,
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
    "group.consumer.max.size": 1_000,
    "group.consumer.assignors": ("uniform", "range"),
    "group.consumer.migration.policy": "bidirectional",
}


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


class MemoryStore:
    """``__consumer_offsets`` as lists of (key, value), one per partition.

    An append completes at once, unless ``hold`` is set: then its callback waits for
    ``release()``, as an acks=all append waits for the in-sync replicas. With ``fail_with``
    set, an append writes nothing and completes with that error. Records written in a
    producer's transaction are kept as ``TransactionalRecord``s."""

    def __init__(self, partitions: int = 3) -> None:
        self.logs: dict[int, list] = {p: [] for p in range(partitions)}
        self.fail_with: ErrorCode | None = None
        self.hold = False
        self._held: list[tuple[Callable[[ErrorCode], None], ErrorCode]] = []

    def partition_count(self) -> int:
        return len(self.logs)

    def hosted_partitions(self) -> list[int]:
        return list(self.logs)

    def read(self, partition: int) -> list:
        return list(self.logs[partition])

    def append(self, partition: int, records: Sequence,
               callback: Callable[[ErrorCode], None],
               producer: TransactionalProducer | None = None) -> None:
        error = self.fail_with or ErrorCode.none
        if error is ErrorCode.none:
            self.logs[partition].extend(
                records if producer is None else
                [TransactionalRecord(producer.producer_id, key, value) for key, value in records])
        if self.hold:
            self._held.append((callback, error))
        else:
            callback(error)

    def release(self) -> None:
        """Completes the held appends, in the order they were made."""
        held, self._held = self._held, []
        for callback, error in held:
            callback(error)

    def records(self) -> list:
        return [r for log in self.logs.values() for r in log]


class Cluster:
    """The topics (``topics=``) and the brokers' racks (``racks=``) a coordinator sees. Topic
    ids are 1, 2, 3 ... in the order of creation, so that topics sort by creation."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicMetadata] = {}
        self.racks: dict[int, str | None] = {}
        self._ids = itertools.count(1)

    def create(self, name: str, partitions: int, replicas: tuple[int, ...] = (0,)
               ) -> uuid.UUID:
        topic_id = uuid.UUID(int=next(self._ids))
        self.topics[name] = TopicMetadata(name, topic_id, self._partitions(0, partitions,
                                                                           replicas))
        return topic_id

    def grow(self, name: str, partitions: int) -> None:
        """The topic gets partitions up to ``partitions``."""
        topic = self.topics[name]
        replicas = topic.partitions[0].replicas if topic.partitions else (0,)
        self.topics[name] = TopicMetadata(
            name, topic.topic_id,
            topic.partitions + self._partitions(len(topic.partitions), partitions, replicas))

    def delete(self, name: str) -> None:
        del self.topics[name]

    def id(self, name: str) -> uuid.UUID:
        return self.topics[name].topic_id

    @staticmethod
    def _partitions(start: int, end: int, replicas: tuple[int, ...]
                    ) -> tuple[PartitionState, ...]:
        return tuple(PartitionState(p, replicas[0], 0, replicas, replicas)
                     for p in range(start, end))


class Groups:
    """Drives a coordinator the way clients do, one call per request."""

    def __init__(self, store: MemoryStore | None = None, *, cluster: Cluster | None = None,
                 now_ms: int = 1_000_000, **config) -> None:
        self.now_ms = now_ms
        self.store = store or MemoryStore()
        self.cluster = cluster or Cluster()
        self.config = CONFIG | config
        ids = itertools.count(1)
        clock = lambda: self.now_ms
        self.coordinator = GroupCoordinator(
            GroupMetadataManager(self.store, self.config.__getitem__, clock),
            self.config.__getitem__, clock, new_uuid=lambda: f"uuid{next(ids)}",
            topics=lambda: self.cluster.topics, racks=lambda: self.cluster.racks)
        self.coordinator.startup()

    def restart(self, *, keep_clock: bool = False) -> Groups:
        """A new coordinator over the same topic (a broker restart); its clock starts over
        unless ``keep_clock``."""
        return Groups(self.store, cluster=self.cluster,
                      now_ms=self.now_ms if keep_clock else 1_000_000, **self.config)

    def consumer_heartbeat(self, member_id: str = "", epoch: int = 0, **fields
                           ) -> list[HeartbeatResult]:
        """Sends one ConsumerGroupHeartbeat (fields of :func:`heartbeat_request`); the list
        receives its response when the coordinator gives it."""
        responses: list[HeartbeatResult] = []
        self.coordinator.consumer_group_heartbeat(
            heartbeat_request(member_id, epoch, **fields), responses.append)
        return responses

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.coordinator.tick()

    def join(self, member_id: str = "", *, group: str = GROUP, instance: str | None = None,
             topics: tuple[str, ...] = ("t",), protocols=None, session_ms: int = SESSION_MS,
             rebalance_ms: int = REBALANCE_MS, version: int = 9,
             client_id: str = "client") -> list[JoinGroupResult]:
        """Sends one JoinGroup; the list receives its response when the coordinator gives it."""
        responses: list[JoinGroupResult] = []
        self.coordinator.join_group(group, JoinRequest(
            member_id=member_id, group_instance_id=instance, client_id=client_id,
            client_host="/127.0.0.1", session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms, protocol_type="consumer",
            protocols=protocols or (("range", subscription(*topics)),),
            require_known_member_id=version >= 4, supports_skip_assignment=version >= 9,
            respond=responses.append))
        return responses

    def join_new(self, **options) -> tuple[str, list[JoinGroupResult]]:
        """A new member's two JoinGroups (KIP-394); returns its id and the second's response."""
        if options.get("instance") is None:
            [required] = self.join(**options)
            assert required.error is ErrorCode.member_id_required
            return required.member_id, self.join(required.member_id, **options)
        responses = self.join(**options)
        return self.coordinator.manager.groups[options.get("group", GROUP)].static_members[
            options["instance"]], responses

    def sync(self, member_id: str, generation: int, assignments: dict | None = None, *,
             group: str = GROUP, instance: str | None = None) -> list[SyncGroupResult]:
        responses: list[SyncGroupResult] = []
        self.coordinator.sync_group(
            group_id=group, generation_id=generation, member_id=member_id,
            group_instance_id=instance, protocol_type="consumer", protocol_name=None,
            assignments=assignments or {}, respond=responses.append)
        return responses

    def heartbeat(self, member_id: str, generation: int, *, instance: str | None = None,
                  group: str = GROUP) -> ErrorCode:
        return self.coordinator.heartbeat(group_id=group, generation_id=generation,
                                          member_id=member_id, group_instance_id=instance)

    def send_commit(self, offsets: dict, *, member_id: str = "", generation: int = -1,
                    group: str = GROUP, instance: str | None = None) -> list[dict]:
        """One OffsetCommit of (offset, leader epoch, metadata) per partition; the list
        receives its answer when the coordinator gives it."""
        answers: list[dict] = []
        self.coordinator.commit_offsets(
            group_id=group, generation_id=generation, member_id=member_id,
            group_instance_id=instance, offsets=offsets, respond=answers.append)
        return answers

    def commit(self, offsets: dict, **member) -> dict:
        """Commits offsets with metadata "meta" and returns the answer, given at once."""
        [answer] = self.send_commit(
            {tp: (offset, -1, "meta") for tp, offset in offsets.items()}, **member)
        return answer

    def delete_offsets(self, partitions: list, group: str = GROUP) -> tuple:
        answers: list[tuple] = []
        self.coordinator.delete_offsets(group, partitions, answers.append)
        [answer] = answers
        return answer

    def delete_groups(self, group_ids: list[str]) -> dict:
        answers: list[dict] = []
        self.coordinator.delete_groups(group_ids, answers.append)
        [answer] = answers
        return answer

    def state(self, group: str = GROUP) -> str:
        found = self.coordinator.manager.groups.get(group)
        return str(found.state) if found else "Dead"

    def form(self, count: int, **options) -> tuple[list[str], int]:
        """``count`` members join together and sync; returns their ids (leader first) and
        the generation."""
        pending = [self.join_new(**options) for _ in range(count)]
        for _ in range(REBALANCE_MS // 1000):
            if all(responses for _, responses in pending):
                break
            self.advance(1000)
        results = [responses[0] for _, responses in pending]
        generation = results[0].generation_id
        leader = results[0].leader_id
        ids = [leader] + [r.member_id for r in results if r.member_id != leader]
        syncs = [self.sync(m, generation, {m: m.encode() for m in ids}) for m in reversed(ids)]
        assert all(s and s[0].error is ErrorCode.none for s in syncs)
        return ids, generation


def heartbeat_request(member_id: str = "", epoch: int = 0, *, group: str = GROUP,
                      instance: str | None = None, rack: str | None = None,
                      rebalance_ms: int = -1, topics: Sequence[str] | None = None,
                      regex: str | None = None, assignor: str | None = None,
                      owned: dict | None = None, client_id: str = "client",
                      client_host: str = "/127.0.0.1") -> HeartbeatRequest:
    """A ConsumerGroupHeartbeat; every optional field defaults to "unchanged" (None, or
    -1 for the rebalance timeout)."""
    return HeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance,
        rack_id=rack, rebalance_timeout_ms=rebalance_ms,
        subscribed_topic_names=None if topics is None else tuple(topics),
        subscribed_topic_regex=regex, server_assignor=assignor, owned=owned,
        client_id=client_id, client_host=client_host)


def fetched(groups: Groups, partitions=None, group: str = GROUP) -> dict:
    """What OffsetFetch answers: (offset, metadata) per partition, None where none."""
    error, offsets = groups.coordinator.fetch_offsets(group, partitions)
    assert error is ErrorCode.none
    return {tp: (o.offset, o.metadata) if o else None for tp, o in offsets.items()}


def static_group(groups: Groups) -> tuple[str, str]:
    """A Stable group of a dynamic member and the static member "pod-1"."""
    dynamic, _ = groups.join_new()
    static, _ = groups.join_new(instance="pod-1")
    groups.advance(3_000)
    groups.advance(3_000)
    groups.sync(static, 1)
    groups.sync(dynamic, 1, {dynamic: b"D", static: b"S"})
    assert groups.state() == "Stable"
    return dynamic, static


@pytest.fixture
def groups() -> Groups:
    return Groups()
