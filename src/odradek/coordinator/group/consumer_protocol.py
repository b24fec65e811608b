"""``ConsumerGroupProtocol``: the consumer group protocol of KIP-848 — ConsumerGroupHeartbeat
and the timers behind it — for the groups coordinated here (Kafka's ``consumerGroupHeartbeat``
and its helpers in ``GroupMetadataManager``).

There is no join phase and no leader: every member heartbeats on its own, and each heartbeat
runs the same three steps (see ``consumer_group.py`` for the epochs)::

    1. update the member (subscription, rack, assignor ...); if what the assignment depends
       on changed — the member is new or gone, its subscription changed, a subscribed topic
       changed — bump the group epoch
    2. if the group epoch is ahead of the target assignment's, compute a new target with the
       group's assignor, and write the members whose target changed
    3. move the member one step towards its target (``reconciliation.reconcile``) and answer
       with its epoch and, when it changed, its assignment

so one member joining only costs the others the partitions they must give up, learnt on their
next heartbeat: nobody stops consuming the partitions it keeps.

Every change is a list of records (``consumer_records``). They are applied to the group at
once with :meth:`ConsumerGroup.replay`, so the next heartbeat builds on them, and appended to
the group's ``__consumer_offsets`` partition; the heartbeat is answered once they are written.
If the append fails, the partition is loaded again from the log, which drops what was not
written, and the member is told to retry (or to find the coordinator).

Timers, advanced by :meth:`ConsumerGroupProtocol.tick`: a member whose heartbeats stop for
``group.consumer.session.timeout.ms`` is fenced (removed, the group epoch bumped); a member
that does not revoke partitions within its rebalance timeout is fenced too. A static member
(``group.instance.id``) that leaves with epoch -2 keeps its place and assignment until its
session ends, and a new incarnation with the same instance id takes it over without a
rebalance.

Sans-I/O like the rest of the package: the time comes from ``clock``, the topics from
``topics`` and ``racks``; not thread-safe, the broker's event loop owns it.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.assignors import ASSIGNORS, MemberSpec, TopicSpec
from odradek.coordinator.group.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    SubscribedTopic,
    subscription_metadata_value,
    target_assignment_epoch_value,
    target_member_value,
)
from odradek.coordinator.group.consumer_records import (
    ConsumerGroupKey,
    GroupEpochValue,
    Partitions,
    RecordType,
)
from odradek.coordinator.group.heartbeats import (
    GroupError,
    HeartbeatCallback,
    HeartbeatResult,
)
from odradek.coordinator.group.reconciliation import FencedMemberEpoch, reconcile
from odradek.coordinator.group.state import GroupState
from odradek.metadata.model import TopicMetadata
from odradek.server.config_defs import GroupConfigLookup, broker_group_config

if TYPE_CHECKING:
    from odradek.coordinator.group.metadata_manager import GroupMetadataManager

log = logging.getLogger(__name__)

# Topics a regular expression never matches (Kafka's internal topics).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

# A record of a consumer group: its key and its value, None for a tombstone. A bytes key is a
# classic group's record, written when a group changes protocol.
Change = tuple[ConsumerGroupKey | bytes, object | None]


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """One ConsumerGroupHeartbeat's fields; None means "unchanged since the last one"."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Partitions | None
    client_id: str
    client_host: str


