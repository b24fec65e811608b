"""``GroupMetadataManager``: the groups this coordinator owns, kept in memory and in
``__consumer_offsets`` (Kafka's class of the same name and duty).

Every change that must survive a restart is written to the group's partition of
``__consumer_offsets`` through an injected :class:`OffsetsStore` (the broker's is
:class:`~odradek.coordinator.group.storage.ReplicaTopicStore`, over the replica manager's
append; tests use a list). An append completes through a callback, at once or later
(acks=all waits for the in-sync replicas), and the in-memory state changes only in that
callback, on success, as in Kafka's ``storeGroup`` and ``storeOffsets``. At startup each
partition of the topic led here is replayed from its start: the last record of each key
wins, and a tombstone deletes its offset or group. A group is owned here once its partition
is loaded; a request for any other group gets NOT_COORDINATOR, so the client looks for the
coordinator again (which creates the topic when it does not exist yet, as Kafka does). The
partition's share groups are read with the rest, and handed to the share protocol, which
keeps them (:meth:`GroupMetadataManager.on_share_groups_loaded`).

Offsets of an Empty group expire ``offsets.retention.minutes`` after the group became empty
(KIP-211); offsets of a simple (member-less) group, and of topics a Stable consumer group no
longer subscribes to (KIP-496), ``offsets.retention.minutes`` after their commit. Offsets
of a deleted topic are removed from every group when it is deleted. An Empty group with no
offsets left is removed.

Not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.consumer_group import ConsumerGroup
from odradek.coordinator.group.consumer_records import (
    CONSUMER_GROUP_RECORDS,
    ConsumerGroupKey,
    GroupRecords,
    RecordType,
)
from odradek.coordinator.group.group import (
    CONSUMER_PROTOCOL_TYPE,
    Group,
    JoinGroupResult,
    SyncGroupResult,
)
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
from odradek.coordinator.group.share_group import ShareGroup
from odradek.coordinator.group.share_records import SHARE_GROUP_RECORDS, ShareGroupKey
from odradek.coordinator.group.state import GroupEvent, GroupState
from odradek.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

KeyValue = tuple[bytes, bytes | None]
# Either kind of group: classic (``group.py``) or consumer protocol (``consumer_group.py``).
AnyGroup = Group | ConsumerGroup
# The records that delete a consumer group's own keys (its members are deleted as they go).
_CONSUMER_GROUP_KEYS = (RecordType.TARGET_ASSIGNMENT_EPOCH, RecordType.SUBSCRIPTION_METADATA,
                        RecordType.GROUP_EPOCH)
# The groups kept as sets of keys, by key class: the group class and its records.
_MODERN_GROUPS: dict[type, tuple[type[ConsumerGroup | ShareGroup], GroupRecords]] = {
    ConsumerGroupKey: (ConsumerGroup, CONSUMER_GROUP_RECORDS),
    ShareGroupKey: (ShareGroup, SHARE_GROUP_RECORDS),
}


@dataclass(frozen=True, slots=True)
class TransactionalProducer:
    """Who writes offsets in a transaction (TxnOffsetCommit): the batch carries its
    producer id and epoch, and the partition is verified in (or, with ``add``, added to)
    the transaction of ``transactional_id`` first (KIP-890)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    add: bool = False


@dataclass(frozen=True, slots=True)
class TransactionalRecord:
    """A record of ``__consumer_offsets`` written in a producer's transaction: it counts
    once the producer's COMMIT marker follows."""

    producer_id: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TransactionEnd:
    """A producer's COMMIT or ABORT marker in ``__consumer_offsets``."""

    producer_id: int
    commit: bool


StoredRecord = KeyValue | TransactionalRecord | TransactionEnd

MINUTE_MS = 60_000


# Called once with an append's outcome: ErrorCode.none, or the error code the log gave.
AppendCallback = Callable[[ErrorCode], None]


