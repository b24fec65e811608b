"""Share groups (KIP-932): the membership half — ShareGroupHeartbeat and its session timer —
for the share groups coordinated here (Kafka's ``shareGroupHeartbeat`` in
``GroupMetadataManager``).

A share group's members do not own partitions: every member is assigned every partition of
the topics it subscribes to (Kafka's ``SimpleAssignor``), and the records of a partition
are shared out record by record by its leader, which hands each record to one member at a
time (``coordinator.share``). So there is nothing to revoke and nothing to wait for: a
member's epoch moves to the group epoch at once, and a member joining or leaving only
changes who fetches. The group epoch is bumped when a member joins, leaves or changes its
subscription, and when a subscribed topic changes.

The membership is kept in ``__consumer_offsets``, with Kafka's records (``share_records``), as
a consumer group's is: the group changes only through :meth:`ShareGroup.replay`, so a
heartbeat and the loading of a partition apply the same records the same way. A heartbeat,
a leave, a session's end or a deletion makes records, applies them at once and appends them
to the group's partition; the heartbeat is answered once they are written, and a failed
append reloads the partition from the log. A coordinator that loads the partition (the
broker restarted, or the coordinator moved here) has every member, with its id and epoch,
and gives each a full session to heartbeat again: one that is gone is fenced when it ends.
What a share group must not lose — which records were delivered and acknowledged — is the
share partitions' state, kept in ``__share_group_state`` by the share coordinator.

Sans-I/O, not thread-safe, like the rest of the package.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.consumer_group import (
    MemberState,
    ModernGroup,
    target_assignment_epoch_value,
    target_member_value,
)
from odradek.coordinator.group.consumer_records import (
    MemberAssignmentValue,
    Partitions,
    partitions_of,
    topic_partitions,
)
from odradek.coordinator.group.heartbeats import GroupError, HeartbeatCallback, HeartbeatResult
from odradek.coordinator.group.share_records import (
    GROUP_KEYS,
    ShareGroupEpochValue,
    ShareGroupKey,
    ShareMemberSubscriptionValue,
    ShareRecordType,
    metadata_hash,
)
from odradek.coordinator.group.state import GroupState
from odradek.metadata.model import TopicMetadata
from odradek.server.config_defs import GroupConfigLookup, broker_group_config

if TYPE_CHECKING:
    from odradek.coordinator.group.metadata_manager import GroupMetadataManager

log = logging.getLogger(__name__)

R = ShareRecordType
# A record of a share group: its key and its value, None for a tombstone.
Change = tuple[ShareGroupKey, object | None]

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
SHARE_PROTOCOL_TYPE = "share"


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Partitions = field(default_factory=dict)

    def subscription_value(self) -> ShareMemberSubscriptionValue:
        return ShareMemberSubscriptionValue(
            rack_id=self.rack_id, client_id=self.client_id, client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names)

    def assignment_value(self) -> MemberAssignmentValue:
        return MemberAssignmentValue(
            member_epoch=self.member_epoch, previous_member_epoch=self.previous_member_epoch,
            state=int(MemberState.STABLE), assigned_partitions=topic_partitions(self.assigned))

    def with_subscription(self, value: ShareMemberSubscriptionValue) -> ShareGroupMember:
        return dataclasses.replace(
            self, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=tuple(value.subscribed_topic_names))

    def with_assignment(self, value: MemberAssignmentValue | None) -> ShareGroupMember:
        if value is None:
            return dataclasses.replace(self, member_epoch=0, previous_member_epoch=0,
                                       assigned={})
        return dataclasses.replace(
            self, member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            assigned=partitions_of(value.assigned_partitions))


@dataclass(eq=False, slots=True)
class ShareGroup(ModernGroup):
    group_id: str
    state_timestamp_ms: int = 0
    group_epoch: int = 0
    assignment_epoch: int = 0
    # The hash of the subscribed topics the group epoch was last bumped for.
    metadata_hash: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)  # member id -> partitions
    removed: bool = False
    # Not persisted: the subscribed topics (name -> id, partition count) are computed again
    # at the first heartbeat after a load, and every member's session starts afresh.
    subscribed_topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    session_deadlines_ms: dict[str, int] = field(default_factory=dict)
    metadata_version: int = -1

    protocol_type = SHARE_PROTOCOL_TYPE
    member_class = ShareGroupMember

    @property
    def state(self) -> GroupState:
        if self.removed:
            return GroupState.DEAD
        return GroupState.STABLE if self.members else GroupState.EMPTY

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def replay(self, key: ShareGroupKey, value: object | None, now_ms: int) -> None:
        """Applies one record (Kafka's ``GroupMetadataManager.replay`` for the share group
        types). Of ShareGroupStatePartitionMetadata nothing is kept (see ``share_records``)."""
        if self._replay_member_records(key, value, now_ms):
            return
        if key.type is R.GROUP_EPOCH:
            if value is None:
                self.removed = True
            else:
                self.group_epoch, self.metadata_hash = value.epoch, value.metadata_hash

    def _put_member(self, member: ShareGroupMember, now_ms: int) -> None:
        if not self.members:
            self.state_timestamp_ms = now_ms
        self.members[member.member_id] = member

    def _remove_member(self, member_id: str, now_ms: int) -> None:
        if self.members.pop(member_id, None) is None:
            return
        self.session_deadlines_ms.pop(member_id, None)
        if not self.members:
            self.state_timestamp_ms = now_ms


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None
    client_id: str
    client_host: str


class ShareGroupProtocol:
    def __init__(self, manager: GroupMetadataManager, config: Callable[[str], Any],
                 clock: Callable[[], int],
                 topics: Callable[[], Mapping[str, TopicMetadata]],
                 group_config: GroupConfigLookup | None = None) -> None:
        """``manager`` writes the records, and holds the classic and consumer groups (group
        ids are one namespace); the share groups are in ``groups``. ``config`` reads a broker
        config, ``group_config`` a group's own config (its session timeout and heartbeat
        interval), falling back to the broker's."""
        self.manager = manager
        self._config = config
        self._group_config = group_config or broker_group_config(config)
        self._clock = clock
        self._topics = topics
        self.groups: dict[str, ShareGroup] = {}
        self.metadata_version = 0
        # Called with (group id, member id) when a member leaves or is fenced: its records
        # are released at once rather than when their locks end.
        self.on_member_removed: Callable[[str, str], None] = lambda group_id, member_id: None

    def on_topics_changed(self) -> None:
        self.metadata_version += 1

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_config(group_id, "share.heartbeat.interval.ms")

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_config(group_id, "share.session.timeout.ms")

    # -- ShareGroupHeartbeat ---------------------------------------------------------------

    def heartbeat(self, request: ShareHeartbeatRequest, respond: HeartbeatCallback) -> None:
        """Answers through ``respond`` once the heartbeat's records are written."""
        changes: list[Change] = []
        try:
            self._validate(request)
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                result = self._leave(request, changes)
            else:
                result = self._heartbeat(request, changes)
        except GroupError as e:
            result = HeartbeatResult(e.error, str(e))
        group = self.groups.get(request.group_id)
        if group is None:
            respond(result)
            return
        self.manager.append_consumer_group_records(
            group, changes,
            lambda error: respond(result if error is ErrorCode.none else HeartbeatResult(error)))

    def _validate(self, request: ShareHeartbeatRequest) -> None:
        """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid``."""
        def invalid(message: str) -> GroupError:
            return GroupError(ErrorCode.invalid_request, message)

        if not request.group_id:
            raise invalid("GroupId can't be empty.")
        if request.rack_id == "":
            raise invalid("RackId can't be empty.")
        if not request.member_id:
            raise invalid("MemberId can't be empty.")
        if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if not request.subscribed_topic_names:
                raise invalid("SubscribedTopicNames must be set in first request.")
        elif request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")

    def _group(self, group_id: str, *, create: bool) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.manager.groups:
            raise GroupError(ErrorCode.group_id_not_found,
                                  f"Group {group_id} is not a share group.")
        if not create:
            # The group was deleted, or its first join never written: the member must join
            # again (GROUP_ID_NOT_FOUND would be fatal to it).
            raise GroupError(ErrorCode.unknown_member_id,
                                  f"Group {group_id} has no members here.")
        group = self.groups[group_id] = ShareGroup(group_id, self._clock())
        return group

    def _heartbeat(self, request: ShareHeartbeatRequest, changes: list[Change]
                   ) -> HeartbeatResult:
        """The steps of the consumer protocol's heartbeat, with nothing to revoke; every
        record is applied as it is made and added to ``changes``."""
        now_ms = self._clock()
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._group(request.group_id, create=joining)
        member_id = request.member_id
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise GroupError(ErrorCode.unknown_member_id,
                                      f"Member {member_id} is not a member of group "
                                      f"{group.group_id}.")
            max_size = self._config("group.share.max.size")
            if len(group.members) >= max_size:
                raise GroupError(ErrorCode.group_max_size_reached,
                                      f"The share group has reached its maximum capacity of "
                                      f"{max_size} members.")
            log.info("group %s: member %s joins the share group", group.group_id, member_id)
            member = ShareGroupMember(member_id)
        elif request.member_epoch not in (member.member_epoch, member.previous_member_epoch,
                                          JOIN_GROUP_MEMBER_EPOCH):
            raise GroupError(ErrorCode.fenced_member_epoch,
                                  f"The share group member has epoch {request.member_epoch}, "
                                  f"not {member.member_epoch}. The member must rejoin.")

        # 1. The member and, if it is new or its topics changed, the group epoch.
        updated = dataclasses.replace(
            member, rack_id=request.rack_id or member.rack_id, client_id=request.client_id,
            client_host=request.client_host,
            subscribed_topic_names=(member.subscribed_topic_names
                                    if request.subscribed_topic_names is None
                                    else tuple(request.subscribed_topic_names)))
        new = member_id not in group.members
        step = [(_member_key(R.MEMBER_SUBSCRIPTION, group, member_id),
                 updated.subscription_value())] \
            if new or updated.subscription_value() != member.subscription_value() else []
        bump = new or set(updated.subscribed_topic_names) != set(member.subscribed_topic_names)
        step += self._maybe_bump_epoch(group, {**group.members, member_id: updated}, bump)
        _apply(group, step, now_ms, changes)

        # 2. A new target assignment if the group epoch moved past it.
        if group.group_epoch > group.assignment_epoch:
            _apply(group, self._new_target(group), now_ms, changes)

        # 3. Nothing to revoke in a share group: the member takes its target at once.
        member = group.members[member_id]
        target = group.target.get(member_id, {})
        if member.member_epoch != group.assignment_epoch or member.assigned != target:
            reconciled = dataclasses.replace(
                member, member_epoch=group.assignment_epoch,
                previous_member_epoch=member.member_epoch, assigned=target)
            _apply(group, [(_member_key(R.CURRENT_ASSIGNMENT, group, member_id),
                            reconciled.assignment_value())], now_ms, changes)
        group.session_deadlines_ms[member_id] = now_ms + self.session_timeout_ms(group.group_id)
        answered = group.members[member_id]
        return HeartbeatResult(
            ErrorCode.none, member_id=member_id, member_epoch=answered.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=(answered.assigned if joining or answered.assigned != member.assigned
                        or request.subscribed_topic_names is not None else None))

    def _member_target(self, group: ShareGroup, member: ShareGroupMember) -> Partitions:
        """Kafka's ``SimpleAssignor``: every partition of every subscribed topic."""
        return {topic_id: frozenset(range(count))
                for name, (topic_id, count) in group.subscribed_topics.items()
                if name in member.subscribed_topic_names and count > 0}

    def _maybe_bump_epoch(self, group: ShareGroup, members: Mapping[str, ShareGroupMember],
                          bump: bool) -> list[Change]:
        """The subscribed topics of ``members`` and, if they or a subscription changed, the
        next group epoch with their hash."""
        if bump or group.metadata_version != self.metadata_version:
            group.metadata_version = self.metadata_version
            topics = self._topics()
            names = {n for m in members.values() for n in m.subscribed_topic_names}
            group.subscribed_topics = {n: (topics[n].topic_id, len(topics[n].partitions))
                                       for n in sorted(names) if n in topics}
            bump = bump or metadata_hash(group.subscribed_topics) != group.metadata_hash
        if not bump:
            return []
        epoch = group.group_epoch + 1
        log.info("group %s: share group epoch %d", group.group_id, epoch)
        return [(ShareGroupKey(R.GROUP_EPOCH, group.group_id),
                 ShareGroupEpochValue(epoch=epoch,
                                      metadata_hash=metadata_hash(group.subscribed_topics)))]

    def _new_target(self, group: ShareGroup) -> list[Change]:
        """The target assignment for the group epoch: a record for each member whose part
        changed, then the new assignment epoch."""
        targets = {member_id: self._member_target(group, member)
                   for member_id, member in sorted(group.members.items())}
        changes: list[Change] = [
            (_member_key(R.TARGET_ASSIGNMENT_MEMBER, group, member_id),
             target_member_value(target))
            for member_id, target in targets.items() if target != group.target.get(member_id, {})]
        changes.append((ShareGroupKey(R.TARGET_ASSIGNMENT_EPOCH, group.group_id),
                        target_assignment_epoch_value(group.group_epoch)))
        return changes

    def _leave(self, request: ShareHeartbeatRequest, changes: list[Change]) -> HeartbeatResult:
        group = self._group(request.group_id, create=False)
        if request.member_id not in group.members:
            raise GroupError(ErrorCode.unknown_member_id,
                                  f"Member {request.member_id} is not a member of group "
                                  f"{group.group_id}.")
        log.info("group %s: member %s left the share group", group.group_id, request.member_id)
        changes += self.fence(group, request.member_id)
        return HeartbeatResult(ErrorCode.none, member_id=request.member_id,
                                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH)

    def fence(self, group: ShareGroup, member_id: str) -> list[Change]:
        """Kafka's ``shareGroupFenceMember``: the member's records are deleted and the group
        epoch bumped for the subscriptions without it; returns the records, applied. The
        records the member holds are released at once rather than when their locks end."""
        members = {m: v for m, v in group.members.items() if m != member_id}
        changes: list[Change] = []
        _apply(group, [(_member_key(t, group, member_id), None)
                       for t in (R.CURRENT_ASSIGNMENT, R.TARGET_ASSIGNMENT_MEMBER,
                                 R.MEMBER_SUBSCRIPTION)]
               + self._maybe_bump_epoch(group, members, True), self._clock(), changes)
        self.on_member_removed(group.group_id, member_id)
        return changes

    # -- timers and ownership --------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Fences the members whose session ended."""
        for group in list(self.groups.values()):
            for member_id, deadline in list(group.session_deadlines_ms.items()):
                if now_ms >= deadline and member_id in group.members and not group.removed:
                    log.info("group %s: share member %s fenced: its session timed out",
                             group.group_id, member_id)
                    self.manager.append_consumer_group_records(
                        group, self.fence(group, member_id), lambda _: None)

    def load(self, partition: int, groups: Iterable[ShareGroup]) -> None:
        """The share groups of a partition of ``__consumer_offsets`` as read from its log:
        they take the place of the partition's groups in memory, and every member gets a
        full session to heartbeat here (Kafka's ``onLoaded``)."""
        self.forget(lambda group_id: self.manager.partition_for(group_id) == partition)
        now_ms = self._clock()
        for group in groups:
            self.groups[group.group_id] = group
            session_timeout_ms = self.session_timeout_ms(group.group_id)
            for member_id in group.members:
                group.session_deadlines_ms[member_id] = now_ms + session_timeout_ms

    def forget(self, belongs: Callable[[str], bool]) -> None:
        """The groups for which ``belongs`` is true are coordinated elsewhere now."""
        for group_id in [g for g in self.groups if belongs(g)]:
            group = self.groups.pop(group_id)
            group.removed = True

    def delete(self, group_id: str, callback: Callable[[ErrorCode], None]) -> None:
        """DeleteGroups: an empty group's records are deleted (its members' went as they
        left), and ``callback`` gets the error to answer once the tombstones are written."""
        group = self.groups.get(group_id)
        if group is None:
            callback(ErrorCode.group_id_not_found)
            return
        if group.members:
            callback(ErrorCode.non_empty_group)
            return
        changes: list[Change] = []
        _apply(group, [(ShareGroupKey(t, group_id), None) for t in GROUP_KEYS], self._clock(),
               changes)
        del self.groups[group_id]
        self.manager.append_consumer_group_records(group, changes, callback)


def _apply(group: ShareGroup, step: list[Change], now_ms: int, changes: list[Change]) -> None:
    """Applies records to the group at once (the next step builds on them) and keeps them
    in ``changes`` to be written."""
    for key, value in step:
        group.replay(key, value, now_ms)
    changes += step


def _member_key(record_type: ShareRecordType, group: ShareGroup, member_id: str
                ) -> ShareGroupKey:
    return ShareGroupKey(record_type, group.group_id, member_id)