class ConsumerGroupProtocol:
    def __init__(self, manager: GroupMetadataManager, config: Callable[[str], Any],
                 clock: Callable[[], int],
                 topics: Callable[[], Mapping[str, TopicMetadata]],
                 racks: Callable[[], Mapping[int, str | None]],
                 new_member_id: Callable[[], str] = lambda: str(uuid.uuid4()), *,
                 group_config: GroupConfigLookup | None = None) -> None:
        """``config`` reads a broker config, ``group_config`` a group's own config (its
        value, else its broker synonym's)."""
        self.manager = manager
        self._config = config
        self._group_config = group_config or broker_group_config(config)
        self._clock = clock
        self._topics = topics
        self._racks = racks
        self._new_member_id = new_member_id
        # Bumped when topics are created, deleted or grow: each group's subscription
        # metadata is computed again at its next heartbeat.
        self.metadata_version = 0
        self._regex_cache: dict[str, tuple[int, frozenset[str]]] = {}

    def on_topics_changed(self) -> None:
        self.metadata_version += 1

    # -- configuration -------------------------------------------------------------------

    def assignor_names(self) -> list[str]:
        return assignor_names(self._config("group.consumer.assignors"))

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_config(group_id, "consumer.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_config(group_id, "consumer.heartbeat.interval.ms")

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, respond: HeartbeatCallback) -> None:
        """Answers through ``respond`` once the heartbeat's records are written. A heartbeat
        refused after it changed the group (a static member taken over, then fenced) still
        writes what it changed before it answers the error."""
        changes: list[Change] = []
        try:
            self._validate(request)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH,
                                        LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                result = self._leave(request, changes)
            else:
                result = self._heartbeat(request, changes)
        except GroupError as e:
            result = HeartbeatResult(e.error, str(e))
        group = self.manager.groups.get(request.group_id)
        if not changes or not isinstance(group, ConsumerGroup):
            respond(result)
            return
        self.write(group, changes,
                   lambda error: respond(result if error is ErrorCode.none
                                         else HeartbeatResult(error)))

    def _validate(self, request: HeartbeatRequest) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        def invalid(message: str) -> GroupError:
            return GroupError(ErrorCode.invalid_request, message)

        if not request.group_id:
            raise invalid("GroupId can't be empty.")
        if request.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if request.rack_id == "":
            raise invalid("RackId can't be empty.")
        epoch = request.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
        elif epoch == JOIN_GROUP_MEMBER_EPOCH:
            if request.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.owned is None or any(request.owned.values()):
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if not request.subscribed_topic_names and request.subscribed_topic_regex is None:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in "
                              "first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
            if request.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if request.server_assignor is not None \
                and request.server_assignor not in self.assignor_names():
            raise GroupError(ErrorCode.unsupported_assignor,
                             f"ServerAssignor {request.server_assignor} is not supported. "
                             f"Supported assignors: {', '.join(self.assignor_names())}.")
        if request.subscribed_topic_regex is not None:
            compile_regex(request.subscribed_topic_regex)

    def _heartbeat(self, request: HeartbeatRequest, changes: list[Change]) -> HeartbeatResult:
        """The three steps of the module docstring; every record is applied as it is made
        and added to ``changes``."""
        now_ms = self._clock()
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._group(request.group_id, create=joining, changes=changes)
        member_id = request.member_id or self._new_member_id()
        max_size = self._config("group.consumer.max.size")
        if len(group.members) >= max_size and member_id not in group.members:
            raise GroupError(ErrorCode.group_max_size_reached,
                             f"The consumer group has reached its maximum capacity of "
                             f"{max_size} members.")
        if request.instance_id is None:
            member = self._dynamic_member(group, member_id, request, joining)
        else:
            member = self._static_member(group, member_id, request, joining, changes)

        # 1. The member and, if what the assignment depends on changed, the group epoch.
        updated = dataclasses.replace(
            member,
            instance_id=request.instance_id or member.instance_id,
            rack_id=request.rack_id or member.rack_id,
            rebalance_timeout_ms=(member.rebalance_timeout_ms
                                  if request.rebalance_timeout_ms == -1
                                  else request.rebalance_timeout_ms),
            server_assignor=request.server_assignor or member.server_assignor,
            subscribed_topic_names=(member.subscribed_topic_names
                                    if request.subscribed_topic_names is None
                                    else tuple(request.subscribed_topic_names)),
            subscribed_topic_regex=(member.subscribed_topic_regex
                                    if request.subscribed_topic_regex is None
                                    else request.subscribed_topic_regex or None),
            client_id=request.client_id, client_host=request.client_host)
        # A change is written; only one the assignment depends on bumps the epoch (not a
        # new client host or rebalance timeout).
        new = member_id not in group.members
        bump = new or _assignment_inputs(updated) != _assignment_inputs(member)
        step = [(_member_key(RecordType.MEMBER_SUBSCRIPTION, group, member_id),
                 updated.subscription_value())] \
            if new or not updated.same_subscription(member) else []
        step += self._maybe_bump_epoch(group, {**group.members, member_id: updated}, bump)
        _apply(group, step, now_ms, changes)

        # 2. A new target assignment if the group epoch moved past it.
        if group.group_epoch > group.assignment_epoch:
            _apply(group, self._new_target(group), now_ms, changes)

        # 3. The member one step closer to its target.
        member = group.members[member_id]
        try:
            reconciled = reconcile(member, group.assignment_epoch,
                                   group.target.get(member_id, {}), group.partition_epoch,
                                   request.owned)
        except FencedMemberEpoch as e:
            raise GroupError(ErrorCode.fenced_member_epoch, str(e)) from None
        if reconciled != member:
            _apply(group, [(_member_key(RecordType.CURRENT_ASSIGNMENT, group, member_id),
                            reconciled.assignment_value())], now_ms, changes)
            self._arm_revocation_timer(group, member, reconciled, now_ms)
        group.session_deadlines_ms[member_id] = now_ms + self.session_timeout_ms(group.group_id)

        full_request = joining or (request.rebalance_timeout_ms != -1
                                   and (request.subscribed_topic_names is not None
                                        or request.subscribed_topic_regex is not None)
                                   and request.owned is not None)
        return HeartbeatResult(
            ErrorCode.none, member_id=member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=(reconciled.assigned
                        if full_request or reconciled.assigned != member.assigned else None))

    def _dynamic_member(self, group: ConsumerGroup, member_id: str, request: HeartbeatRequest,
                        joining: bool) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise GroupError(ErrorCode.unknown_member_id,
                                 f"Member {member_id} is not a member of group "
                                 f"{group.group_id}.")
            log.info("group %s: member %s joins with the consumer protocol", group.group_id,
                     member_id)
            return ConsumerGroupMember(member_id)
        _check_epoch(member, request.member_epoch, request.owned)
        return member

    def _static_member(self, group: ConsumerGroup, member_id: str, request: HeartbeatRequest,
                       joining: bool, changes: list[Change]) -> ConsumerGroupMember:
        """Kafka's ``getOrMaybeSubscribeStaticConsumerGroupMember``; a new incarnation of a
        static member that stepped away replaces it at once (the records go to
        ``changes``)."""
        instance_id = request.instance_id
        existing = group.static_member(instance_id)
        if joining:
            if existing is None:
                log.info("group %s: static member %s (instance %s) joins", group.group_id,
                         member_id, instance_id)
                return ConsumerGroupMember(member_id)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(ErrorCode.unreleased_instance_id,
                                 f"Static member {member_id} with instance id {instance_id} "
                                 f"cannot join the group because the instance id is owned by "
                                 f"{existing.member_id} member.")
            log.info("group %s: static member %s takes over instance %s from %s",
                     group.group_id, member_id, instance_id, existing.member_id)
            successor = dataclasses.replace(existing, member_id=member_id, member_epoch=0,
                                            previous_member_epoch=0)
            _apply(group, self._replace_member(group, existing, successor), self._clock(),
                   changes)
            return group.members[member_id]
        if existing is None:
            raise GroupError(ErrorCode.unknown_member_id,
                             f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise GroupError(ErrorCode.fenced_instance_id,
                             f"Static member {member_id} with instance id {instance_id} was "
                             f"fenced by member {existing.member_id}.")
        _check_epoch(existing, request.member_epoch, request.owned)
        return existing

    def _replace_member(self, group: ConsumerGroup, old: ConsumerGroupMember,
                        new: ConsumerGroupMember) -> list[Change]:
        """The new incarnation gets the old one's subscription, target and partitions."""
        target = group.target.get(old.member_id, {})
        changes = _removal(group, old.member_id) + [
            (_member_key(RecordType.MEMBER_SUBSCRIPTION, group, new.member_id),
             new.subscription_value()),
            (_member_key(RecordType.TARGET_ASSIGNMENT_MEMBER, group, new.member_id),
             target_member_value(target)),
            (_member_key(RecordType.CURRENT_ASSIGNMENT, group, new.member_id),
             new.assignment_value()),
        ]
        group.session_deadlines_ms.pop(old.member_id, None)
        group.revocation_deadlines_ms.pop(old.member_id, None)
        return changes

    def _leave(self, request: HeartbeatRequest, changes: list[Change]) -> HeartbeatResult:
        """Kafka's ``consumerGroupLeave``: epoch -1 leaves, -2 (static members) steps away
        keeping the place and the partitions until the session ends."""
        group = self._group(request.group_id, create=False, changes=changes)
        result = HeartbeatResult(ErrorCode.none, member_id=request.member_id,
                                 member_epoch=request.member_epoch)
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise GroupError(ErrorCode.unknown_member_id,
                                 f"Member {request.member_id} is not a member of group "
                                 f"{group.group_id}.")
        else:
            member = group.static_member(request.instance_id)
            if member is None:
                raise GroupError(ErrorCode.unknown_member_id,
                                 f"Instance id {request.instance_id} is unknown.")
            if member.member_id != request.member_id:
                raise GroupError(ErrorCode.fenced_instance_id,
                                 f"Static member {request.member_id} with instance id "
                                 f"{request.instance_id} was fenced by member "
                                 f"{member.member_id}.")
            if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                log.info("group %s: static member %s steps away", group.group_id,
                         member.member_id)
                away = dataclasses.replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                           pending_revocation={})
                _apply(group, [(_member_key(RecordType.CURRENT_ASSIGNMENT, group,
                                            member.member_id), away.assignment_value())],
                       self._clock(), changes)
                return result
        log.info("group %s: member %s left", group.group_id, member.member_id)
        changes += self.fence(group, member.member_id)
        return result

    # -- the group -----------------------------------------------------------------------

    def _group(self, group_id: str, *, create: bool, changes: list[Change]) -> ConsumerGroup:
        """The consumer group, created when a member joins one that does not exist; an empty
        classic group is taken over (Kafka's online upgrade, when the migration policy allows
        it): its offsets stay, its record is deleted (a tombstone in ``changes``)."""
        existing = self.manager.groups.get(group_id)
        if isinstance(existing, ConsumerGroup) and not existing.removed:
            return existing
        if existing is not None and not existing.is_(GroupState.DEAD):
            if not existing.is_(GroupState.EMPTY):
                raise GroupError(ErrorCode.group_id_not_found,
                                 f"Group {group_id} is not a consumer group.")
            if not create or not migration_allows(self._config, upgrade=True):
                raise GroupError(ErrorCode.group_id_not_found,
                                 f"Group {group_id} is not a consumer group.")
            log.info("group %s: the empty classic group becomes a consumer group", group_id)
            group, tombstones = self.manager.convert_to_consumer_group(existing)
            changes += tombstones
            return group
        if not create:
            raise GroupError(ErrorCode.group_id_not_found,
                             f"Group {group_id} not found.")
        group = ConsumerGroup(group_id, self._clock())
        self.manager.groups[group_id] = group
        return group

    def _maybe_bump_epoch(self, group: ConsumerGroup,
                          members: Mapping[str, ConsumerGroupMember], bump: bool
                          ) -> list[Change]:
        """The subscription metadata for ``members`` and, if it or a subscription changed,
        the next group epoch."""
        changes: list[Change] = []
        if bump or group.metadata_version != self.metadata_version:
            group.metadata_version = self.metadata_version
            metadata = self._subscription_metadata(members)
            if metadata != group.subscription_metadata:
                changes.append((ConsumerGroupKey(RecordType.SUBSCRIPTION_METADATA,
                                                 group.group_id),
                                subscription_metadata_value(metadata)))
                bump = True
        if bump:
            epoch = group.group_epoch + 1
            log.info("group %s: group epoch %d", group.group_id, epoch)
            changes.append((ConsumerGroupKey(RecordType.GROUP_EPOCH, group.group_id),
                            GroupEpochValue(epoch=epoch)))
        return changes

    def _subscription_metadata(self, members: Mapping[str, ConsumerGroupMember]
                               ) -> dict[str, SubscribedTopic]:
        topics = self._topics()
        names: set[str] = set()
        for member in members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex:
                names |= self._resolve(member.subscribed_topic_regex, topics)
        return {name: SubscribedTopic(topics[name].topic_id, name, len(topics[name].partitions))
                for name in names if name in topics}

    def _resolve(self, regex: str, topics: Mapping[str, TopicMetadata]) -> frozenset[str]:
        cached = self._regex_cache.get(regex)
        if cached is not None and cached[0] == self.metadata_version:
            return cached[1]
        pattern = compile_regex(regex)
        matched = frozenset(name for name in topics
                            if name not in INTERNAL_TOPICS and pattern.fullmatch(name))
        self._regex_cache[regex] = (self.metadata_version, matched)
        return matched

    def _member_topics(self, member: ConsumerGroupMember,
                       metadata: Mapping[str, SubscribedTopic]) -> frozenset[uuid.UUID]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            pattern = compile_regex(member.subscribed_topic_regex)
            names |= {name for name in metadata
                      if name not in INTERNAL_TOPICS and pattern.fullmatch(name)}
        return frozenset(metadata[name].topic_id for name in names if name in metadata)

    def _new_target(self, group: ConsumerGroup) -> list[Change]:
        """Kafka's ``TargetAssignmentBuilder``: the assignor's answer for every member, and a
        record for each member whose target changed, then the new assignment epoch."""
        metadata = group.subscription_metadata
        members = {member_id: MemberSpec(
            member_id, m.instance_id, m.rack_id, self._member_topics(m, metadata),
            group.target.get(member_id, {}))
            for member_id, m in group.members.items()}
        with_racks = any(m.rack_id for m in group.members.values())
        topics = {t.topic_id: TopicSpec(t.topic_id, t.name, t.partitions,
                                        self._partition_racks(t) if with_racks else {})
                  for t in metadata.values()}
        assignor = ASSIGNORS[group.preferred_assignor(self.assignor_names()[0])]
        target = assignor.assign(members, topics)
        changes: list[Change] = [
            (_member_key(RecordType.TARGET_ASSIGNMENT_MEMBER, group, member_id),
             target_member_value(partitions))
            for member_id, partitions in sorted(target.items())
            if _non_empty(partitions) != _non_empty(group.target.get(member_id, {}))]
        changes.append((ConsumerGroupKey(RecordType.TARGET_ASSIGNMENT_EPOCH, group.group_id),
                        target_assignment_epoch_value(group.group_epoch)))
        log.info("group %s: target assignment of epoch %d with %s", group.group_id,
                 group.group_epoch, assignor.name)
        return changes

    def _partition_racks(self, topic: SubscribedTopic) -> dict[int, frozenset[str]]:
        metadata = self._topics().get(topic.name)
        racks = self._racks()
        if metadata is None:
            return {}
        return {state.partition: frozenset(racks[r] for r in state.replicas if racks.get(r))
                for state in metadata.partitions}

    def _arm_revocation_timer(self, group: ConsumerGroup, before: ConsumerGroupMember,
                              after: ConsumerGroupMember, now_ms: int) -> None:
        """A member that must revoke gets its rebalance timeout to do it (Kafka's
        ``scheduleConsumerGroupRebalanceTimeout``)."""
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            if before.state is not MemberState.UNREVOKED_PARTITIONS \
                    or before.member_epoch != after.member_epoch \
                    or after.member_id not in group.revocation_deadlines_ms:
                group.revocation_deadlines_ms[after.member_id] = (
                    after.member_epoch, now_ms + max(after.rebalance_timeout_ms, 0))
        else:
            group.revocation_deadlines_ms.pop(after.member_id, None)

    # -- removal and timers --------------------------------------------------------------

    def fence(self, group: ConsumerGroup, member_id: str) -> list[Change]:
        """Kafka's ``consumerGroupFenceMember``: the member's records are deleted, and the
        group epoch bumped for the subscription without it; returns the records, applied."""
        members = {m: v for m, v in group.members.items() if m != member_id}
        changes: list[Change] = []
        _apply(group, _removal(group, member_id) + self._maybe_bump_epoch(group, members, True),
               self._clock(), changes)
        return changes

    def tick(self, now_ms: int) -> None:
        """Fences members whose session ended or whose revocation took too long."""
        for group in [g for g in self.manager.groups.values() if isinstance(g, ConsumerGroup)]:
            expired = [m for m, deadline in group.session_deadlines_ms.items()
                       if now_ms >= deadline and m in group.members]
            stuck = [m for m, (epoch, deadline) in group.revocation_deadlines_ms.items()
                     if now_ms >= deadline and m in group.members
                     and group.members[m].member_epoch == epoch]
            for member_id in dict.fromkeys(expired + stuck):
                if member_id not in group.members:
                    continue
                log.info("group %s: member %s fenced: %s", group.group_id, member_id,
                         "its session timed out" if member_id in expired
                         else "it did not revoke its partitions within its rebalance timeout")
                self.write(group, self.fence(group, member_id), lambda _: None)

    def start_sessions(self, group: ConsumerGroup) -> None:
        """A group loaded from the log: every member gets a full session to heartbeat
        here, and one revoking partitions its rebalance timeout to finish (Kafka's
        ``onLoaded``)."""
        now_ms = self._clock()
        session_timeout_ms = self.session_timeout_ms(group.group_id)
        for member_id, member in group.members.items():
            group.session_deadlines_ms[member_id] = now_ms + session_timeout_ms
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                group.revocation_deadlines_ms[member_id] = (
                    member.member_epoch, now_ms + max(member.rebalance_timeout_ms, 0))

    # -- writes --------------------------------------------------------------------------

    def write(self, group: ConsumerGroup, changes: list[Change],
              callback: Callable[[ErrorCode], None]) -> None:
        """Appends records already applied to the group; ``callback`` gets the error the
        member is to see. A failed append reloads the partition, so that memory holds what
        the log holds."""
        if not changes:
            callback(ErrorCode.none)
            return
        self.manager.append_consumer_group_records(group, changes, callback)


