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

The membership is kept in memory: a member that finds its group gone after a coordinator
moves (UNKNOWN_MEMBER_ID) joins again with epoch 0, without losing anything, because what a
share group must not lose — which records were delivered and acknowledged — is the share
partitions' state, kept durably in ``__share_group_state`` by the share coordinator. Sans-I/O,
not thread-safe, like the rest of the package.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.consumer_records import Partitions
from odradek.coordinator.group.heartbeats import GroupError, HeartbeatResult
from odradek.coordinator.group.state import GroupState
from odradek.metadata.model import TopicMetadata

log = logging.getLogger(__name__)

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


@dataclass(eq=False, slots=True)
class ShareGroup:
    group_id: str
    state_timestamp_ms: int = 0
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target: Partitions = field(default_factory=dict)  # the same for every member
    subscribed_topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    session_deadlines_ms: dict[str, int] = field(default_factory=dict)
    metadata_version: int = -1
    removed: bool = False

    protocol_type = SHARE_PROTOCOL_TYPE

    @property
    def state(self) -> GroupState:
        if self.removed:
            return GroupState.DEAD
        return GroupState.STABLE if self.members else GroupState.EMPTY

    def is_(self, state: GroupState) -> bool:
        return self.state is state


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
    def __init__(self, config: Callable[[str], Any], clock: Callable[[], int],
                 topics: Callable[[], Mapping[str, TopicMetadata]],
                 is_coordinator_for: Callable[[str], bool],
                 other_group_exists: Callable[[str], bool]) -> None:
        """``is_coordinator_for`` says whether a group id's partition of
        ``__consumer_offsets`` is led here; ``other_group_exists`` whether a classic or
        consumer group already has the id (group ids are one namespace)."""
        self._config = config
        self._clock = clock
        self._topics = topics
        self._is_coordinator_for = is_coordinator_for
        self._other_group_exists = other_group_exists
        self.groups: dict[str, ShareGroup] = {}
        self.metadata_version = 0
        # Called with (group id, member id) when a member leaves or is fenced: its records
        # are released at once rather than when their locks end.
        self.on_member_removed: Callable[[str, str], None] = lambda group_id, member_id: None

    def on_topics_changed(self) -> None:
        self.metadata_version += 1

    def heartbeat_interval_ms(self) -> int:
        return self._config("group.share.heartbeat.interval.ms")

    def session_timeout_ms(self) -> int:
        return self._config("group.share.session.timeout.ms")

    # -- ShareGroupHeartbeat ---------------------------------------------------------------

    def heartbeat(self, request: ShareHeartbeatRequest) -> HeartbeatResult:
        try:
            self._validate(request)
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(request)
            return self._heartbeat(request)
        except GroupError as e:
            return HeartbeatResult(e.error, str(e))

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
        if self._other_group_exists(group_id):
            raise GroupError(ErrorCode.group_id_not_found,
                                  f"Group {group_id} is not a share group.")
        if not create:
            # Kept in memory only: after a restart or a move of the coordinator the member
            # must join again (GROUP_ID_NOT_FOUND would be fatal to it).
            raise GroupError(ErrorCode.unknown_member_id,
                                  f"Group {group_id} has no members here.")
        group = self.groups[group_id] = ShareGroup(group_id, self._clock())
        return group

    def _heartbeat(self, request: ShareHeartbeatRequest) -> HeartbeatResult:
        now_ms = self._clock()
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._group(request.group_id, create=joining)
        member = group.members.get(request.member_id)
        if member is None:
            if not joining:
                raise GroupError(ErrorCode.unknown_member_id,
                                      f"Member {request.member_id} is not a member of group "
                                      f"{group.group_id}.")
            max_size = self._config("group.share.max.size")
            if len(group.members) >= max_size:
                raise GroupError(ErrorCode.group_max_size_reached,
                                      f"The share group has reached its maximum capacity of "
                                      f"{max_size} members.")
            log.info("group %s: member %s joins the share group", group.group_id,
                     request.member_id)
            member = ShareGroupMember(request.member_id)
        elif request.member_epoch not in (member.member_epoch, member.previous_member_epoch,
                                          JOIN_GROUP_MEMBER_EPOCH):
            raise GroupError(ErrorCode.fenced_member_epoch,
                                  f"The share group member has epoch {request.member_epoch}, "
                                  f"not {member.member_epoch}. The member must rejoin.")
        updated = dataclasses.replace(
            member, rack_id=request.rack_id or member.rack_id, client_id=request.client_id,
            client_host=request.client_host,
            subscribed_topic_names=(member.subscribed_topic_names
                                    if request.subscribed_topic_names is None
                                    else tuple(request.subscribed_topic_names)))
        changed = (request.member_id not in group.members
                   or set(updated.subscribed_topic_names) != set(member.subscribed_topic_names))
        if not group.members:
            group.state_timestamp_ms = now_ms
        group.members[request.member_id] = updated
        self._maybe_bump_epoch(group, changed)
        # Nothing to revoke in a share group: the member takes its target at once.
        previous_assignment = member.assigned
        target = self._member_target(group, updated)
        if updated.member_epoch != group.assignment_epoch or updated.assigned != target:
            updated = dataclasses.replace(
                updated, member_epoch=group.assignment_epoch,
                previous_member_epoch=updated.member_epoch, assigned=target)
            group.members[request.member_id] = updated
        group.session_deadlines_ms[request.member_id] = now_ms + self.session_timeout_ms()
        return HeartbeatResult(
            ErrorCode.none, member_id=updated.member_id, member_epoch=updated.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(),
            assignment=(updated.assigned if joining or updated.assigned != previous_assignment
                        or request.subscribed_topic_names is not None else None))

    def _member_target(self, group: ShareGroup, member: ShareGroupMember) -> Partitions:
        """Kafka's ``SimpleAssignor``: every partition of every subscribed topic."""
        return {topic_id: frozenset(range(count))
                for name, (topic_id, count) in group.subscribed_topics.items()
                if name in member.subscribed_topic_names and count > 0}

    def _maybe_bump_epoch(self, group: ShareGroup, changed: bool) -> None:
        if changed or group.metadata_version != self.metadata_version:
            group.metadata_version = self.metadata_version
            topics = self._topics()
            names = {n for m in group.members.values() for n in m.subscribed_topic_names}
            subscribed = {n: (topics[n].topic_id, len(topics[n].partitions))
                          for n in sorted(names) if n in topics}
            if subscribed != group.subscribed_topics:
                group.subscribed_topics = subscribed
                changed = True
        if changed:
            group.group_epoch += 1
            group.assignment_epoch = group.group_epoch
            log.info("group %s: share group epoch %d", group.group_id, group.group_epoch)

    def _leave(self, request: ShareHeartbeatRequest) -> HeartbeatResult:
        group = self._group(request.group_id, create=False)
        if request.member_id not in group.members:
            raise GroupError(ErrorCode.unknown_member_id,
                                  f"Member {request.member_id} is not a member of group "
                                  f"{group.group_id}.")
        log.info("group %s: member %s left the share group", group.group_id, request.member_id)
        self._remove(group, request.member_id)
        return HeartbeatResult(ErrorCode.none, member_id=request.member_id,
                                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH)

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        group.session_deadlines_ms.pop(member_id, None)
        if not group.members:
            group.state_timestamp_ms = self._clock()
        self._maybe_bump_epoch(group, True)
        self.on_member_removed(group.group_id, member_id)

    # -- timers and ownership --------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        for group in list(self.groups.values()):
            for member_id, deadline in list(group.session_deadlines_ms.items()):
                if now_ms >= deadline and member_id in group.members:
                    log.info("group %s: share member %s fenced: its session timed out",
                             group.group_id, member_id)
                    self._remove(group, member_id)

    def forget(self, belongs: Callable[[str], bool]) -> None:
        """The groups for which ``belongs`` is true are coordinated elsewhere now."""
        for group_id in [g for g in self.groups if belongs(g)]:
            group = self.groups.pop(group_id)
            group.removed = True

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups and DeleteShareGroupOffsets: only an empty group."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        group.removed = True
        del self.groups[group_id]
        return ErrorCode.none
