"""``GroupMetadataManager``: the groups this coordinator owns, kept in memory and in
``__consumer_offsets`` (Kafka's class of the same name and duty).

Every change that must survive a restart is written to the group's partition of
``__consumer_offsets`` *before* the in-memory state changes, through an injected
:class:`OffsetsStore` (the broker's is :class:`~odradek.coordinator.group.storage.
ReplicaOffsetsStore`, over the replica manager's append; tests use a list). At startup each
partition of the topic led here is replayed from its start: the last record of each key
wins, and a tombstone deletes its offset or group. A group is owned here once its partition
is loaded; a request for any other group gets NOT_COORDINATOR, so the client looks for the
coordinator again (which creates the topic when it does not exist yet, as Kafka does).

Offsets of an Empty group expire ``offsets.retention.minutes`` after the group became empty
(KIP-211); offsets of a simple (member-less) group, and of topics a Stable consumer group no
longer subscribes to (KIP-496), ``offsets.retention.minutes`` after their commit. Offsets
of a deleted topic are removed from every group when it is deleted. An Empty group with no
offsets left is removed.

Not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.group import CONSUMER_PROTOCOL_TYPE, Group
from odradek.coordinator.group.offsets_topic import (
    GroupKey,
    OffsetAndMetadata,
    OffsetKey,
    OffsetsRecordError,
    StoredGroup,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
    partition_for,
)
from odradek.coordinator.group.state import GroupEvent, GroupState
from odradek.replication.partition import TopicPartition

log = logging.getLogger(__name__)

KeyValue = tuple[bytes, bytes | None]

MINUTE_MS = 60_000


class StoreError(Exception):
    """An append to ``__consumer_offsets`` failed, with the error code the log gave."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


class OffsetsStore(Protocol):
    """The partitions of ``__consumer_offsets`` as the coordinator needs them."""

    def partition_count(self) -> int | None:
        """The topic's partition count; None while the topic does not exist."""

    def hosted_partitions(self) -> Iterable[int]:
        """The partitions this broker leads."""

    def read(self, partition: int) -> Iterable[KeyValue]:
        """Every record of the partition, in offset order."""

    def append(self, partition: int, records: Sequence[KeyValue]) -> None:
        """Appends the records as one batch, durably as acks=-1 would; raises StoreError."""


# What a failed append means to the client (GroupMetadataManager.storeGroup/storeOffsets).
_STORE_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
}
_TOO_LARGE = (ErrorCode.record_list_too_large, ErrorCode.message_too_large,
              ErrorCode.invalid_fetch_size)


def group_store_error(error: ErrorCode) -> ErrorCode:
    return (ErrorCode.unknown_server_error if error in _TOO_LARGE
            else _STORE_ERRORS.get(error, error))


def offset_store_error(error: ErrorCode) -> ErrorCode:
    return (ErrorCode.invalid_commit_offset_size if error in _TOO_LARGE
            else _STORE_ERRORS.get(error, error))