def _apply(group: ConsumerGroup, step: list[Change], now_ms: int, changes: list[Change]
           ) -> None:
    """Applies records to the group at once (the next step builds on them) and keeps them
    in ``changes`` to be written. Raw classic-group records (bytes keys) were applied by
    whoever made them."""
    for key, value in step:
        if isinstance(key, ConsumerGroupKey):
            group.replay(key, value, now_ms)
    changes += step


def _member_key(record_type: RecordType, group: ConsumerGroup, member_id: str
                ) -> ConsumerGroupKey:
    return ConsumerGroupKey(record_type, group.group_id, member_id)


def _removal(group: ConsumerGroup, member_id: str) -> list[Change]:
    """The tombstones that delete a member (Kafka's ``removeMember``): its assignment, its
    target, then its subscription."""
    return [(_member_key(t, group, member_id), None)
            for t in (RecordType.CURRENT_ASSIGNMENT, RecordType.TARGET_ASSIGNMENT_MEMBER,
                      RecordType.MEMBER_SUBSCRIPTION)]


def _assignment_inputs(member: ConsumerGroupMember) -> tuple:
    """What the target assignment reads of a member's subscription."""
    return (frozenset(member.subscribed_topic_names), member.subscribed_topic_regex,
            member.rack_id, member.server_assignor)


