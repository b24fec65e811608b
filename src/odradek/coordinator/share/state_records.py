"""``__share_group_state``: the durable state of share-partitions (KIP-932), byte for byte
Kafka's, and how its records combine into the current state.

A share-partition is one share group's progress on one topic partition: its start offset
(SPSO: every record below it is done with) and, above it, the records delivered but not yet
done with, as batches of consecutive offsets sharing a delivery state and a delivery count.
The share coordinator keeps that in ``__share_group_state``, in the partition
``Utils.abs(key.hashCode()) % partitionCount`` of the coordinator key
``"<group>:<topic id>:<partition>"``, with Java's ``String.hashCode`` (the rule of
``__consumer_offsets``) and the topic id as Kafka prints it (base64url without padding).

It writes two kinds of records. A *snapshot* holds the whole state. An *update* holds only
what changed (a new start offset, or -1 when it did not move, and the batches that changed);
it is combined into the state before it. Replaying the log is therefore: a snapshot replaces
the state, each later update is combined into it (:func:`apply_update`). Kafka writes
updates and, every so many, a fresh snapshot, and keeps the topic uncompacted
(``cleanup.policy=delete``): a key's record type is part of the key, so compaction would
keep only a partition's last update. odradek's coordinator writes snapshots only, so its
topic is compacted; it reads Kafka's updates all the same.

Combining is Kafka's (``PersisterStateBatchCombiner``): batches below the start offset are
dropped and a batch across it is cut; where batches overlap, the one with the higher delivery
count wins, on equal counts the higher state (Archived over Acknowledged over Available);
neighbours with the same state and count become one batch. For what a share-partition writes
this is "the later batch wins", since an offset's delivery count never goes down and, within
one delivery, its state only moves on from Available; deciding by priority rather than by
order also makes a replayed update harmless.

Keys, ShareSnapshotKey and ShareUpdateKey: one layout, told apart by the int16 in front,
which is the key schema's version slot and serves as the record type (as in the group
coordinator's records). Not flexible::

    type       int16   0 snapshot, 1 update
    groupId    string  int16 length, UTF-8
    topicId    uuid    16 bytes
    partition  int32

Value, ShareSnapshotValue version 0, flexible: a compact array is an unsigned varint of its
length + 1, then its elements; each struct, array elements included, ends with its tagged
fields (none here: one 0 byte)::

    version         int16   0
    snapshotEpoch   uint16  bumped by each new snapshot; an update carries its snapshot's
    stateEpoch      int32   bumped when the state starts over (its offsets were reset)
    leaderEpoch     int32   of the share-partition's leader that wrote it
    startOffset     int64   SPSO
    stateBatches    compact array, per batch:
      firstOffset     int64
      lastOffset      int64
      deliveryState   int8    0 Available, 2 Acknowledged, 4 Archived
      deliveryCount   int16
      tagged fields
    tagged fields

Value, ShareUpdateValue version 0: the same without ``stateEpoch``; ``startOffset`` and
``leaderEpoch`` are -1 when unchanged. Group "g", topic id 00 01 .. 0f, partition 3 has the
snapshot key ``00 00 | 00 01 67 | 00 01 02 .. 0f | 00 00 00 03``; its update key starts
``00 01``. Both values are read and written with kio, from the entities below.
"""

# No ``from __future__ import annotations``: kio reads the field types of the entities below.

import enum
import io
import struct
import uuid
from base64 import urlsafe_b64encode
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import ClassVar, TypeVar

from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64, u16

from odradek.coordinator.group import offsets_topic

_VALUE_VERSION = 0
# The start offset or leader epoch of an update that leaves it as it was.
UNCHANGED = -1

_INT16 = struct.Struct(">h")

_E = TypeVar("_E")


class ShareStateRecordError(ValueError):
    """A record of ``__share_group_state`` this broker cannot read."""


class RecordType(enum.IntEnum):
    """A key's int16 prefix: which record it is."""

    SNAPSHOT = 0
    UPDATE = 1


