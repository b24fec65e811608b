"""``ConsumerGroup`` and ``ConsumerGroupMember``: a group of the consumer protocol (KIP-848),
where the coordinator assigns the partitions and each member moves to its share on its own.

Three epochs drive it:

* the **group epoch** is bumped whenever what the assignment depends on changes: a member
  joins, leaves or changes its subscription, or a subscribed topic gains partitions;
* the **assignment epoch** is the group epoch the target assignment was computed for; the
  coordinator recomputes the target (with the group's server-side assignor) whenever the
  group epoch is ahead of it;
* each member's **member epoch** reaches the assignment epoch once the member has its part
  of the target: first it revokes what the target takes from it (state
  UNREVOKED_PARTITIONS, epoch unchanged), then it gets what the target gives it, except
  partitions another member has not revoked yet (UNRELEASED_PARTITIONS; they follow on a
  later heartbeat). A partition is owned by at most one member at any time: the
  *partition epochs* map says who holds each, at which epoch.

The group changes only through :meth:`ConsumerGroup.replay`, with the records of
``consumer_records`` that also go to ``__consumer_offsets``: loading a partition and
handling a heartbeat apply the same records the same way, so what is in memory is always what
the log says (or will say, once the append completes). Members are immutable values:
the protocol builds a new one with :func:`dataclasses.replace` and writes a record for what
differs.

The committed offsets of the group (``offsets``, commits in progress, transactional
commits) are kept as in a classic group, so that the offset paths of the metadata manager
serve both kinds.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from dataclasses import dataclass, field

from odradek.coordinator.group.consumer_records import (
    ConsumerGroupKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberSubscriptionValue,
    Partitions,
    RecordKey,
    RecordType,
    SubscriptionMetadataValue,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberValue,
    TopicMetadataValue,
    partitions_of,
    topic_partitions,
)
from odradek.coordinator.group.group import CONSUMER_PROTOCOL_TYPE
from odradek.coordinator.group.offsets_topic import OffsetAndMetadata
from odradek.coordinator.group.state import GroupEvent, GroupState
from odradek.protocol.topic_partition import TopicPartition

# Member epochs a heartbeat may carry besides the member's own.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2  # a static member that will come back


class MemberState(enum.IntEnum):
    """Where a member is on its way to the target assignment (Kafka's ``MemberState``; the
    values are those of the CurrentMemberAssignment record)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # must give up partitions first; its epoch waits
    UNRELEASED_PARTITIONS = 2  # has its new epoch; some partitions are still held by others
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)

    def subscription_value(self) -> MemberSubscriptionValue:
        return MemberSubscriptionValue(
            instance_id=self.instance_id, rack_id=self.rack_id, client_id=self.client_id,
            client_host=self.client_host, subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor)

    def assignment_value(self) -> CurrentAssignmentValue:
        return CurrentAssignmentValue(
            member_epoch=self.member_epoch, previous_member_epoch=self.previous_member_epoch,
            state=int(self.state), assigned_partitions=topic_partitions(self.assigned),
            partitions_pending_revocation=topic_partitions(self.pending_revocation))

    def same_subscription(self, other: ConsumerGroupMember) -> bool:
        return self.subscription_value() == other.subscription_value()

    def same_assignment(self, other: ConsumerGroupMember) -> bool:
        return self.assignment_value() == other.assignment_value()

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def with_subscription(self, value: MemberSubscriptionValue) -> ConsumerGroupMember:
        return dataclasses.replace(
            self, instance_id=value.instance_id, rack_id=value.rack_id,
            client_id=value.client_id, client_host=value.client_host,
            subscribed_topic_names=tuple(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor)

    def with_assignment(self, value: CurrentAssignmentValue | None) -> ConsumerGroupMember:
        if value is None:
            return dataclasses.replace(self, member_epoch=0, previous_member_epoch=0,
                                       state=MemberState.STABLE, assigned={},
                                       pending_revocation={})
        try:
            state = MemberState(value.state)
        except ValueError:
            state = MemberState.UNKNOWN
        return dataclasses.replace(
            self, member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch, state=state,
            assigned=partitions_of(value.assigned_partitions),
            pending_revocation=partitions_of(value.partitions_pending_revocation))


@dataclass(frozen=True, slots=True)
class SubscribedTopic:
    """A subscribed topic as the target assignment was computed for it."""

    topic_id: uuid.UUID
    name: str
    partitions: int


class ModernGroup:
    """What a consumer group and a share group (``share_group``) — Kafka's ``ModernGroup``s
    — replay alike: their members' records (subscription, part of the target assignment,
    current assignment) and the target assignment's epoch, record types that both kinds
    name alike in their own numbering (``RecordType``, ``ShareRecordType``). Each kind has
    ``members``, ``target`` and ``assignment_epoch``, makes its members with
    ``member_class`` and keeps what it derives from them in ``_put_member`` and
    ``_remove_member``."""

    __slots__ = ()

    def _replay_member_records(self, key: RecordKey, value: object | None, now_ms: int
                               ) -> bool:
        """Applies the record if it is one of those; False if it is the kind's own."""
        member_id = key.member_id or ""
        match key.type.name:
            case "MEMBER_SUBSCRIPTION":
                if value is None:
                    self._remove_member(member_id, now_ms)
                else:
                    self._put_member(self._member(member_id).with_subscription(value), now_ms)
            case "TARGET_ASSIGNMENT_EPOCH":
                self.assignment_epoch = 0 if value is None else value.assignment_epoch
            case "TARGET_ASSIGNMENT_MEMBER":
                if value is None:
                    self.target.pop(member_id, None)
                else:
                    self.target[member_id] = partitions_of(value.topic_partitions)
            case "CURRENT_ASSIGNMENT":
                # A tombstone never creates a member (Kafka ignores it).
                if value is not None or member_id in self.members:
                    self._put_member(self._member(member_id).with_assignment(value), now_ms)
            case _:
                return False
        return True

    def _member(self, member_id: str):
        return self.members.get(member_id) or self.member_class(member_id)


@dataclass(eq=False, slots=True)
class ConsumerGroup(ModernGroup):
    group_id: str
    state_timestamp_ms: int = 0
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Partitions] = field(default_factory=dict)
    subscription_metadata: dict[str, SubscribedTopic] = field(default_factory=dict)
    # (topic id, partition) -> epoch of the member holding it (assigned or being revoked).
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    removed: bool = False
    # Offsets, as in a classic group (see the module docstring).
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    pending_offset_commits: int = 0
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(
        default_factory=dict)
    # Timers, not persisted: a loaded group starts every member's session afresh.
    session_deadlines_ms: dict[str, int] = field(default_factory=dict)
    # member id -> (the epoch it must leave, deadline) while it revokes partitions.
    revocation_deadlines_ms: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The metadata version the subscription metadata was last computed at.
    metadata_version: int = -1

    protocol_type = CONSUMER_PROTOCOL_TYPE
    member_class = ConsumerGroupMember

    # -- state ---------------------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        """Kafka's ``ConsumerGroup.maybeUpdateGroupState``, derived rather than stored."""
        if self.removed:
            return GroupState.DEAD
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        if all(m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return GroupState.STABLE
        return GroupState.RECONCILING

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition(self, event: GroupEvent, now_ms: int) -> None:
        """Only removal is an event here; every other state follows from the epochs."""
        if event is not GroupEvent.GROUP_REMOVED:
            raise ValueError(f"a consumer group's state is derived; {event.name} is not")
        self.removed = True
        self.state_timestamp_ms = now_ms

    @property
    def generation_id(self) -> int:
        return self.group_epoch

    def has_offsets(self) -> bool:
        return (bool(self.offsets) or self.pending_offset_commits > 0
                or bool(self.pending_txn_offsets))

    def unstable_partitions(self) -> set[TopicPartition]:
        return {tp for offsets in self.pending_txn_offsets.values() for tp in offsets}

    @property
    def subscribed_topics(self) -> frozenset[str]:
        return frozenset(self.subscription_metadata)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscription_metadata

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members ask for (Kafka's ``preferredServerAssignor``); ties go
        to the name first in alphabetical order, so every coordinator picks the same."""
        votes: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if not votes:
            return default
        return min(votes, key=lambda name: (-votes[name], name))

    # -- replay --------------------------------------------------------------------------

    def replay(self, key: ConsumerGroupKey, value: object | None, now_ms: int) -> None:
        """Applies one record (Kafka's ``GroupMetadataManager.replay`` for the six types)."""
        if self._replay_member_records(key, value, now_ms):
            return
        match key.type:
            case RecordType.GROUP_EPOCH:
                was_empty = not self.members
                if value is None:
                    self.removed = True
                else:
                    assert isinstance(value, GroupEpochValue)
                    self.group_epoch = value.epoch
                if was_empty:
                    self.state_timestamp_ms = now_ms
            case RecordType.SUBSCRIPTION_METADATA:
                self.subscription_metadata = {} if value is None else {
                    t.topic_name: SubscribedTopic(t.topic_id, t.topic_name, t.num_partitions)
                    for t in value.topics}

    def _put_member(self, member: ConsumerGroupMember, now_ms: int) -> None:
        old = self.members.get(member.member_id)
        if old is None and not self.members:
            self.state_timestamp_ms = now_ms
        if old is not None:
            self._release_partition_epochs(old)
            if old.instance_id is not None and old.instance_id != member.instance_id:
                self.static_members.pop(old.instance_id, None)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for partitions in (member.assigned, member.pending_revocation):
            for topic_id, parts in partitions.items():
                for p in parts:
                    self.partition_epochs[(topic_id, p)] = member.member_epoch

    def _release_partition_epochs(self, member: ConsumerGroupMember) -> None:
        for partitions in (member.assigned, member.pending_revocation):
            for topic_id, parts in partitions.items():
                for p in parts:
                    if self.partition_epochs.get((topic_id, p)) == member.member_epoch:
                        del self.partition_epochs[(topic_id, p)]

    def _remove_member(self, member_id: str, now_ms: int) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._release_partition_epochs(member)
        if member.instance_id is not None and self.static_members.get(
                member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.session_deadlines_ms.pop(member_id, None)
        self.revocation_deadlines_ms.pop(member_id, None)
        if not self.members:
            self.state_timestamp_ms = now_ms


def target_assignment_epoch_value(epoch: int) -> TargetAssignmentEpochValue:
    return TargetAssignmentEpochValue(assignment_epoch=epoch)


def target_member_value(partitions: Partitions) -> TargetAssignmentMemberValue:
    return TargetAssignmentMemberValue(topic_partitions=topic_partitions(partitions))


def subscription_metadata_value(topics: dict[str, SubscribedTopic]
                                ) -> SubscriptionMetadataValue:
    return SubscriptionMetadataValue(topics=tuple(
        TopicMetadataValue(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.partitions,
                           partition_metadata=())
        for t in sorted(topics.values(), key=lambda t: t.name)))
