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

Share groups' records (types 10 to 15, ``share_records``) have the same layouts, and the same
code (:class:`GroupRecords`) reads and writes both kinds.
"""


import dataclasses
import enum
import io
import struct
import typing
import uuid
from collections.abc import Collection, Mapping
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
class RecordKey:
    """A record's key: its type, the group and, for per-member records, the member. Each
    kind of group has its own subclass, so that a key says which kind it belongs to."""

    type: enum.IntEnum
    group_id: str
    member_id: str | None = None


class ConsumerGroupKey(RecordKey):
    """A consumer group record's key; its type is a :class:`RecordType`."""

    __slots__ = ()


class RecordValue:
    """A record value: version 0, flexible (a kio data entity)."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True


class RecordStruct:
    """A struct inside a record value: an array's element or a nested field."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True


# How the value and struct classes of the records here and in ``share_records`` are made.
record_class = dataclass(frozen=True, slots=True, kw_only=True)


@record_class
class TopicPartitions(RecordStruct):
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})


@record_class
class GroupEpochValue(RecordValue):
    epoch: i32 = field(metadata={"kafka_type": "int32"})


@record_class
class PartitionRacks(RecordStruct):
    partition: i32 = field(metadata={"kafka_type": "int32"})
    racks: tuple[str, ...] = field(metadata={"kafka_type": "string"})


@record_class
class TopicMetadataValue(RecordStruct):
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = field(metadata={"kafka_type": "string"})
    num_partitions: i32 = field(metadata={"kafka_type": "int32"})
    partition_metadata: tuple[PartitionRacks, ...]


@record_class
class SubscriptionMetadataValue(RecordValue):
    topics: tuple[TopicMetadataValue, ...]


@record_class
class ClassicProtocol(RecordStruct):
    name: str = field(metadata={"kafka_type": "string"})
    metadata: bytes = field(metadata={"kafka_type": "bytes"})


@record_class
class ClassicMemberMetadata(RecordStruct):
    session_timeout_ms: i32 = field(metadata={"kafka_type": "int32"})
    supported_protocols: tuple[ClassicProtocol, ...]


@record_class
class MemberSubscriptionValue(RecordValue):
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


@record_class
class TargetAssignmentEpochValue(RecordValue):
    assignment_epoch: i32 = field(metadata={"kafka_type": "int32"})


@record_class
class TargetAssignmentMemberValue(RecordValue):
    topic_partitions: tuple[TopicPartitions, ...]


@record_class
class MemberAssignmentValue(RecordValue):
    """A member's current assignment: a share group member's (type 14) as it is, and the
    first fields of a consumer group member's."""

    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    previous_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    state: i8 = field(metadata={"kafka_type": "int8"})
    assigned_partitions: tuple[TopicPartitions, ...]


@record_class
class CurrentAssignmentValue(MemberAssignmentValue):
    partitions_pending_revocation: tuple[TopicPartitions, ...]


_VALUE_VERSION = 0


class GroupRecords:
    """The keys and values of one kind of group, laid out as the module docstring says:
    ``types`` are its record types (the key versions), ``key`` its key class, built as
    ``key(type, group_id, member_id)``, ``member_keyed`` the types whose key names a member
    after the group, and ``values`` each type's value class. Consumer groups' are
    :data:`CONSUMER_GROUP_RECORDS`, share groups' ``share_records.SHARE_GROUP_RECORDS``."""

    def __init__(self, name: str, types: type[enum.IntEnum], key: type,
                 member_keyed: Collection[enum.IntEnum],
                 values: Mapping[enum.IntEnum, type]) -> None:
        self._name = name
        self._types = types
        self._key = key
        self._member_keyed = frozenset(member_keyed)
        self._values = dict(values)
        self._writers = {t: entity_writer(cls) for t, cls in values.items()}
        self._readers = {t: entity_reader(cls) for t, cls in values.items()}

    # -- keys --------------------------------------------------------------------------

    def is_key(self, version: int) -> bool:
        """Whether a key with this int16 version is one of these record types."""
        return version in self._types._value2member_map_

    def encode_key(self, key) -> bytes:
        out = _INT16.pack(key.type) + _string(key.group_id)
        if key.type in self._member_keyed:
            out += _string(key.member_id or "")
        return out

    def decode_key(self, key: bytes):
        """The key of a record whose int16 version is one of these record types."""
        try:
            (version,) = _INT16.unpack_from(key, 0)
            record_type = self._types(version)
            group_id, position = _read_string(key, 2)
            member_id = None
            if record_type in self._member_keyed:
                member_id, position = _read_string(key, position)
        except (struct.error, ValueError, UnicodeDecodeError) as e:
            raise OffsetsRecordError(f"{self._name} key: {e}") from None
        return self._key(record_type, group_id, member_id)

    # -- values ------------------------------------------------------------------------

    def encode_value(self, record_type: enum.IntEnum, value: object) -> bytes:
        if type(value) is not self._values[record_type]:
            raise TypeError(f"{record_type.name} takes {self._values[record_type].__name__}")
        out = io.BytesIO()
        out.write(_INT16.pack(_VALUE_VERSION))
        self._writers[record_type](out, value)
        return out.getvalue()

    def decode_value(self, record_type: enum.IntEnum, data: bytes) -> object:
        try:
            (version,) = _INT16.unpack_from(data, 0)
            if version != _VALUE_VERSION:
                raise OffsetsRecordError(f"{record_type.name} value version {version}; "
                                         f"this broker reads {_VALUE_VERSION}")
            value, _ = self._readers[record_type](
                memoryview(_without_unknown_tags(self._values[record_type], data)), 2)
        except (struct.error, DecodeError, ValueError, IndexError) as e:
            if isinstance(e, OffsetsRecordError):
                raise
            raise OffsetsRecordError(f"{record_type.name} value: {e}") from None
        return value


CONSUMER_GROUP_RECORDS = GroupRecords(
    "consumer group", RecordType, ConsumerGroupKey, _MEMBER_KEYED, {
        RecordType.GROUP_EPOCH: GroupEpochValue,
        RecordType.SUBSCRIPTION_METADATA: SubscriptionMetadataValue,
        RecordType.MEMBER_SUBSCRIPTION: MemberSubscriptionValue,
        RecordType.TARGET_ASSIGNMENT_EPOCH: TargetAssignmentEpochValue,
        RecordType.TARGET_ASSIGNMENT_MEMBER: TargetAssignmentMemberValue,
        RecordType.CURRENT_ASSIGNMENT: CurrentAssignmentValue,
    })
encode_key = CONSUMER_GROUP_RECORDS.encode_key
decode_key = CONSUMER_GROUP_RECORDS.decode_key
is_consumer_group_key = CONSUMER_GROUP_RECORDS.is_key
encode_value = CONSUMER_GROUP_RECORDS.encode_value
decode_value = CONSUMER_GROUP_RECORDS.decode_value


def _string(value: str) -> bytes:
    encoded = value.encode()
    return _INT16.pack(len(encoded)) + encoded


def _read_string(data: bytes, position: int) -> tuple[str, int]:
    (length,) = _INT16.unpack_from(data, position)
    position += 2
    if length < 0 or position + length > len(data):
        raise ValueError(f"string of {length} bytes at byte {position}")
    return data[position:position + length].decode(), position + length


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