class RecordState(enum.IntEnum):
    """A record's state in a share-partition, by Kafka's ids, which are also a state batch's
    ``deliveryState``. ACQUIRED is never written: an acquisition does not outlive the
    share-partition's leader."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


PERSISTED_STATES = frozenset({RecordState.AVAILABLE, RecordState.ACKNOWLEDGED,
                              RecordState.ARCHIVED})


@dataclass(frozen=True, slots=True)
class StateBatch:
    """Offsets ``first_offset..last_offset``, all in one state, all delivered as often."""

    first_offset: int
    last_offset: int
    delivery_state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareState:
    """A share-partition's durable state: offsets from ``start_offset`` on that no batch
    covers are Available and were never delivered."""

    state_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    """A snapshot record's value: the whole state."""

    snapshot_epoch: int
    leader_epoch: int
    state: ShareState


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    """An update record's value: what changed since the state before it."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    @property
    def coordinator_key(self) -> str:
        """Kafka's ``SharePartitionKey.asCoordinatorKey``."""
        topic_id = urlsafe_b64encode(self.topic_id.bytes).rstrip(b"=").decode()
        return f"{self.group_id}:{topic_id}:{self.partition}"


def partition_for(key: ShareStateKey, partition_count: int) -> int:
    """Kafka's ``Utils.abs(key.asCoordinatorKey().hashCode()) % partitionCount``."""
    return offsets_topic.partition_for(key.coordinator_key, partition_count)


# -- the schemas, as kio entities -------------------------------------------------------


class _Key:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False


class _Value:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(_VALUE_VERSION)
    __flexible__: ClassVar[bool] = True


class _Nested:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(_VALUE_VERSION)
    __flexible__: ClassVar[bool] = True


_entity = dataclass(frozen=True, slots=True, kw_only=True)


@_entity
class _KeyFields(_Key):
    group_id: str = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partition: i32 = field(metadata={"kafka_type": "int32"})


@_entity
class _StateBatch(_Nested):
    first_offset: i64 = field(metadata={"kafka_type": "int64"})
    last_offset: i64 = field(metadata={"kafka_type": "int64"})
    delivery_state: i8 = field(metadata={"kafka_type": "int8"})
    delivery_count: i16 = field(metadata={"kafka_type": "int16"})


@_entity
class _SnapshotValue(_Value):
    snapshot_epoch: u16 = field(metadata={"kafka_type": "uint16"})
    state_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    start_offset: i64 = field(metadata={"kafka_type": "int64"})
    state_batches: tuple[_StateBatch, ...]


