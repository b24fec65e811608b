"""The records a consumer group (KIP-848) keeps in ``__consumer_offsets``, byte for byte
Kafka's (``ConsumerGroup*Key.json`` and ``*Value.json`` in Kafka's ``group-coordinator``).

A consumer group is not one record, as a classic group is, but a set of keys that each
change on their own, so that one member's heartbeat writes only what it changed:

====  ==========================================  ==============================================
type  key                                         value
====  ==========================================  ==============================================
3     ConsumerGroupMetadataKey (group)            the group epoch
4     ConsumerGroupPartitionMetadataKey (group)   the subscribed topics' ids, names and
                                                  partition counts (what the epoch was bumped
                                                  for)
5     ConsumerGroupMemberMetadataKey (group,      the member's subscription: topic names or a
      member)                                     regular expression, instance id, rack, assignor
6     ConsumerGroupTargetAssignmentMetadataKey    the epoch of the target assignment
      (group)
7     ConsumerGroupTargetAssignmentMemberKey      the member's partitions in the target assignment
      (group, member)
8     ConsumerGroupCurrentMemberAssignmentKey     the member's epoch, state, partitions assigned
      (group, member)                             and partitions it must still revoke
====  ==========================================  ==============================================

A key's version is its type (Kafka's record types share the int16 version slot); keys are not
flexible: an int16 version, then int16-length strings. Values carry their own int16 version
(0) and are flexible: compact strings and arrays, and a tagged-field section; kio writes them
from the dataclasses below as it writes protocol messages. A tombstone (null value) removes
its key: the member left, or the group was deleted.
"""


import dataclasses
import enum
import io
import struct
import typing
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError
from kio.serial.readers import read_unsigned_varint
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32

from odradek.coordinator.group.offsets_topic import OffsetsRecordError

_INT16 = struct.Struct(">h")

# topic id -> partitions, the form of every assignment here.
Partitions = dict[uuid.UUID, frozenset[int]]


class RecordType(enum.IntEnum):
    GROUP_EPOCH = 3
    SUBSCRIPTION_METADATA = 4
    MEMBER_SUBSCRIPTION = 5
    TARGET_ASSIGNMENT_EPOCH = 6
    TARGET_ASSIGNMENT_MEMBER = 7
    CURRENT_ASSIGNMENT = 8


_MEMBER_KEYED = (RecordType.MEMBER_SUBSCRIPTION, RecordType.TARGET_ASSIGNMENT_MEMBER,
                 RecordType.CURRENT_ASSIGNMENT)


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """A consumer group record's key: its type, the group and, for per-member records, the
    member."""

    type: RecordType
    group_id: str
    member_id: str | None = None


