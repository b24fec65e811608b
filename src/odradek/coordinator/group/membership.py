"""``GroupMembership``: the classic group protocol — JoinGroup, SyncGroup, Heartbeat,
LeaveGroup — and the rebalances it drives, for the groups coordinated here (the membership
half of Kafka's classic ``GroupCoordinator``; requests reach it through
:class:`~odradek.coordinator.group.coordinator.GroupCoordinator`, which has checked that).

A rebalance, from a Stable group of three to its next generation::

    member joins (or leaves, or its session expires)  -> PreparingRebalance
    the others learn it from their next Heartbeat (REBALANCE_IN_PROGRESS) and rejoin;
    their JoinGroup responses wait until every member has rejoined or the rebalance
    timeout ends (the members that did not rejoin are removed)
    all joined: generation + 1, a protocol chosen by vote  -> CompletingRebalance
    every JoinGroup is answered; the leader's carries each member's metadata
    the leader's SyncGroup brings the assignment; written to __consumer_offsets,
    then handed to every member waiting in SyncGroup      -> Stable

A request that must wait (JoinGroup during a rebalance, a follower's SyncGroup) passes a
callback that is called exactly once, now or later. Writes to ``__consumer_offsets``
complete through callbacks too, at once or once the in-sync replicas have them; the group
may have moved on meanwhile, so each such callback first checks that it has not. Sans-I/O:
the time comes from ``clock``, the randomness of member ids from ``new_uuid``, the storage
from the :class:`GroupMetadataManager`. Not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.group import (
    Group,
    JoinGroupResult,
    JoinRequest,
    Member,
    Protocols,
    SyncCallback,
    SyncGroupResult,
    check_member,
    members_with_protocol,
)
from odradek.coordinator.group.metadata_manager import GroupMetadataManager
from odradek.coordinator.group.state import GroupEvent, GroupState, can_rebalance
from odradek.coordinator.group.timers import GroupTimers

log = logging.getLogger(__name__)

UNKNOWN_MEMBER_ID = ""
# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: see _add_member_and_rebalance.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

_S = GroupState


class GroupMembership:
    def __init__(self, manager: GroupMetadataManager, config: Callable[[str], Any],
                 clock: Callable[[], int], new_uuid: Callable[[], str]) -> None:
        self.manager = manager
        self._config = config
        self._clock = clock
        self._new_uuid = new_uuid
        self.timers = GroupTimers(self, config)

    # -- JoinGroup -------------------------------------------------------------------------

    def join_group(self, group_id: str, join: JoinRequest) -> None:
        member_id = join.member_id
        if not (self._config("group.min.session.timeout.ms") <= join.session_timeout_ms
                <= self._config("group.max.session.timeout.ms")):
            join.respond(JoinGroupResult(ErrorCode.invalid_session_timeout, member_id))
            return
        now_ms = self._clock()
        group = self.manager.groups.get(group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                join.respond(JoinGroupResult(ErrorCode.unknown_member_id, member_id))
                return
            group = self.manager.groups[group_id] = Group(group_id, _S.EMPTY, now_ms)
        if not self._accepts_joining_member(group, member_id):
            if member_id in group.members:
                self._remove_member_and_update_group(group, group.members[member_id], now_ms)
            join.respond(JoinGroupResult(ErrorCode.group_max_size_reached, UNKNOWN_MEMBER_ID))
            return
        if member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(group, join, now_ms)
        else:
            self._join_current_member(group, join, now_ms)
        self.timers.maybe_complete_join(group, now_ms)

    def _accepts_joining_member(self, group: Group, member_id: str) -> bool:
        max_size = self._config("group.max.size")
        member = group.members.get(member_id)
        if group.state in (_S.EMPTY, _S.DEAD):
            return True
        if group.is_(_S.PREPARING_REBALANCE):
            awaiting = sum(1 for m in group.members.values() if m.awaiting_join)
            return (member is not None and member.awaiting_join is not None) or awaiting < max_size
        return member is not None or len(group.members) < max_size

    def _join_new_member(self, group: Group, join: JoinRequest, now_ms: int) -> None:
        if group.is_(_S.DEAD):
            join.respond(JoinGroupResult(ErrorCode.coordinator_not_available, join.member_id))
            return
        if not group.supports_protocols(join.protocol_type, [n for n, _ in join.protocols]):
            join.respond(JoinGroupResult(ErrorCode.inconsistent_group_protocol, join.member_id))
            return
        new_member_id = f"{join.group_instance_id or join.client_id}-{self._new_uuid()}"
        if join.group_instance_id is not None:
            old_member_id = group.static_members.get(join.group_instance_id)
            if old_member_id is None:
                self._add_member_and_rebalance(group, join, new_member_id, now_ms)
            else:
                self._replace_static_member(group, join, old_member_id, new_member_id, now_ms)
        elif join.require_known_member_id:
            # KIP-394: the id is handed out first, so that a client whose JoinGroup timed out
            # rejoins as itself instead of leaving a defunct member behind.
            group.pending_members[new_member_id] = now_ms + join.session_timeout_ms
            join.respond(JoinGroupResult(ErrorCode.member_id_required, new_member_id))
        else:
            self._add_member_and_rebalance(group, join, new_member_id, now_ms)

    def _join_current_member(self, group: Group, join: JoinRequest, now_ms: int) -> None:
        member_id = join.member_id
        if group.is_(_S.DEAD):
            join.respond(JoinGroupResult(ErrorCode.coordinator_not_available, member_id))
        elif not group.supports_protocols(join.protocol_type, [n for n, _ in join.protocols]):
            join.respond(JoinGroupResult(ErrorCode.inconsistent_group_protocol, member_id))
        elif member_id in group.pending_members and join.group_instance_id is None:
            self._add_member_and_rebalance(group, join, member_id, now_ms)  # KIP-394's 2nd join
        elif group.is_static_member_fenced(join.group_instance_id, member_id):
            join.respond(JoinGroupResult(ErrorCode.fenced_instance_id, member_id))
        elif member_id not in group.members or (
                join.group_instance_id is not None
                and join.group_instance_id not in group.static_members):
            join.respond(JoinGroupResult(ErrorCode.unknown_member_id, member_id))
        elif group.is_(_S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, group.members[member_id], join, now_ms)
        elif group.is_(_S.COMPLETING_REBALANCE):
            member = group.members[member_id]
            if member.matches(join.protocols):
                # The member lost the JoinGroup response: the current generation again.
                join.respond(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, join, now_ms)
        elif group.is_(_S.STABLE):
            member = group.members[member_id]
            if group.leader_id == member_id or not member.matches(join.protocols):
                # A leader's JoinGroup is how it asks for a rebalance (new topics matching
                # its subscription, more partitions): it always gets one.
                self._update_member_and_rebalance(group, member, join, now_ms)
            else:
                join.respond(self._join_result(group, member, with_members=False))
        else:  # Empty: its members are gone; the member resets and joins as new
            join.respond(JoinGroupResult(ErrorCode.unknown_member_id, member_id))

    def _add_member_and_rebalance(self, group: Group, join: JoinRequest, member_id: str,
                                  now_ms: int) -> None:
        # A new member cannot heartbeat until it has joined, and a client that gave up on a
        # long rebalance leaves a defunct member: new members expire after this instead.
        member = Member(member_id, join.group_instance_id, join.client_id, join.client_host,
                        join.rebalance_timeout_ms, join.session_timeout_ms, join.protocol_type,
                        join.protocols, is_new=True,
                        heartbeat_deadline_ms=now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS)
        if group.is_(_S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, join.respond)
        self._maybe_prepare_rebalance(group, now_ms)

    def _update_member_and_rebalance(self, group: Group, member: Member, join: JoinRequest,
                                     now_ms: int) -> None:
        member.update(join)
        self._maybe_prepare_rebalance(group, now_ms)

    def _replace_static_member(self, group: Group, join: JoinRequest, old_member_id: str,
                               new_member_id: str, now_ms: int) -> None:
        """KIP-345: a static member back with its instance id takes its old place; in a
        Stable group whose protocol stays the same, without a rebalance (KIP-814 for v9)."""
        old_leader_id = group.leader_id
        member = group.replace_static_member(join.group_instance_id, old_member_id,
                                             new_member_id)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        previous = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        member.update(join)
        if group.is_(_S.STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group, now_ms)
                return
            generation_id = group.generation_id

            def stored(error: ErrorCode) -> None:
                # The group may have moved on while the write was pending (a rebalance, the
                # member replaced again or gone): what moved it answered this JoinGroup.
                if (group.is_(_S.STABLE) and group.generation_id == generation_id
                        and group.members.get(new_member_id) is member):
                    self._static_member_stored(group, join, member, old_member_id,
                                               old_leader_id, previous, error)

            self.manager.store_group(
                group, {m.member_id: m.assignment for m in group.members.values()}, stored)
        elif group.is_(_S.COMPLETING_REBALANCE):
            # The leader may be assigning to the old member id: rebalance for the new one.
            self._prepare_rebalance(group, now_ms)
        # PreparingRebalance: the member waits for the join phase like everyone else.

    def _static_member_stored(self, group: Group, join: JoinRequest, member: Member,
                              old_member_id: str, old_leader_id: str | None,
                              previous: tuple[Protocols, int, int], error: ErrorCode) -> None:
        new_member_id = member.member_id
        if error is not ErrorCode.none:
            # Kafka reverts the replacement: the old member id is the one in the log.
            member.awaiting_join = None
            member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = previous
            group.replace_static_member(join.group_instance_id, new_member_id, old_member_id)
            member.heartbeat_deadline_ms = self._clock() + member.session_timeout_ms
            join.respond(JoinGroupResult(error, UNKNOWN_MEMBER_ID, group.generation_id,
                                         group.protocol_type, group.protocol_name,
                                         old_leader_id or ""))
        elif join.supports_skip_assignment:
            # The leader learns it leads (to watch metadata) but must not reassign: a Stable
            # group would not hand a new assignment out.
            is_leader = group.leader_id == new_member_id
            member.respond_join(self._join_result(group, member, with_members=is_leader,
                                                  skip_assignment=is_leader))
        else:
            # Before v9 the old leader id is returned, so no member believes it must assign
            # again.
            result = self._join_result(group, member, with_members=False)
            member.respond_join(JoinGroupResult(
                result.error, result.member_id, result.generation_id, result.protocol_type,
                result.protocol_name, old_leader_id or ""))

    def _join_result(self, group: Group, member: Member, *, with_members: bool | None = None,
                     skip_assignment: bool = False) -> JoinGroupResult:
        if with_members is None:
            with_members = group.leader_id == member.member_id
        return JoinGroupResult(
            ErrorCode.none, member.member_id, group.generation_id, group.protocol_type,
            group.protocol_name, group.leader_id or "", skip_assignment,
            members_with_protocol(group.members.values(), group.protocol_name)
            if with_members else ())

    # -- rebalances ------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, now_ms: int) -> None:
        if can_rebalance(group.state):
            self._prepare_rebalance(group, now_ms)

    def _prepare_rebalance(self, group: Group, now_ms: int) -> None:
        if group.is_(_S.COMPLETING_REBALANCE):
            self._propagate_assignment_error(group, ErrorCode.rebalance_in_progress, now_ms)
        group.sync_deadline_ms = None
        self.timers.start_join_phase(group, now_ms)
        group.transition(GroupEvent.REBALANCE_TRIGGERED, now_ms)
        self.timers.maybe_complete_join(group, now_ms)

    def complete_join(self, group: Group, now_ms: int) -> None:
        """The join phase is over (Kafka's ``onCompleteJoin``)."""
        group.rebalance = None
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:  # static members wait for their session
                group.remove(member.member_id)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout, while sessions expire.
            self.timers.start_join_phase(group, now_ms, initial=False)
            return
        group.generation_id += 1
        group.pending_sync_members.clear()
        if not group.members:
            group.protocol_name = None
            group.subscribed_topics = group.compute_subscribed_topics()
            group.transition(GroupEvent.ALL_MEMBERS_LEFT, now_ms)
            # Nobody waits for this write: a failure is logged, and the next one retries.
            self.manager.store_group(group, {}, lambda _: None)
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        group.transition(GroupEvent.MEMBERS_JOINED, now_ms)
        log.info("group %s: generation %d with %d members, protocol %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name)
        for member in group.members.values():
            member.respond_join(self._join_result(group, member))
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.sync_deadline_ms = now_ms + group.rebalance_timeout_ms()

    def _propagate_assignment_error(self, group: Group, error: ErrorCode, now_ms: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync is not None:
                member.respond_sync(SyncGroupResult(error))
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms

    def _remove_member_and_update_group(self, group: Group, member: Member, now_ms: int) -> None:
        # A new member may be waiting in JoinGroup: UNKNOWN_MEMBER_ID makes it join again.
        member.respond_join(JoinGroupResult(ErrorCode.unknown_member_id, member.member_id))
        member.respond_sync(SyncGroupResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms)
        else:
            self.timers.maybe_complete_join(group, now_ms)

    def expire_member(self, group: Group, member: Member, now_ms: int) -> None:
        log.info("group %s: member %s expired (session timeout %d ms)", group.group_id,
                 member.member_id, member.session_timeout_ms)
        self._remove_member_and_update_group(group, member, now_ms)

    def expire_pending_sync(self, group: Group, now_ms: int) -> None:
        """Members that joined but sent no SyncGroup within the rebalance timeout leave."""
        group.sync_deadline_ms = None
        if (group.state not in (_S.COMPLETING_REBALANCE, _S.STABLE)
                or not group.pending_sync_members):
            return
        for member_id in list(group.pending_sync_members):
            group.remove(member_id)
        self._prepare_rebalance(group, now_ms)

    # -- SyncGroup -------------------------------------------------------------------------

    def sync_group(self, group_id: str, generation_id: int, member_id: str,
                   group_instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes],
                   respond: SyncCallback) -> None:
        group = self.manager.groups.get(group_id)
        error = check_member(group, generation_id, member_id, group_instance_id)
        if error is ErrorCode.none and (
                (protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)):
            error = ErrorCode.inconsistent_group_protocol  # SyncGroup v5
        if error is ErrorCode.none and group.is_(_S.EMPTY):
            error = ErrorCode.unknown_member_id
        if error is ErrorCode.none and group.is_(_S.PREPARING_REBALANCE):
            error = ErrorCode.rebalance_in_progress
        if error is not ErrorCode.none:
            respond(SyncGroupResult(error))
            return
        now_ms = self._clock()
        member = group.members[member_id]
        self._synced(group, member_id)
        if group.is_(_S.STABLE):
            respond(SyncGroupResult(ErrorCode.none, group.protocol_type, group.protocol_name,
                                    member.assignment))
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            return
        member.awaiting_sync = respond  # CompletingRebalance: the leader's assignment decides
        if group.leader_id != member_id:
            return
        assignment = {m: assignments.get(m, b"") for m in group.members}
        generation_id = group.generation_id

        def stored(error: ErrorCode) -> None:
            # Kafka's check in doSyncGroup's callback: while the write was pending a member
            # may have joined or left, and the rebalance that followed answered the waiting
            # members; the write then changes nothing.
            if group.is_(_S.COMPLETING_REBALANCE) and group.generation_id == generation_id:
                self._assignment_stored(group, assignment, error)

        self.manager.store_group(group, assignment, stored)

    def _assignment_stored(self, group: Group, assignment: dict[str, bytes],
                           error: ErrorCode) -> None:
        now_ms = self._clock()
        if error is not ErrorCode.none:
            self._propagate_assignment_error(group, error, now_ms)
            self._maybe_prepare_rebalance(group, now_ms)
            return
        for other in group.members.values():
            other.assignment = assignment[other.member_id]
            if other.awaiting_sync is not None:
                other.respond_sync(SyncGroupResult(ErrorCode.none, group.protocol_type,
                                                   group.protocol_name, other.assignment))
                other.heartbeat_deadline_ms = now_ms + other.session_timeout_ms
        group.transition(GroupEvent.ASSIGNMENT_STORED, now_ms)

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            group.sync_deadline_ms = None

    # -- Heartbeat and LeaveGroup ----------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None) -> ErrorCode:
        group = self.manager.groups.get(group_id)
        error = check_member(group, generation_id, member_id, group_instance_id)
        if error is not ErrorCode.none:
            return error
        if group.is_(_S.EMPTY):
            return ErrorCode.unknown_member_id
        member = group.members[member_id]
        member.heartbeat_deadline_ms = self._clock() + member.session_timeout_ms
        if group.is_(_S.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress  # how members learn they must rejoin
        return ErrorCode.none

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """``leaving``: (member id, group instance id) pairs; a static member may be removed
        by instance id alone (member id "", KIP-345's admin removal)."""
        group = self.manager.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id] * len(leaving)
        if group.is_(_S.DEAD):
            return ErrorCode.coordinator_not_available, []
        now_ms = self._clock()
        return ErrorCode.none, [self._leave(group, member_id, instance_id, now_ms)
                                for member_id, instance_id in leaving]

    def _leave(self, group: Group, member_id: str, instance_id: str | None,
               now_ms: int) -> ErrorCode:
        if member_id == UNKNOWN_MEMBER_ID:
            member_id = group.static_members.get(instance_id) if instance_id else None
            if member_id is None:
                return ErrorCode.unknown_member_id
        elif member_id in group.pending_members:
            group.remove(member_id)
            self.timers.maybe_complete_join(group, now_ms)
            return ErrorCode.none
        elif group.is_static_member_fenced(instance_id, member_id):
            return ErrorCode.fenced_instance_id
        elif member_id not in group.members:
            return ErrorCode.unknown_member_id
        log.info("group %s: member %s left", group.group_id, member_id)
        self._remove_member_and_update_group(group, group.members[member_id], now_ms)
        return ErrorCode.none