class GroupMetadataManager:
    def __init__(self, store: OffsetsStore, config: Callable[[str], Any],
                 clock: Callable[[], int]) -> None:
        self._store = store
        self._config = config
        self._clock = clock
        self.groups: dict[str, Group] = {}
        self._partition_count: int | None = None
        self._loaded: set[int] = set()

    # -- ownership -------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int | None:
        if self._partition_count is None:
            return None
        return partition_for(group_id, self._partition_count)

    def is_coordinator_for(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self._loaded

    def load(self) -> None:
        """Loads the partitions led here that are not loaded yet (at startup, and once the
        topic is created). Idempotent."""
        count = self._store.partition_count()
        if count is None:
            return
        self._partition_count = count
        for partition in self._store.hosted_partitions():
            if partition not in self._loaded:
                self._load_partition(partition)
                self._loaded.add(partition)

    def _load_partition(self, partition: int) -> None:
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        stored_groups: dict[str, StoredGroup | None] = {}
        for key, value in self._store.read(partition):
            try:
                match decode_key(key):
                    case OffsetKey(group_id, tp):
                        group_offsets = offsets.setdefault(group_id, {})
                        if value is None:
                            group_offsets.pop(tp, None)
                        else:
                            group_offsets[tp] = decode_offset_commit_value(value)
                    case GroupKey(group_id):
                        stored_groups[group_id] = (None if value is None
                                                   else decode_group_metadata_value(value))
            except (OffsetsRecordError, UnicodeDecodeError) as e:
                log.warning("__consumer_offsets-%d: skipping a record: %s", partition, e)
        now_ms = self._clock()
        for group_id in stored_groups.keys() | offsets.keys():
            stored = stored_groups.get(group_id)
            group_offsets = offsets.get(group_id, {})
            if stored is None and not group_offsets:
                continue
            # Offsets without a group record: a simple group that only commits.
            group = (Group(group_id, GroupState.EMPTY, now_ms) if stored is None
                     else Group.loaded(group_id, stored, now_ms))
            group.offsets = group_offsets
            self.groups[group_id] = group
        log.info("loaded __consumer_offsets-%d", partition)

    def unload_all(self) -> list[Group]:
        """Forgets every group (broker shutdown); returns them so waiting members can be told."""
        groups = list(self.groups.values())
        for group in groups:
            group.transition(GroupEvent.GROUP_REMOVED, self._clock())
        self.groups.clear()
        self._loaded.clear()
        self._partition_count = None
        return groups

    # -- writes ----------------------------------------------------------------------------

    def _append(self, group_id: str, records: Sequence[KeyValue]) -> None:
        partition = self.partition_for(group_id)
        if partition is None:
            raise StoreError(ErrorCode.not_coordinator)
        self._store.append(partition, records)

    def store_group(self, group: Group, assignments: dict[str, bytes]) -> ErrorCode:
        """Writes the group's membership with these assignments (GroupMetadataValue)."""
        try:
            self._append(group.group_id, [(group_metadata_key(group.group_id),
                                           group_metadata_value(group.stored(assignments)))])
        except StoreError as e:
            log.warning("group %s: storing generation %d failed: %s",
                        group.group_id, group.generation_id, e)
            return group_store_error(e.error_code)
        return ErrorCode.none

    def store_offsets(self, group: Group,
                      offsets: dict[TopicPartition, tuple[int, int, str | None]]
                      ) -> dict[TopicPartition, ErrorCode]:
        """Commits (offset, leader epoch, metadata) per partition, all in one batch."""
        now_ms = self._clock()
        max_metadata = self._config("offset.metadata.max.bytes")
        errors: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            if metadata is not None and len(metadata) > max_metadata:
                errors[tp] = ErrorCode.offset_metadata_too_large
            else:
                valid[tp] = OffsetAndMetadata(offset, leader_epoch, metadata or "", now_ms)
        if valid:
            try:
                self._append(group.group_id, [(offset_commit_key(group.group_id, tp),
                                               offset_commit_value(o)) for tp, o in valid.items()])
            except StoreError as e:
                error = offset_store_error(e.error_code)
                return errors | {tp: error for tp in valid}
            group.offsets.update(valid)
        return errors | {tp: ErrorCode.none for tp in valid}

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets, None where nothing is committed; ``partitions=None``: all."""
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_(GroupState.DEAD) else {}
        if partitions is None:
            return dict(offsets)
        return {tp: offsets.get(tp) for tp in partitions}

    def remove_groups(self, groups: list[Group]) -> dict[str, ErrorCode]:
        """Deletes groups with their offsets: tombstones, then gone from memory."""
        results = {}
        for group in groups:
            error = self._write_tombstones(group, list(group.offsets), remove_group=True)
            results[group.group_id] = group_store_error(error) if error else ErrorCode.none
            if not error:
                self._forget(group)
        return results

    def remove_offsets(self, group: Group, partitions: list[TopicPartition]) -> ErrorCode:
        error = self._write_tombstones(group, partitions, remove_group=False)
        if error:
            return offset_store_error(error)
        for tp in partitions:
            group.offsets.pop(tp, None)
        return ErrorCode.none

    def _write_tombstones(self, group: Group, partitions: list[TopicPartition], *,
                          remove_group: bool) -> ErrorCode | None:
        records = [(offset_commit_key(group.group_id, tp), None) for tp in partitions]
        # A group that never had a generation only committed offsets: it has no group record
        # to delete (Kafka skips the tombstone for generation 0 too).
        if remove_group and group.generation_id > 0:
            records.append((group_metadata_key(group.group_id), None))
        if not records:
            return None
        try:
            self._append(group.group_id, records)
        except StoreError as e:
            log.warning("group %s: writing tombstones failed: %s", group.group_id, e)
            return e.error_code
        return None

    def _forget(self, group: Group) -> None:
        group.transition(GroupEvent.GROUP_REMOVED, self._clock())
        self.groups.pop(group.group_id, None)

    # -- retention and deleted topics ------------------------------------------------------

    def remove_expired_offsets(self) -> int:
        """Offsets past ``offsets.retention.minutes``; returns how many expired."""
        now_ms = self._clock()
        retention_ms = self._config("offsets.retention.minutes") * MINUTE_MS
        return self._cleanup(lambda group: _expired_offsets(group, now_ms, retention_ms))

    def remove_offsets_of_deleted_partitions(self, partitions: Iterable[TopicPartition]) -> int:
        """Kafka's ``onPartitionsDeleted``: every group forgets its offsets of a deleted
        topic's partitions, so a topic created again under the same name starts without
        them. Returns how many were removed."""
        deleted = frozenset(partitions)
        return self._cleanup(lambda group: [tp for tp in group.offsets if tp in deleted])

    def _cleanup(self, select: Callable[[Group], list[TopicPartition]]) -> int:
        """Kafka's ``cleanupGroupMetadata``: the offsets ``select`` picks in each group, then
        Empty groups left with none. A group whose tombstones cannot be written keeps those
        offsets, in memory as in the log, until a later retention check removes them."""
        removed_count = 0
        for group in list(self.groups.values()):
            removed = select(group)
            remove_group = group.is_(GroupState.EMPTY) and not (group.offsets.keys() - removed)
            if not removed and not remove_group:
                continue
            if self._write_tombstones(group, removed, remove_group=remove_group) is not None:
                continue
            for tp in removed:
                del group.offsets[tp]
            removed_count += len(removed)
            if remove_group:
                self._forget(group)
        return removed_count


def _expired_offsets(group: Group, now_ms: int, retention_ms: int) -> list[TopicPartition]:
    """GroupMetadata.removeExpiredOffsets: which base time counts depends on the group."""
    subscribed: frozenset[str] = frozenset()
    if group.protocol_type is not None and group.is_(GroupState.EMPTY):
        # Counted from when the group became empty (KIP-211), not from each commit.
        def base(_: OffsetAndMetadata) -> int:
            return group.state_timestamp_ms
    elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None
          and group.is_(GroupState.STABLE)):
        # KIP-496: offsets of topics no member subscribes to any more.
        subscribed = group.subscribed_topics

        def base(offset: OffsetAndMetadata) -> int:
            return offset.commit_timestamp_ms
    elif group.protocol_type is None:
        def base(offset: OffsetAndMetadata) -> int:
            return offset.commit_timestamp_ms
    else:
        return []
    return [tp for tp, offset in group.offsets.items()
            if tp.topic not in subscribed and now_ms - base(offset) >= retention_ms]