class OffsetsStore(Protocol):
    """The partitions of ``__consumer_offsets`` as the coordinator needs them."""

    def partition_count(self) -> int | None:
        """The topic's partition count; None while the topic does not exist."""

    def hosted_partitions(self) -> Iterable[int]:
        """The partitions this broker leads."""

    def read(self, partition: int) -> Iterable[StoredRecord]:
        """Every record of the partition, in offset order, and the transaction markers."""

    def append(self, partition: int, records: Sequence[KeyValue],
               callback: AppendCallback, producer: TransactionalProducer | None = None
               ) -> None:
        """Appends the records as one batch (in ``producer``'s transaction if given),
        durably as acks=-1 would, and calls ``callback`` with the outcome, during the call
        or later. The callbacks of one
        partition's appends are called in the order of the appends (the high watermark
        passes them in that order), which the in-memory state relies on."""


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
        self.groups: dict[str, AnyGroup] = {}
        self._partition_count: int | None = None
        self._loaded: set[int] = set()
        # Producer id -> the groups holding its pending transactional offsets (Kafka's
        # ``openGroupsForProducer``), so that a marker touches those groups only.
        self._groups_of_producer: dict[int, set[str]] = {}

    # -- ownership -------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int | None:
        if self._partition_count is None:
            return None
        return partition_for(group_id, self._partition_count)

    def is_coordinator_for(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self._loaded

    def load(self) -> None:
        """Loads the partitions led here that are not loaded yet (at startup). Idempotent."""
        for partition in self._store.hosted_partitions():
            self.load_partition(partition)

    def load_partition(self, partition: int) -> None:
        """Kafka's ``loadGroupsForPartition``: this broker became the partition's leader, so
        it coordinates the partition's groups from now on. Idempotent."""
        count = self._store.partition_count()
        if count is None or partition in self._loaded:
            return
        self._partition_count = count
        self._load_partition(partition)
        self._loaded.add(partition)

    def unload_partition(self, partition: int) -> list[Group]:
        """Kafka's ``removeGroupsForPartition``: the partition's leadership moved away; its
        groups are forgotten here and returned so that waiting members can be told."""
        if partition not in self._loaded:
            return []
        self._loaded.discard(partition)
        groups = [group for group_id, group in self.groups.items()
                  if self.partition_for(group_id) == partition]
        for group in groups:
            self._forget(group)
        log.info("unloaded __consumer_offsets-%d (%d groups)", partition, len(groups))
        return groups

    def _load_partition(self, partition: int) -> None:
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        stored_groups: dict[str, StoredGroup | None] = {}
        consumer_groups: dict[str, ConsumerGroup] = {}
        share_groups: dict[str, ShareGroup] = {}
        # Offsets of transactions not ended (yet) where the replay is: producer id ->
        # group -> offsets.
        pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
        now_ms = self._clock()
        for stored in self._store.read(partition):
            match stored:
                case TransactionEnd(producer_id, commit):
                    for group_id, group_offsets in pending.pop(producer_id, {}).items():
                        if commit:
                            offsets.setdefault(group_id, {}).update(group_offsets)
                    continue
                case TransactionalRecord(producer_id, key, value):
                    target = pending.setdefault(producer_id, {})
                case (key, value):
                    target = offsets
            try:
                match _decode_key(key):
                    case OffsetKey(group_id, tp):
                        group_offsets = target.setdefault(group_id, {})
                        if value is None:
                            group_offsets.pop(tp, None)
                        else:
                            group_offsets[tp] = decode_offset_commit_value(value)
                    case GroupKey(group_id):
                        stored_groups[group_id] = (None if value is None
                                                   else decode_group_metadata_value(value))
                    case ConsumerGroupKey() as group_key:
                        _replay(consumer_groups, group_key, value, now_ms)
                    case ShareGroupKey() as group_key:
                        _replay(share_groups, group_key, value, now_ms)
            except (OffsetsRecordError, UnicodeDecodeError) as e:
                log.warning("__consumer_offsets-%d: skipping a record: %s", partition, e)
        pending_groups = {group_id for groups in pending.values() for group_id in groups}
        consumer_groups = {g: group for g, group in consumer_groups.items() if not group.removed}
        for group_id in (stored_groups.keys() | offsets.keys() | pending_groups
                         | consumer_groups.keys()):
            stored = stored_groups.get(group_id)
            group_offsets = offsets.get(group_id, {})
            if (stored is None and not group_offsets and group_id not in pending_groups
                    and group_id not in consumer_groups):
                continue
            # A group changing protocol deletes its old records first, so at most one kind
            # is left; offsets without a group record belong to a simple group that only
            # commits.
            group: AnyGroup
            if group_id in consumer_groups:
                group = consumer_groups[group_id]
                self.on_consumer_group_loaded(group)
            elif stored is None:
                group = Group(group_id, GroupState.EMPTY, now_ms)
            else:
                group = Group.loaded(group_id, stored, now_ms)
            group.offsets = group_offsets
            group.pending_txn_offsets = {
                producer_id: groups[group_id] for producer_id, groups in pending.items()
                if group_id in groups}
            for producer_id in group.pending_txn_offsets:
                self._groups_of_producer.setdefault(producer_id, set()).add(group_id)
            self.groups[group_id] = group
        self.on_share_groups_loaded(partition, [group for group in share_groups.values()
                                                if not group.removed])
        log.info("loaded __consumer_offsets-%d", partition)

    def on_consumer_group_loaded(self, group: ConsumerGroup) -> None:
        """Set by the coordinator: a consumer group read from the log starts its members'
        sessions."""

    def on_share_groups_loaded(self, partition: int, groups: list[ShareGroup]) -> None:
        """Set by the coordinator: the share groups read from a partition's log replace the
        partition's share groups in memory, and start their members' sessions."""

    def reload_partition(self, partition: int) -> None:
        """Memory and the log disagree (an append failed after its records were applied):
        the partition's groups are read again from the log."""
        if partition not in self._loaded:
            return
        log.warning("__consumer_offsets-%d: reloading its groups after a failed write",
                    partition)
        unloaded = self.unload_partition(partition)
        for group in unloaded:
            group.pending_offset_commits = 0
        send_away(unloaded)
        self.load_partition(partition)

    def unload_all(self) -> list[Group]:
        """Forgets every group (broker shutdown); returns them so waiting members can be told."""
        groups = [group for partition in sorted(self._loaded)
                  for group in self.unload_partition(partition)]
        self._partition_count = None
        return groups

    # -- writes ----------------------------------------------------------------------------

    def _append(self, group_id: str, records: Sequence[KeyValue],
                callback: AppendCallback) -> None:
        partition = self.partition_for(group_id)
        if partition is None:
            callback(ErrorCode.not_coordinator)
        else:
            self._store.append(partition, records, callback)

    def store_group(self, group: Group, assignments: dict[str, bytes],
                    callback: AppendCallback) -> None:
        """Writes the group's membership with these assignments (GroupMetadataValue);
        ``callback`` gets ErrorCode.none or the error the members are to see."""
        generation_id = group.generation_id

        def stored(error: ErrorCode) -> None:
            if error is not ErrorCode.none:
                log.warning("group %s: storing generation %d failed: %s",
                            group.group_id, generation_id, error.name)
            callback(group_store_error(error))

        self._append(group.group_id, [(group_metadata_key(group.group_id),
                                       group_metadata_value(group.stored(assignments)))],
                     stored)

    def append_consumer_group_records(
            self, group: ConsumerGroup | ShareGroup,
            changes: Sequence[tuple[ConsumerGroupKey | ShareGroupKey | bytes, object | None]],
            callback: AppendCallback) -> None:
        """Writes records of a consumer or share group already applied to ``group`` in
        memory; if the write fails the partition is read again from the log, which undoes
        them. ``callback`` gets the error the member is to see, at once if there is nothing
        to write."""
        if not changes:
            callback(ErrorCode.none)
            return
        records = [(key, None) if isinstance(key, bytes) else _encoded(key, value)
                   for key, value in changes]
        partition = self.partition_for(group.group_id)

        def written(error: ErrorCode) -> None:
            if error is not ErrorCode.none:
                log.warning("group %s: writing %d records failed: %s", group.group_id,
                            len(records), error.name)
                if partition is not None:
                    self.reload_partition(partition)
            callback(group_store_error(error))

        self._append(group.group_id, records, written)

    def convert_to_consumer_group(self, classic: Group
                                  ) -> tuple[ConsumerGroup, list[tuple[bytes, None]]]:
        """An empty classic group becomes a consumer group with its offsets (Kafka's online
        upgrade); returns it and the tombstone of the classic group's record, to be written
        with the new group's first records."""
        group = ConsumerGroup(classic.group_id, self._clock())
        self._move_offsets(classic, group)
        self.groups[group.group_id] = group
        tombstones = ([(group_metadata_key(classic.group_id), None)]
                      if classic.generation_id > 0 else [])
        return group, tombstones

    def convert_to_classic_group(self, consumer: ConsumerGroup,
                                 callback: AppendCallback) -> Group:
        """An empty consumer group becomes a classic group with its offsets (Kafka's online
        downgrade): the consumer group's records are deleted. The classic group is in memory
        at once; ``callback`` gets the outcome of the write."""
        group = Group(consumer.group_id, GroupState.EMPTY, self._clock())
        self._move_offsets(consumer, group)
        self.groups[group.group_id] = group
        consumer.removed = True
        self.append_consumer_group_records(
            consumer, [(ConsumerGroupKey(t, consumer.group_id), None)
                       for t in _CONSUMER_GROUP_KEYS], callback)
        return group

    def _move_offsets(self, source: AnyGroup, target: AnyGroup) -> None:
        # Commits in flight complete on the source (their callbacks hold it), into the offsets
        # both share; their count stays there, or the target could never be removed.
        target.offsets = source.offsets
        target.pending_txn_offsets = source.pending_txn_offsets
        source.transition(GroupEvent.GROUP_REMOVED, self._clock())

    def store_offsets(self, group: AnyGroup,
                      offsets: dict[TopicPartition, tuple[int, int, str | None]],
                      callback: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        """Commits (offset, leader epoch, metadata) per partition, all in one batch;
        ``callback`` gets each partition's error. The offsets reach memory, and OffsetFetch,
        once written (Kafka's ``putCacheCallback``)."""
        valid, errors = self._valid_offsets(offsets)
        if not valid:
            callback(errors)
            return
        group.pending_offset_commits += 1

        def stored(error: ErrorCode) -> None:
            group.pending_offset_commits -= 1
            if error is ErrorCode.none:
                group.offsets.update(valid)
            callback(errors | {tp: offset_store_error(error) for tp in valid})

        self._append(group.group_id, [(offset_commit_key(group.group_id, tp),
                                       offset_commit_value(o)) for tp, o in valid.items()],
                     stored)

    def store_txn_offsets(self, group: AnyGroup, producer: TransactionalProducer,
                          offsets: dict[TopicPartition, tuple[int, int, str | None]],
                          callback: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        """TxnOffsetCommit: the offsets are written in ``producer``'s transaction and
        pend until its marker: a COMMIT makes them the group's, an ABORT drops them
        (:meth:`complete_transaction`)."""
        valid, errors = self._valid_offsets(offsets)
        if not valid:
            callback(errors)
            return

        def stored(error: ErrorCode) -> None:
            if error is ErrorCode.none:
                group.pending_txn_offsets.setdefault(producer.producer_id, {}).update(valid)
                self._groups_of_producer.setdefault(producer.producer_id, set()).add(
                    group.group_id)
            callback(errors | {tp: offset_store_error(error) for tp in valid})

        partition = self.partition_for(group.group_id)
        if partition is None:
            stored(ErrorCode.not_coordinator)
            return
        self._store.append(partition, [(offset_commit_key(group.group_id, tp),
                                        offset_commit_value(o)) for tp, o in valid.items()],
                           stored, producer)

    def complete_transaction(self, producer_id: int, partitions: Iterable[int],
                             commit: bool) -> None:
        """A transaction's marker is in these partitions of ``__consumer_offsets``: the
        offsets its producer committed in them take effect (COMMIT) or are dropped."""
        ended = set(partitions) & self._loaded
        waiting = self._groups_of_producer.get(producer_id, set())
        for group_id in [g for g in waiting if self.partition_for(g) in ended]:
            waiting.discard(group_id)
            group = self.groups.get(group_id)
            offsets = group.pending_txn_offsets.pop(producer_id, None) if group else None
            if offsets and commit:
                group.offsets.update(offsets)
        if not waiting:
            self._groups_of_producer.pop(producer_id, None)

    def unstable_partitions(self, group_id: str) -> set[TopicPartition]:
        group = self.groups.get(group_id)
        return group.unstable_partitions() if group is not None else set()

    def _valid_offsets(self, offsets: dict[TopicPartition, tuple[int, int, str | None]]
                       ) -> tuple[dict[TopicPartition, OffsetAndMetadata],
                                  dict[TopicPartition, ErrorCode]]:
        """The offsets to write, and the error of each one refused (metadata too large)."""
        now_ms = self._clock()
        max_metadata = self._config("offset.metadata.max.bytes")
        errors: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            if metadata is not None and len(metadata) > max_metadata:
                errors[tp] = ErrorCode.offset_metadata_too_large
            else:
                valid[tp] = OffsetAndMetadata(offset, leader_epoch, metadata or "", now_ms)
        return valid, errors

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets, None where nothing is committed; ``partitions=None``: all."""
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_(GroupState.DEAD) else {}
        if partitions is None:
            return dict(offsets)
        return {tp: offsets.get(tp) for tp in partitions}

    def remove_groups(self, groups: list[AnyGroup],
                      callback: Callable[[dict[str, ErrorCode]], None]) -> None:
        """Deletes groups with their offsets: tombstones, then gone from memory. ``callback``
        gets each group's error once every group's tombstones are written."""
        if not groups:
            callback({})
            return
        results: dict[str, ErrorCode] = {}
        remaining = len(groups)

        def removed(group: AnyGroup, error: ErrorCode) -> None:
            nonlocal remaining
            results[group.group_id] = group_store_error(error)
            remaining -= 1
            if remaining == 0:
                callback(results)

        for group in groups:
            self._remove(group, list(group.offsets), remove_group=True,
                         callback=functools.partial(removed, group))

    def remove_offsets(self, group: AnyGroup, partitions: list[TopicPartition],
                       callback: AppendCallback) -> None:
        """OffsetDelete: tombstones, then gone from memory; ``callback`` gets the error the
        client is to see."""
        self._remove(group, partitions, remove_group=False,
                     callback=lambda error: callback(offset_store_error(error)))

    def _remove(self, group: AnyGroup, partitions: list[TopicPartition], *, remove_group: bool,
                callback: AppendCallback) -> None:
        """Writes tombstones for the group's offsets of ``partitions``, and for the group's
        record if ``remove_group``. Once they are written the offsets leave memory, and the
        group too if it is still Empty without offsets: a member may have joined, or a
        commit been appended after the tombstones, while they were written (Kafka keeps a
        group with pending commits the same way)."""
        records: list[KeyValue] = [(offset_commit_key(group.group_id, tp), None)
                                   for tp in partitions]
        # A group that never had a generation only committed offsets: it has no group record
        # to delete (Kafka skips the tombstone for generation 0 too).
        if remove_group and isinstance(group, ConsumerGroup):
            records += [(CONSUMER_GROUP_RECORDS.encode_key(ConsumerGroupKey(t, group.group_id)),
                         None) for t in _CONSUMER_GROUP_KEYS]
        elif remove_group and group.generation_id > 0:
            records.append((group_metadata_key(group.group_id), None))

        def written(error: ErrorCode) -> None:
            if error is not ErrorCode.none:
                log.warning("group %s: writing tombstones failed: %s", group.group_id,
                            error.name)
            else:
                for tp in partitions:
                    group.offsets.pop(tp, None)
                if remove_group and group.is_(GroupState.EMPTY) and not group.has_offsets():
                    self._forget(group)
            callback(error)

        if records:
            self._append(group.group_id, records, written)
        else:
            written(ErrorCode.none)

    def _forget(self, group: AnyGroup) -> None:
        group.transition(GroupEvent.GROUP_REMOVED, self._clock())
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        for producer_id in group.pending_txn_offsets:
            self._groups_of_producer.get(producer_id, set()).discard(group.group_id)

    # -- retention and deleted topics ------------------------------------------------------

    def remove_expired_offsets(self) -> int:
        """Offsets past ``offsets.retention.minutes``; returns how many expired."""
        now_ms = self._clock()
        retention_ms = self._config("offsets.retention.minutes") * MINUTE_MS
        return self._cleanup(lambda group: _expired_offsets(group, now_ms, retention_ms))

    def remove_offsets_of_deleted_partitions(self, partitions: Iterable[TopicPartition]) -> int:
        """Kafka's ``onPartitionsDeleted``: every group forgets its offsets of a deleted
        topic's partitions, so a topic created again under the same name starts without
        them. Returns how many were found."""
        deleted = frozenset(partitions)
        return self._cleanup(lambda group: [tp for tp in group.offsets if tp in deleted])

    def _cleanup(self, select: Callable[[AnyGroup], list[TopicPartition]]) -> int:
        """Kafka's ``cleanupGroupMetadata``: the offsets ``select`` picks in each group, then
        Empty groups left with none. They leave memory once their tombstones are written; a
        group whose tombstones cannot be written keeps those offsets, in memory as in the
        log, until a later retention check removes them. Returns how many offsets were
        submitted for removal."""
        removed_count = 0
        for group in list(self.groups.values()):
            removed = select(group)
            remove_group = (group.is_(GroupState.EMPTY) and not group.pending_offset_commits
                            and not (group.offsets.keys() - removed))
            if not removed and not remove_group:
                continue
            # A failure is logged; the next check writes the tombstones again.
            self._remove(group, removed, remove_group=remove_group, callback=lambda _: None)
            removed_count += len(removed)
        return removed_count


def send_away(groups: Iterable[AnyGroup]) -> None:
    """Groups no longer coordinated from memory: classic members waiting for a JoinGroup or
    SyncGroup response are told to find the coordinator again; consumer-protocol members
    learn it from their next heartbeat."""
    for group in groups:
        if isinstance(group, ConsumerGroup):
            continue
        for member in group.members.values():
            member.respond_join(JoinGroupResult(ErrorCode.not_coordinator, member.member_id))
            member.respond_sync(SyncGroupResult(ErrorCode.not_coordinator))


def _decode_key(key: bytes) -> OffsetKey | GroupKey | ConsumerGroupKey | ShareGroupKey:
    """Any key of the topic: a consumer group's (types 3 to 8), a share group's (10 to 15)
    or a classic one's."""
    if len(key) >= 2:
        version = int.from_bytes(key[:2], "big")
        for _, records in _MODERN_GROUPS.values():
            if records.is_key(version):
                return records.decode_key(key)
    return decode_key(key)


def _replay(groups: dict, key: ConsumerGroupKey | ShareGroupKey, value: bytes | None,
            now_ms: int) -> None:
    """Applies a record of a consumer or share group to its group in ``groups``: a new one
    if there is none yet, or if the last one was deleted."""
    kind, records = _MODERN_GROUPS[type(key)]
    group = groups.get(key.group_id)
    if group is None or group.removed:
        group = groups[key.group_id] = kind(key.group_id, now_ms)
    group.replay(key, None if value is None else records.decode_value(key.type, value), now_ms)


def _encoded(key: ConsumerGroupKey | ShareGroupKey, value: object | None) -> KeyValue:
    _, records = _MODERN_GROUPS[type(key)]
    encoded = None if value is None else records.encode_value(key.type, value)
    return records.encode_key(key), encoded


def _expired_offsets(group: AnyGroup, now_ms: int, retention_ms: int) -> list[TopicPartition]:
    """GroupMetadata.removeExpiredOffsets: which base time counts depends on the group."""
    subscribed: frozenset[str] = frozenset()
    if group.protocol_type is not None and group.is_(GroupState.EMPTY):
        # Counted from when the group became empty (KIP-211), not from each commit.
        def base(_: OffsetAndMetadata) -> int:
            return group.state_timestamp_ms
    elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None
          and (group.is_(GroupState.STABLE) or isinstance(group, ConsumerGroup))):
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
