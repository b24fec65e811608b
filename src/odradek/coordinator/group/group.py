"""``Group`` and ``Member``: one classic group's membership, generation and offsets.

These are Kafka's ``GroupMetadata`` and ``MemberMetadata`` (the classic protocol): plain
data and the bookkeeping that keeps it consistent (the leader, static members, members
awaiting a JoinGroup or SyncGroup response). Deciding what a request does is
``membership.py``'s and ``coordinator.py``'s; a state changes only through
:meth:`Group.transition` and the table in ``state.py``.

A member waiting for its JoinGroup or SyncGroup response holds a *callback* here, as in
Kafka (``awaitingJoinCallback``): the coordinator calls it once with the result, and the
asyncio shell behind it answers the request. Nothing in this module does I/O.

Not thread-safe: the broker's event loop owns every group.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.offsets_topic import (
    OffsetAndMetadata,
    StoredGroup,
    StoredMember,
)
from odradek.coordinator.group.state import GroupEvent, GroupState, next_state
from odradek.protocol.topic_partition import TopicPartition

# The protocol type of Kafka consumers; their metadata says which topics they subscribe to.
CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """One member as the leader's JoinGroup response lists it."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]
# (name, metadata) in the member's order of preference.
Protocols = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """One JoinGroup request's member fields."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    require_known_member_id: bool  # v4+ (KIP-394)
    supports_skip_assignment: bool  # v9+ (KIP-814)
    respond: JoinCallback


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """DescribeGroups' view (Kafka's ``GroupSummary``): metadata and assignments only when
    Stable, where they are the current generation's."""

    group_id: str
    state: GroupState
    protocol_type: str
    protocol_data: str
    members: tuple[MemberDescription, ...]


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = None
    awaiting_sync: SyncCallback | None = None
    # Joined without a member id and not yet through a rebalance (Kafka's ``isNew``): its
    # deadline is the new-member join timeout, not the session timeout.
    is_new: bool = False
    heartbeat_deadline_ms: int = 0

    def metadata(self, protocol_name: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise KeyError(f"member {self.member_id} does not support {protocol_name}")

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def update(self, join: JoinRequest) -> None:
        """Kafka's ``updateMember``: new protocols and timeouts, and it now awaits the join.
        A JoinGroup it sent before and that still waits is answered now: the client has
        moved on to this one, and nothing else would ever answer it."""
        self.protocols = join.protocols
        self.rebalance_timeout_ms = join.rebalance_timeout_ms
        self.session_timeout_ms = join.session_timeout_ms
        self.respond_join(JoinGroupResult(ErrorCode.rebalance_in_progress, self.member_id))
        self.awaiting_join = join.respond

    def vote(self, candidates: set[str]) -> str:
        return next(name for name in self.protocol_names() if name in candidates)

    def has_satisfied_heartbeat(self, now_ms: int) -> bool:
        """Kafka's ``hasSatisfiedHeartbeat``: members waiting for a rebalance to finish
        cannot heartbeat, so they do not expire; a new one expires all the same (it may have
        gone away during a long rebalance)."""
        if not self.is_new and (self.awaiting_join or self.awaiting_sync):
            return True
        return now_ms < self.heartbeat_deadline_ms

    def respond_join(self, result: JoinGroupResult) -> None:
        callback, self.awaiting_join = self.awaiting_join, None
        if callback is not None:
            callback(result)

    def respond_sync(self, result: SyncGroupResult) -> None:
        callback, self.awaiting_sync = self.awaiting_sync, None
        if callback is not None:
            callback(result)

    def stored(self, protocol_name: str | None, assignment: bytes) -> StoredMember:
        return StoredMember(
            self.member_id, self.group_instance_id, self.client_id, self.client_host,
            self.rebalance_timeout_ms, self.session_timeout_ms,
            self.metadata(protocol_name) if protocol_name else b"", assignment)


@dataclass(slots=True)
class RebalanceTimer:
    """When the join phase of a rebalance ends (Kafka's DelayedJoin and InitialDelayedJoin).

    ``initial_remaining_ms`` is set while a new group waits ``group.initial.rebalance.delay.ms``
    for more members: each wait that saw a new member is followed by another, until the
    rebalance timeout is used up; such a wait never ends early.
    """

    deadline_ms: int
    initial_remaining_ms: int | None = None


@dataclass(eq=False, slots=True)
class Group:
    group_id: str
    state: GroupState
    state_timestamp_ms: int
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    # KIP-394: member ids handed out with MEMBER_ID_REQUIRED -> when they lapse.
    pending_members: dict[str, int] = field(default_factory=dict)
    # Members of the new generation that have not sent their SyncGroup yet.
    pending_sync_members: set[str] = field(default_factory=set)
    sync_deadline_ms: int | None = None
    rebalance: RebalanceTimer | None = None
    new_member_added: bool = False
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # OffsetCommit writes appended but not completed yet (Kafka's ``pendingOffsetCommits``).
    pending_offset_commits: int = 0
    # Offsets committed in transactions not ended yet, by producer id (Kafka's
    # ``pendingTransactionalOffsetCommits``): they take effect at the COMMIT marker.
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(
        default_factory=dict)
    # Topics the members subscribe to (consumer protocol only); None when unknown.
    subscribed_topics: frozenset[str] | None = None

    def transition(self, event: GroupEvent, now_ms: int) -> None:
        self.state = next_state(self.state, event)
        self.state_timestamp_ms = now_ms

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has_offsets(self) -> bool:
        """Kafka's ``hasOffsets``: a commit still being written counts, so that an Empty
        group is not removed under it."""
        return (bool(self.offsets) or self.pending_offset_commits > 0
                or bool(self.pending_txn_offsets))

    def unstable_partitions(self) -> set[TopicPartition]:
        """Partitions with an offset committed in a transaction that has not ended."""
        return {tp for offsets in self.pending_txn_offsets.values() for tp in offsets}

    # -- members -------------------------------------------------------------------------

    def add(self, member: Member, callback: JoinCallback | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.awaiting_join = callback
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync_members.discard(member_id)

    def replace_static_member(self, instance_id: str, old_member_id: str,
                              new_member_id: str) -> Member:
        """KIP-345: a known instance id came back with a new member id. The old id is fenced
        at once, whatever it was waiting for."""
        member = self.members.pop(old_member_id)
        member.respond_join(JoinGroupResult(ErrorCode.fenced_instance_id, old_member_id))
        member.respond_sync(SyncGroupResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        self.pending_sync_members.discard(old_member_id)
        return member

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def has_all_members_joined(self) -> bool:
        return (all(m.awaiting_join for m in self.members.values())
                and not self.pending_members)

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """The leader must be a member that rejoined; False when no member did."""
        leader = self.members.get(self.leader_id) if self.leader_id else None
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    # -- protocols -----------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        candidates = set(first.protocol_names())
        for member in members:
            candidates &= set(member.protocol_names())
        return candidates

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        if not self.members:
            return True
        return bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """Each member votes for its preferred protocol among those all members support; the
        most votes win (ties: the first member's preference, to be deterministic)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])  # max keeps the first of equals

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            subscribed = consumer_subscription_topics(member.metadata(self.protocol_name))
            if subscribed is None:
                return None
            topics |= subscribed
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def describe(self) -> GroupDescription:
        stable = self.is_(GroupState.STABLE)
        members = tuple(
            MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                              m.metadata(self.protocol_name) if stable else b"",
                              m.assignment if stable else b"")
            for m in self.members.values())
        return GroupDescription(self.group_id, self.state, self.protocol_type or "",
                                self.protocol_name if stable else "", members)

    # -- persistence ---------------------------------------------------------------------

    def stored(self, assignments: dict[str, bytes]) -> StoredGroup:
        return StoredGroup(
            protocol_type=self.protocol_type or "",
            generation_id=self.generation_id,
            protocol_name=self.protocol_name,
            leader_id=self.leader_id,
            state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(m.stored(self.protocol_name, assignments.get(m.member_id, b""))
                          for m in self.members.values()),
        )

    @classmethod
    def loaded(cls, group_id: str, stored: StoredGroup, now_ms: int) -> Group:
        """A group as its last GroupMetadataValue left it: Stable with its members (who keep
        their generation and need not rejoin), or Empty."""
        group = cls(group_id, GroupState.STABLE if stored.members else GroupState.EMPTY,
                    stored.state_timestamp_ms, generation_id=stored.generation_id,
                    protocol_type=stored.protocol_type or None,
                    protocol_name=stored.protocol_name, leader_id=stored.leader_id)
        for m in stored.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout_ms, m.session_timeout_ms,
                            stored.protocol_type, ((stored.protocol_name or "", m.subscription),),
                            assignment=m.assignment,
                            heartbeat_deadline_ms=now_ms + m.session_timeout_ms)
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.subscribed_topics = group.compute_subscribed_topics()
        return group


def check_member(group: Group | None, generation_id: int, member_id: str,
                 group_instance_id: str | None) -> ErrorCode:
    """The checks SyncGroup, Heartbeat and a member's OffsetCommit share, in Kafka's order."""
    if group is None:
        return ErrorCode.unknown_member_id
    if group.is_(GroupState.DEAD):
        return ErrorCode.coordinator_not_available
    if group.is_static_member_fenced(group_instance_id, member_id):
        return ErrorCode.fenced_instance_id
    if member_id not in group.members:
        return ErrorCode.unknown_member_id
    if generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    return ErrorCode.none


def consumer_subscription_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a consumer's ``ConsumerProtocolSubscription`` (every version starts
    with them: int16 version, int32 count, then int16-length strings); None if unreadable.
    Read by hand rather than with kio so that a hostile count cannot make it reserve memory.
    """
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        position = 6
        topics = []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, position)
            position += 2
            if length < 0 or position + length > len(metadata):
                return None
            topics.append(metadata[position:position + length].decode())
            position += length
    except (struct.error, UnicodeDecodeError):
        return None
    return frozenset(topics)


def members_with_protocol(members: Iterable[Member],
                          protocol_name: str) -> tuple[JoinedMember, ...]:
    return tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(protocol_name))
                 for m in members)