class _Value:
    """A record value: version 0, flexible (a kio data entity)."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True


class _Nested:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True


_record = dataclass(frozen=True, slots=True, kw_only=True)


@_record
class TopicPartitions(_Nested):
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})


@_record
class GroupEpochValue(_Value):
    epoch: i32 = field(metadata={"kafka_type": "int32"})


@_record
class PartitionRacks(_Nested):
    partition: i32 = field(metadata={"kafka_type": "int32"})
    racks: tuple[str, ...] = field(metadata={"kafka_type": "string"})


@_record
class TopicMetadataValue(_Nested):
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = field(metadata={"kafka_type": "string"})
    num_partitions: i32 = field(metadata={"kafka_type": "int32"})
    partition_metadata: tuple[PartitionRacks, ...]


@_record
class SubscriptionMetadataValue(_Value):
    topics: tuple[TopicMetadataValue, ...]


@_record
class ClassicProtocol(_Nested):
    name: str = field(metadata={"kafka_type": "string"})
    metadata: bytes = field(metadata={"kafka_type": "bytes"})


@_record
class ClassicMemberMetadata(_Nested):
    session_timeout_ms: i32 = field(metadata={"kafka_type": "int32"})
    supported_protocols: tuple[ClassicProtocol, ...]


@_record
class MemberSubscriptionValue(_Value):
    instance_id: str | None = field(metadata={"kafka_type": "string"})
    rack_id: str | None = field(metadata={"kafka_type": "string"})
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    subscribed_topic_names: tuple[str, ...] = field(metadata={"kafka_type": "string"})
    subscribed_topic_regex: str | None = field(metadata={"kafka_type": "string"})
    rebalance_timeout_ms: i32 = field(metadata={"kafka_type": "int32"})
    server_assignor: str | None = field(metadata={"kafka_type": "string"})
    # Tagged field 0 in Kafka, for members that speak the classic protocol inside a
    # consumer group; odradek writes none, and reads it as Kafka writes it.
    classic_member_metadata: ClassicMemberMetadata | None = field(
        default=None, metadata={"tag": 0})


@_record
class TargetAssignmentEpochValue(_Value):
    assignment_epoch: i32 = field(metadata={"kafka_type": "int32"})


@_record
class TargetAssignmentMemberValue(_Value):
    topic_partitions: tuple[TopicPartitions, ...]


@_record
class CurrentAssignmentValue(_Value):
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    previous_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    state: i8 = field(metadata={"kafka_type": "int8"})
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]


VALUE_CLASSES: dict[RecordType, type] = {
    RecordType.GROUP_EPOCH: GroupEpochValue,
    RecordType.SUBSCRIPTION_METADATA: SubscriptionMetadataValue,
    RecordType.MEMBER_SUBSCRIPTION: MemberSubscriptionValue,
    RecordType.TARGET_ASSIGNMENT_EPOCH: TargetAssignmentEpochValue,
    RecordType.TARGET_ASSIGNMENT_MEMBER: TargetAssignmentMemberValue,
    RecordType.CURRENT_ASSIGNMENT: CurrentAssignmentValue,
}
_VALUE_VERSION = 0
_WRITERS = {t: entity_writer(cls) for t, cls in VALUE_CLASSES.items()}
_READERS = {t: entity_reader(cls) for t, cls in VALUE_CLASSES.items()}


# -- keys ------------------------------------------------------------------------------


def _string(value: str) -> bytes:
    encoded = value.encode()
    return _INT16.pack(len(encoded)) + encoded


def encode_key(key: ConsumerGroupKey) -> bytes:
    out = _INT16.pack(key.type) + _string(key.group_id)
    if key.type in _MEMBER_KEYED:
        out += _string(key.member_id or "")
    return out


def is_consumer_group_key(version: int) -> bool:
    return version in RecordType._value2member_map_


def decode_key(key: bytes) -> ConsumerGroupKey:
    """The key of a record whose int16 version is a consumer group record type."""
    try:
        (version,) = _INT16.unpack_from(key, 0)
        record_type = RecordType(version)
        group_id, position = _read_string(key, 2)
        member_id = None
        if record_type in _MEMBER_KEYED:
            member_id, position = _read_string(key, position)
    except (struct.error, ValueError, UnicodeDecodeError) as e:
        raise OffsetsRecordError(f"consumer group key: {e}") from None
    return ConsumerGroupKey(record_type, group_id, member_id)


def _read_string(data: bytes, position: int) -> tuple[str, int]:
    (length,) = _INT16.unpack_from(data, position)
    position += 2
    if length < 0 or position + length > len(data):
        raise ValueError(f"string of {length} bytes at byte {position}")
    return data[position:position + length].decode(), position + length


# -- values ----------------------------------------------------------------------------


def encode_value(record_type: RecordType, value: object) -> bytes:
    if not isinstance(value, VALUE_CLASSES[record_type]):
        raise TypeError(f"{record_type.name} takes {VALUE_CLASSES[record_type].__name__}")
    out = io.BytesIO()
    out.write(_INT16.pack(_VALUE_VERSION))
    _WRITERS[record_type](out, value)
    return out.getvalue()


def decode_value(record_type: RecordType, data: bytes) -> object:
    try:
        (version,) = _INT16.unpack_from(data, 0)
        if version != _VALUE_VERSION:
            raise OffsetsRecordError(f"{record_type.name} value version {version}; "
                                     f"this broker reads {_VALUE_VERSION}")
        value, _ = _READERS[record_type](
            memoryview(_without_unknown_tags(VALUE_CLASSES[record_type], data)), 2)
    except (struct.error, DecodeError, ValueError, IndexError) as e:
        if isinstance(e, OffsetsRecordError):
            raise
        raise OffsetsRecordError(f"{record_type.name} value: {e}") from None
    return value


# Kafka's fixed-size types here; strings and bytes are compact (unsigned varint length + 1).
_FIXED_SIZES = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uuid": 16}


def _without_unknown_tags(cls: type, data: bytes) -> bytes:
    """The value without the tagged fields its entity (or one of its structs) does not
    declare: kio's reader fails on a tag it does not know, where Kafka skips it (a newer
    Kafka may add tagged fields)."""
    out = bytearray(data[:2])
    _copy_entity(cls, data, 2, out)
    return bytes(out)


def _copy_entity(cls: type, data: bytes, offset: int, out: bytearray) -> int:
    for f in dataclasses.fields(cls):
        if "tag" not in f.metadata:
            offset = _copy_field(f, data, offset, out)
    declared = {f.metadata["tag"] for f in dataclasses.fields(cls) if "tag" in f.metadata}
    kept: list[bytes] = []
    count, size = read_unsigned_varint(data, offset)
    offset += size
    for _ in range(count):
        start = offset
        tag, size = read_unsigned_varint(data, offset)
        offset += size
        length, size = read_unsigned_varint(data, offset)
        offset = _end(data, offset + size + length)
        if tag in declared:
            kept.append(data[start:offset])
    out.append(len(kept))  # at most one per declared tag: a one-byte varint
    out += b"".join(kept)
    return offset


def _copy_field(f: dataclasses.Field, data: bytes, offset: int, out: bytearray) -> int:
    if typing.get_origin(f.type) is not tuple:
        return _copy_value(f.type, f.metadata.get("kafka_type"), data, offset, out)
    count, size = read_unsigned_varint(data, offset)  # compact array: length + 1
    out += data[offset:offset + size]
    offset += size
    element = typing.get_args(f.type)[0]
    for _ in range(count - 1):
        offset = _copy_value(element, f.metadata.get("kafka_type"), data, offset, out)
    return offset


def _copy_value(kind: type, kafka_type: str | None, data: bytes, offset: int,
                out: bytearray) -> int:
    if dataclasses.is_dataclass(kind):
        return _copy_entity(kind, data, offset, out)
    if kafka_type in _FIXED_SIZES:
        end = _end(data, offset + _FIXED_SIZES[kafka_type])
    else:
        length, size = read_unsigned_varint(data, offset)
        end = _end(data, offset + size + max(length - 1, 0))
    out += data[offset:end]
    return end


def _end(data: bytes, end: int) -> int:
    if end > len(data):
        raise ValueError(f"the value ends at byte {len(data)}, before byte {end}")
    return end


def topic_partitions(partitions: Partitions) -> tuple[TopicPartitions, ...]:
    """An assignment as the records (and the heartbeat response) list it: topics in id
    order, partitions ascending."""
    return tuple(TopicPartitions(topic_id=topic_id,
                                 partitions=tuple(i32(p) for p in sorted(parts)))
                 for topic_id, parts in sorted(partitions.items()) if parts)


def partitions_of(listed: tuple[TopicPartitions, ...] | None) -> Partitions:
    result: Partitions = {}
    for entry in listed or ():
        parts = result.get(entry.topic_id, frozenset()) | frozenset(entry.partitions)
        if parts:
            result[entry.topic_id] = parts
    return result