def _non_empty(partitions: Partitions) -> dict[uuid.UUID, frozenset[int]]:
    return {topic_id: parts for topic_id, parts in partitions.items() if parts}


def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: Partitions | None) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: a member may come with its
    previous epoch when the response that moved it on was lost, as long as it owns no more
    than it is assigned."""
    if epoch > member.member_epoch:
        raise GroupError(ErrorCode.fenced_member_epoch,
                         f"The consumer group member has a greater member epoch ({epoch}) "
                         f"than the one known by the group coordinator "
                         f"({member.member_epoch}). The member must abandon all its "
                         f"partitions and rejoin.")
    if epoch < member.member_epoch and (
            epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned)):
        raise GroupError(ErrorCode.fenced_member_epoch,
                         f"The consumer group member has a smaller member epoch ({epoch}) "
                         f"than the one known by the group coordinator "
                         f"({member.member_epoch}). The member must abandon all its "
                         f"partitions and rejoin.")


def _is_subset(owned: Partitions | None, assigned: Partitions) -> bool:
    if owned is None:
        return False
    return all(parts <= assigned.get(topic_id, frozenset())
               for topic_id, parts in owned.items())


def compile_regex(regex: str) -> re.Pattern[str]:
    try:
        return re.compile(regex)
    except re.error as e:
        raise GroupError(ErrorCode.invalid_regular_expression,
                         f"SubscribedTopicRegex {regex!r} is invalid: {e}") from None


# Kafka's class names of its assignors, accepted in group.consumer.assignors.
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def assignor_names(value: str | list[str]) -> list[str]:
    """``group.consumer.assignors``: assignor names or Kafka's class names, the first the
    default."""
    items = value.split(",") if isinstance(value, str) else value
    return [_ASSIGNOR_CLASSES.get(item.strip(), item.strip()) for item in items if item.strip()]


def migration_allows(config: Callable[[str], Any], *, upgrade: bool) -> bool:
    """``group.consumer.migration.policy``: whether an empty group may change protocol."""
    policy = config("group.consumer.migration.policy").lower()
    return policy == "bidirectional" or policy == ("upgrade" if upgrade else "downgrade")
