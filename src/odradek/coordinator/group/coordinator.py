"""``GroupCoordinator``: the entry point of every group API (Kafka's ``GroupCoordinator``
service). It checks that a group is coordinated here (Kafka's ``validateGroupStatus``),
then hands membership requests to :class:`~odradek.coordinator.group.membership.
GroupMembership` and answers offset and admin requests itself, with the groups and their
storage in the :class:`~odradek.coordinator.group.metadata_manager.GroupMetadataManager`.

A member commits with its generation and is fenced if it is stale; generation -1 without a
member id is a simple commit (``assign()`` consumers, admin tools), which only a group
without members takes. Commits and deletions are answered through a ``respond`` callback
once their records are written to ``__consumer_offsets``, at once or later. Timers advance
in :meth:`GroupCoordinator.tick`, which the broker calls every ``GROUP_TICK_MS``. Sans-I/O
and not thread-safe, as the rest of the package.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.consumer_group import ConsumerGroup
from odradek.coordinator.group.consumer_protocol import (
    ConsumerGroupProtocol,
    HeartbeatRequest,
    migration_allows,
)
from odradek.coordinator.group.group import (
    CONSUMER_PROTOCOL_TYPE,
    Group,
    GroupDescription,
    JoinGroupResult,
    JoinRequest,
    SyncCallback,
    SyncGroupResult,
    check_member,
)
from odradek.coordinator.group.heartbeats import HeartbeatCallback, HeartbeatResult
from odradek.coordinator.group.membership import UNKNOWN_MEMBER_ID, GroupMembership
from odradek.coordinator.group.metadata_manager import (
    AnyGroup,
    GroupMetadataManager,
    TransactionalProducer,
    send_away,
)
from odradek.coordinator.group.offsets_topic import OffsetAndMetadata
from odradek.coordinator.group.share_group import (
    ShareGroup,
    ShareGroupProtocol,
    ShareHeartbeatRequest,
)
from odradek.coordinator.group.state import GroupState
from odradek.metadata.model import TopicMetadata
from odradek.protocol.topic_partition import TopicPartition
from odradek.server.config_defs import GroupConfigLookup, broker_group_config

# How often the broker calls tick(): sessions and rebalance timeouts hold to within it.
GROUP_TICK_MS = 100

# OffsetDelete's answer: the group's error and each partition's.
OffsetDeleteResult = tuple[ErrorCode, dict[TopicPartition, ErrorCode]]

_S = GroupState

log = logging.getLogger(__name__)


class GroupCoordinator:
    def __init__(self, manager: GroupMetadataManager, config: Callable[[str], Any],
                 clock: Callable[[], int],
                 new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()), *,
                 topics: Callable[[], Mapping[str, TopicMetadata]] = dict,
                 racks: Callable[[], Mapping[int, str | None]] = dict,
                 group_config: GroupConfigLookup | None = None) -> None:
        """``topics`` lists the cluster's topics by name and ``racks`` the brokers' racks:
        the consumer protocol assigns partitions itself. ``group_config`` reads a group's
        own configs (by default, every group has the broker's)."""
        self.manager = manager
        self.membership = GroupMembership(manager, config, clock, new_uuid)
        self.group_config = group_config or broker_group_config(config)
        self.consumer_protocol = ConsumerGroupProtocol(manager, config, clock, topics, racks,
                                                       new_uuid, group_config=self.group_config)
        manager.on_consumer_group_loaded = self.consumer_protocol.start_sessions
        self.share_protocol = ShareGroupProtocol(manager, config, clock, topics,
                                                 group_config=self.group_config)
        manager.on_share_groups_loaded = self.share_protocol.load
        self._config = config
        self._clock = clock
        self._active = False

    # -- lifecycle -------------------------------------------------------------------------

    def startup(self) -> None:
        self._active = True
        self.manager.load()

    def shutdown(self) -> None:
        """Members waiting for a response are told to find the coordinator again."""
        self._active = False
        send_away(self.manager.unload_all())

    def on_elected(self, partition: int) -> None:
        """This broker now leads ``__consumer_offsets-<partition>``: its groups are loaded
        (Kafka's ``onElection``)."""
        self.manager.load_partition(partition)

    def on_resigned(self, partition: int) -> None:
        """Another broker leads ``__consumer_offsets-<partition>`` now: its groups are
        unloaded, and their waiting members told to find the new coordinator (Kafka's
        ``onResignation``)."""
        send_away(self.manager.unload_partition(partition))
        self.share_protocol.forget(lambda group_id: self.manager.partition_for(group_id)
                                   == partition)

    def on_topics_changed(self) -> None:
        """Topics were created, deleted or given partitions: consumer groups subscribed to
        them compute their assignment again."""
        self.consumer_protocol.on_topics_changed()
        self.share_protocol.on_topics_changed()

    def tick(self) -> None:
        """Advances every timer to now: sessions, rebalances, pending syncs, retention."""
        now_ms = self._clock()
        self.membership.timers.tick(now_ms)
        self.consumer_protocol.tick(now_ms)
        self.share_protocol.tick(now_ms)

    def _status(self, group_id: str | None, *, allow_empty_id: bool) -> ErrorCode:
        """Kafka's ``validateGroupStatus``; an empty group id is valid for the APIs that
        predate group management (offsets, describe, delete)."""
        if group_id is None or (not allow_empty_id and group_id == ""):
            return ErrorCode.invalid_group_id
        if not self._active:
            return ErrorCode.coordinator_not_available
        if not self.manager.is_coordinator_for(group_id):
            return ErrorCode.not_coordinator
        return ErrorCode.none

    # -- membership ------------------------------------------------------------------------

    def join_group(self, group_id: str, join: JoinRequest) -> None:
        error = self._status(group_id, allow_empty_id=False)
        if error is ErrorCode.none:
            error = self._classic_or_downgraded(group_id)
        if error is not ErrorCode.none:
            join.respond(JoinGroupResult(error, join.member_id))
        else:
            self.membership.join_group(group_id, join)

    def _classic_or_downgraded(self, group_id: str) -> ErrorCode:
        """A JoinGroup for a consumer-protocol group: an empty one becomes a classic group
        with its offsets (Kafka's online downgrade, if the migration policy allows it);
        classic members cannot join one with members."""
        group = self.manager.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or group.removed:
            return ErrorCode.none
        if group.is_(_S.EMPTY) and migration_allows(self._config, upgrade=False):
            log.info("group %s: the empty consumer group becomes a classic group", group_id)
            self.manager.convert_to_classic_group(group, lambda _: None)
            return ErrorCode.none
        return ErrorCode.inconsistent_group_protocol

    def _is_consumer_group(self, group_id: str) -> bool:
        return isinstance(self.manager.groups.get(group_id), ConsumerGroup)

    def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                   group_instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes],
                   respond: SyncCallback) -> None:
        error = self._status(group_id, allow_empty_id=False)
        if error is ErrorCode.none and self._is_consumer_group(group_id):
            error = ErrorCode.unknown_member_id
        if error is not ErrorCode.none:
            respond(SyncGroupResult(error))
        else:
            self.membership.sync_group(group_id, generation_id, member_id, group_instance_id,
                                       protocol_type, protocol_name, assignments, respond)

    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None) -> ErrorCode:
        error = self._status(group_id, allow_empty_id=False)
        if error is ErrorCode.none and self._is_consumer_group(group_id):
            error = ErrorCode.unknown_member_id
        if error is not ErrorCode.none:
            return error
        return self.membership.heartbeat(group_id, generation_id, member_id, group_instance_id)

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        error = self._status(group_id, allow_empty_id=False)
        if error is not ErrorCode.none:
            return error, []
        if self._is_consumer_group(group_id):
            return ErrorCode.none, [ErrorCode.unknown_member_id] * len(leaving)
        return self.membership.leave_group(group_id, leaving)

    # -- the consumer protocol (KIP-848) -----------------------------------------------------

    def consumer_group_heartbeat(self, request: HeartbeatRequest,
                                 respond: HeartbeatCallback) -> None:
        # An empty group id is the heartbeat's own INVALID_REQUEST, as in Kafka.
        error = self._status(request.group_id, allow_empty_id=True)
        if error is not ErrorCode.none:
            respond(HeartbeatResult(error))
        else:
            self.consumer_protocol.heartbeat(request, respond)

    # -- share groups (KIP-932) -------------------------------------------------------------

    def share_group_heartbeat(self, request: ShareHeartbeatRequest,
                              respond: HeartbeatCallback) -> None:
        error = self._status(request.group_id, allow_empty_id=False)
        if error is not ErrorCode.none:
            respond(HeartbeatResult(error))
        else:
            self.share_protocol.heartbeat(request, respond)

    def describe_share_group(self, group_id: str) -> tuple[ErrorCode, ShareGroup | None]:
        """ShareGroupDescribe: GROUP_ID_NOT_FOUND for a group of another kind or none."""
        error = self._status(group_id, allow_empty_id=False)
        if error is not ErrorCode.none:
            return error, None
        group = self.share_protocol.groups.get(group_id)
        return (ErrorCode.none, group) if group else (ErrorCode.group_id_not_found, None)

    def describe_consumer_group(self, group_id: str) -> tuple[ErrorCode, ConsumerGroup | None]:
        """ConsumerGroupDescribe: GROUP_ID_NOT_FOUND for a classic group or none at all."""
        error = self._status(group_id, allow_empty_id=False)
        if error is not ErrorCode.none:
            return error, None
        group = self.manager.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or group.removed:
            return ErrorCode.group_id_not_found, None
        return ErrorCode.none, group

    # -- offsets ---------------------------------------------------------------------------

    def commit_offsets(self, *, group_id: str, generation_id: int, member_id: str,
                       group_instance_id: str | None,
                       offsets: dict[TopicPartition, tuple[int, int, str | None]],
                       respond: Callable[[dict[TopicPartition, ErrorCode]], None],
                       api_version: int = 9) -> None:
        """``offsets``: (offset, leader epoch, metadata) per partition. Generation -1 with
        no member is a simple commit, allowed while the group has no members; in a
        consumer-protocol group the generation is the member epoch. ``respond`` gets each
        partition's error once the commit is written (at once if it is refused)."""
        if self._is_consumer_group(group_id):
            group = self.manager.groups[group_id]
            error = self._status(group_id, allow_empty_id=True)
            if error is ErrorCode.none:
                error = _check_consumer_commit(group, generation_id, member_id,
                                               transactional=False, api_version=api_version)
            if error is not ErrorCode.none:
                respond({tp: error for tp in offsets})
                return
            self.manager.store_offsets(group, offsets, respond)
            return
        error = self._status(group_id, allow_empty_id=True)
        group = self.manager.groups.get(group_id)
        if error is ErrorCode.none and group is None:
            if generation_id >= 0:
                error = ErrorCode.illegal_generation  # a member of a generation now gone
            else:
                group = Group(group_id, _S.EMPTY, self._clock())
                self.manager.groups[group_id] = group
        if error is ErrorCode.none:
            error = self._check_commit(group, generation_id, member_id, group_instance_id)
        if error is not ErrorCode.none:
            respond({tp: error for tp in offsets})
            return
        member = group.members.get(member_id)
        if member is not None and group.state in (_S.STABLE, _S.PREPARING_REBALANCE):
            member.heartbeat_deadline_ms = self._clock() + member.session_timeout_ms
        self.manager.store_offsets(group, offsets, respond)

    def commit_transactional_offsets(
            self, *, group_id: str, producer: TransactionalProducer, generation_id: int,
            member_id: str, group_instance_id: str | None,
            offsets: dict[TopicPartition, tuple[int, int, str | None]],
            respond: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        """TxnOffsetCommit: offsets committed in ``producer``'s transaction, which take
        effect when it commits. A member of the group is fenced as for OffsetCommit
        (KIP-447: a zombie of an older generation cannot commit); generation -1 without a
        member id (producers that do not pass the consumer's group metadata) skips the
        membership check."""
        error = self._status(group_id, allow_empty_id=False)
        group = self.manager.groups.get(group_id)
        if error is ErrorCode.none and group is None:
            group = Group(group_id, _S.EMPTY, self._clock())
            self.manager.groups[group_id] = group
        if error is ErrorCode.none and isinstance(group, ConsumerGroup):
            if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID:
                error = _check_consumer_commit(group, generation_id, member_id,
                                               transactional=True, api_version=0)
        elif error is ErrorCode.none:
            if group.is_(_S.DEAD):
                error = ErrorCode.coordinator_not_available
            elif generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID \
                    or group_instance_id is not None:
                error = check_member(group, generation_id, member_id, group_instance_id)
        if error is not ErrorCode.none:
            respond({tp: error for tp in offsets})
            return
        self.manager.store_txn_offsets(group, producer, offsets, respond)

    def complete_transaction(self, producer_id: int, partitions: list[int],
                             commit: bool) -> None:
        """A transaction marker was written to these ``__consumer_offsets`` partitions."""
        if self._active:
            self.manager.complete_transaction(producer_id, partitions, commit)

    def _check_commit(self, group: Group, generation_id: int, member_id: str,
                      group_instance_id: str | None) -> ErrorCode:
        """Kafka 4's ``ClassicGroup.validateOffsetCommit``."""
        if group.is_(_S.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and group.is_(_S.EMPTY):
            return ErrorCode.none
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = check_member(group, generation_id, member_id, group_instance_id)
            if error is not ErrorCode.none:
                return error
        else:
            return ErrorCode.unknown_member_id  # a simple commit to a group with members
        if group.is_(_S.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """(error, offsets): committed offsets whatever the group's state, since a group
        may commit without using group management at all. A consumer-protocol member that
        names itself (OffsetFetch v9) must be a member at its current epoch."""
        error = self._status(group_id, allow_empty_id=True)
        group = self.manager.groups.get(group_id)
        if (error is ErrorCode.none and isinstance(group, ConsumerGroup)
                and (member_id or member_epoch >= 0)):
            member = group.members.get(member_id or "")
            if member is None:
                error = ErrorCode.unknown_member_id
            elif member.member_epoch != member_epoch:
                error = ErrorCode.stale_member_epoch
        if error is not ErrorCode.none:
            return error, {}
        return ErrorCode.none, self.manager.fetch_offsets(group_id, partitions)

    def unstable_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions whose offset a transaction not yet ended has committed: OffsetFetch
        with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for them (KIP-447)."""
        return self.manager.unstable_partitions(group_id)

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                       respond: Callable[[OffsetDeleteResult], None]) -> None:
        """``respond`` gets (error, each partition's error) once the tombstones are
        written."""
        error = self._status(group_id, allow_empty_id=False)
        group = self.manager.groups.get(group_id)
        if error is ErrorCode.none and (group is None or group.is_(_S.DEAD)):
            error = ErrorCode.group_id_not_found
        if error is not ErrorCode.none:
            respond((error, {}))
            return
        if group.is_(_S.EMPTY):
            deletable, errors = partitions, {}
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            deletable = [tp for tp in partitions if not group.is_subscribed_to_topic(tp.topic)]
            errors = {tp: ErrorCode.group_subscribed_to_topic for tp in partitions
                      if group.is_subscribed_to_topic(tp.topic)}
        else:
            respond((ErrorCode.non_empty_group, {}))
            return
        self.manager.remove_offsets(group, deletable, lambda removal_error: respond(
            (ErrorCode.none, errors | {tp: removal_error for tp in deletable})))

    def on_partitions_deleted(self, partitions: list[TopicPartition]) -> None:
        """A topic was deleted: its committed offsets go from every group here (Kafka's
        ``GroupCoordinator.onPartitionsDeleted``)."""
        if self._active:
            self.manager.remove_offsets_of_deleted_partitions(partitions)

    # -- admin -----------------------------------------------------------------------------

    def list_groups(self) -> list[AnyGroup | ShareGroup]:
        return ([g for g in self.manager.groups.values() if not g.is_(_S.DEAD)]
                + list(self.share_protocol.groups.values()))

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupDescription | None]:
        """(error, description); no description for a group that does not exist."""
        error = self._status(group_id, allow_empty_id=True)
        group = self.manager.groups.get(group_id) if error is ErrorCode.none else None
        if isinstance(group, ConsumerGroup):  # described by ConsumerGroupDescribe
            return error, None
        return error, group.describe() if group is not None else None

    def delete_groups(self, group_ids: list[str],
                      respond: Callable[[dict[str, ErrorCode]], None]) -> None:
        """``respond`` gets each group's error once the groups' tombstones are written."""
        results: dict[str, ErrorCode] = {}
        deletable = []
        for group_id in group_ids:
            error = self._status(group_id, allow_empty_id=True)
            group = self.manager.groups.get(group_id)
            if error is ErrorCode.none:
                if group is None or group.is_(_S.DEAD):
                    error = ErrorCode.group_id_not_found
                elif not group.is_(_S.EMPTY):
                    error = ErrorCode.non_empty_group
                else:
                    deletable.append(group)
            results[group_id] = error
        self.manager.remove_groups(deletable, lambda removed: respond(results | removed))


def _check_consumer_commit(group: ConsumerGroup, member_epoch: int, member_id: str, *,
                           transactional: bool, api_version: int) -> ErrorCode:
    """Kafka's ``ConsumerGroup.validateOffsetCommit``: a simple commit (epoch -1) only to an
    empty group; otherwise a member at its current epoch, through OffsetCommit v9+ (which
    carries member epochs) unless the commit is transactional."""
    if group.removed:
        return ErrorCode.coordinator_not_available
    if member_epoch < 0 and not group.members:
        return ErrorCode.none
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if not transactional and api_version < 9:
        return ErrorCode.unsupported_version
    if member_epoch != member.member_epoch:
        return ErrorCode.illegal_generation if transactional else ErrorCode.stale_member_epoch
    return ErrorCode.none