@_entity
class _UpdateValue(_Value):
    snapshot_epoch: u16 = field(metadata={"kafka_type": "uint16"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    start_offset: i64 = field(metadata={"kafka_type": "int64"})
    state_batches: tuple[_StateBatch, ...]


_VALUE_ENTITIES: dict[RecordType, type] = {
    RecordType.SNAPSHOT: _SnapshotValue,
    RecordType.UPDATE: _UpdateValue,
}


def _write(version: int, entity: object) -> bytes:
    out = io.BytesIO()
    out.write(_INT16.pack(version))
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def _read(data: bytes, entity_type: type[_E], what: str) -> tuple[int, _E]:
    """The int16 in front and the entity after it."""
    try:
        (version,) = _INT16.unpack_from(data, 0)
        entity, _ = entity_reader(entity_type)(memoryview(data), _INT16.size)
    except (struct.error, DecodeError, UnicodeDecodeError) as e:
        raise ShareStateRecordError(f"{what}: {e!r}") from None
    return version, entity


# -- keys ------------------------------------------------------------------------------


def encode_key(record_type: RecordType, key: ShareStateKey) -> bytes:
    return _write(record_type, _KeyFields(group_id=key.group_id, topic_id=key.topic_id,
                                          partition=i32(key.partition)))


def decode_key(data: bytes) -> tuple[RecordType, ShareStateKey]:
    try:
        (version,) = _INT16.unpack_from(data, 0)
        record_type = RecordType(version)
    except (struct.error, ValueError):
        raise ShareStateRecordError(f"not a share state key: {bytes(data[:2]).hex()}") from None
    _, fields = _read(data, _KeyFields, f"{record_type.name} key")
    if fields.topic_id is None:  # kio reads the zero uuid, which no topic has, as None
        raise ShareStateRecordError(f"{record_type.name} key with the zero topic id")
    return record_type, ShareStateKey(fields.group_id, fields.topic_id, fields.partition)


# -- values ----------------------------------------------------------------------------


def _wire_batches(batches: Iterable[StateBatch]) -> tuple[_StateBatch, ...]:
    return tuple(_StateBatch(first_offset=i64(b.first_offset), last_offset=i64(b.last_offset),
                             delivery_state=i8(b.delivery_state),
                             delivery_count=i16(b.delivery_count))
                 for b in batches)


def _state_batch(wire: _StateBatch) -> StateBatch:
    try:
        state = RecordState(wire.delivery_state)
    except ValueError:
        state = None
    if state not in PERSISTED_STATES:
        raise ShareStateRecordError(f"delivery state {wire.delivery_state} is not written")
    return StateBatch(wire.first_offset, wire.last_offset, state, wire.delivery_count)


def encode_snapshot(snapshot: ShareSnapshot) -> bytes:
    state = snapshot.state
    return _write(_VALUE_VERSION, _SnapshotValue(
        snapshot_epoch=u16(snapshot.snapshot_epoch), state_epoch=i32(state.state_epoch),
        leader_epoch=i32(snapshot.leader_epoch), start_offset=i64(state.start_offset),
        state_batches=_wire_batches(state.batches)))


def encode_update(update: ShareUpdate) -> bytes:
    return _write(_VALUE_VERSION, _UpdateValue(
        snapshot_epoch=u16(update.snapshot_epoch), leader_epoch=i32(update.leader_epoch),
        start_offset=i64(update.start_offset), state_batches=_wire_batches(update.batches)))


def decode_value(record_type: RecordType, data: bytes) -> ShareSnapshot | ShareUpdate:
    """The value of a record whose key has ``record_type``."""
    version, value = _read(data, _VALUE_ENTITIES[record_type], f"{record_type.name} value")
    if version != _VALUE_VERSION:
        raise ShareStateRecordError(
            f"{record_type.name} value version {version}; this broker reads {_VALUE_VERSION}")
    batches = tuple(_state_batch(b) for b in value.state_batches)
    if record_type is RecordType.SNAPSHOT:
        return ShareSnapshot(value.snapshot_epoch, value.leader_epoch,
                             ShareState(value.state_epoch, value.start_offset, batches))
    return ShareUpdate(value.snapshot_epoch, value.leader_epoch, value.start_offset, batches)


# -- combining -------------------------------------------------------------------------


def apply_update(snapshot: ShareSnapshot, update: ShareUpdate) -> ShareSnapshot:
    """The state after ``update`` (Kafka's ``ShareCoordinatorShard.merge``): the snapshot
    epoch and state epoch stay; a start offset or leader epoch of -1 leaves it as it was."""
    state = snapshot.state
    start_offset = state.start_offset if update.start_offset == UNCHANGED else update.start_offset
    leader_epoch = (snapshot.leader_epoch if update.leader_epoch == UNCHANGED
                    else update.leader_epoch)
    batches = combine_batches((*state.batches, *update.batches), start_offset)
    return replace(snapshot, leader_epoch=leader_epoch,
                   state=replace(state, start_offset=start_offset, batches=batches))


def combine(snapshot: ShareSnapshot, updates: Iterable[ShareUpdate]) -> ShareSnapshot:
    """A snapshot and the updates written after it, replayed: the current state."""
    for update in updates:
        snapshot = apply_update(snapshot, update)
    return snapshot


def _priority(batch: StateBatch) -> tuple[int, int]:
    return batch.delivery_count, batch.delivery_state


def combine_batches(batches: Iterable[StateBatch], start_offset: int) -> tuple[StateBatch, ...]:
    """Batches that may overlap as non-overlapping ones in offset order: those below
    ``start_offset`` dropped, the highest priority winning each offset (the module's
    docstring), alike neighbours merged, offsets no batch covers left uncovered.

    A sweep over the batches' edges: between two edges the same batches cover every offset,
    so one of them wins the whole stretch."""
    edges: dict[int, list[tuple[int, StateBatch]]] = {}
    for batch in batches:
        first = max(batch.first_offset, start_offset)
        if first <= batch.last_offset:
            edges.setdefault(first, []).append((1, batch))
            edges.setdefault(batch.last_offset + 1, []).append((-1, batch))
    covering: Counter[tuple[int, int]] = Counter()
    combined: list[StateBatch] = []
    for offset, next_offset in pairwise(sorted(edges)):
        for change, batch in edges[offset]:
            priority = _priority(batch)
            covering[priority] += change
            if not covering[priority]:
                del covering[priority]
        if covering:
            count, state = max(covering)
            _append(combined, StateBatch(offset, next_offset - 1, RecordState(state), count))
    return tuple(combined)


def _append(batches: list[StateBatch], batch: StateBatch) -> None:
    """Appends ``batch``, merged into the last one if it continues it alike."""
    if batches:
        last = batches[-1]
        if (last.last_offset + 1 == batch.first_offset
                and _priority(last) == _priority(batch)):
            batches[-1] = replace(last, last_offset=batch.last_offset)
            return
    batches.append(batch)
