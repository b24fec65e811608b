"""``__consumer_offsets``: which partition holds a group, and its records, byte for byte.

Kafka's tools (``kafka-console-consumer --formatter OffsetsMessageFormatter``, lag
exporters reading the topic) and Kafka itself agree with odradek on both:

* a group lives in partition ``Utils.abs(groupId.hashCode()) % partitionCount``, with Java's
  ``String.hashCode`` (over UTF-16 code units, wrapping at 32 bits) and Kafka's ``abs``
  (``Integer.MIN_VALUE`` maps to 0);
* keys and values are Kafka's schemas (``OffsetCommitKey.json`` and friends in Kafka's
  ``group-coordinator`` module), each prefixed by its int16 version. kio does not ship
  these record schemas, so they are written here with ``struct``. All integers are
  big-endian; a ``string`` is an int16 length and UTF-8 bytes, a nullable string has
  length -1 for null; ``bytes`` is an int32 length and the bytes.

Key, OffsetCommitKey version 1: one partition's committed offset::

    version    int16   1
    group      string
    topic      string
    partition  int32

Value, OffsetCommitValue version 3::

    version          int16   3
    offset           int64
    leaderEpoch      int32   -1 when the client did not say
    metadata         string  the client's, "" when none
    commitTimestamp  int64   ms, the coordinator's clock

Key, GroupMetadataKey version 2: a group's membership::

    version  int16   2
    group    string

Value, GroupMetadataValue version 3::

    version                int16   3
    protocolType           string  "consumer", "connect", ... ("" for none)
    generation             int32
    protocol               nullable string   the selected protocol (assignor)
    leader                 nullable string   the leader's member id
    currentStateTimestamp  int64   ms of the last state change (offset retention counts
                                   from the moment an Empty group became empty)
    members                int32 count, then per member:
      memberId             string
      groupInstanceId      nullable string   KIP-345 static membership
      clientId             string
      clientHost           string
      rebalanceTimeout     int32   ms
      sessionTimeout       int32   ms
      subscription         bytes   the member's metadata for the selected protocol
      assignment           bytes   what the leader assigned it

A record with a null value (a tombstone) deletes its key's offset or group; the topic is
compacted, so the last record of each key is the state. For example, group "g" committing
offset 42 of "t" partition 0 writes the key ``00 01 | 00 01 67 | 00 01 74 | 00 00 00 00``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.protocol.topic_partition import TopicPartition

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3
# Key versions 0 and 1 share the OffsetCommitKey layout (Kafka reads both).
_OFFSET_COMMIT_KEY_VERSIONS = (0, 1)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class OffsetsRecordError(ValueError):
    """A record of ``__consumer_offsets`` this broker cannot read."""


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset (Kafka's ``OffsetAndMetadata``)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class StoredGroup:
    """A group's membership as written at the end of each rebalance."""

    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int
    members: tuple[StoredMember, ...]


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    topic_partition: TopicPartition


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units,
    as a signed 32-bit int."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partition_count: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % groupMetadataTopicPartitionCount``."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % partition_count


def offsets_topic_configs(config: Callable[[str], Any]) -> dict[str, str]:
    """The topic configs Kafka creates ``__consumer_offsets`` with
    (``GroupMetadataManager.offsetsTopicConfigs``)."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(config("offsets.topic.segment.bytes")),
    }


# -- encoding --------------------------------------------------------------------------


class _Writer:
    def __init__(self, version: int) -> None:
        self.out = bytearray(_INT16.pack(version))

    def int32(self, value: int) -> _Writer:
        self.out += _INT32.pack(value)
        return self

    def int64(self, value: int) -> _Writer:
        self.out += _INT64.pack(value)
        return self

    def string(self, value: str | None) -> _Writer:
        if value is None:
            self.out += _INT16.pack(-1)
        else:
            encoded = value.encode()
            self.out += _INT16.pack(len(encoded)) + encoded
        return self

    def bytes(self, value: bytes) -> _Writer:
        self.out += _INT32.pack(len(value)) + value
        return self


def offset_commit_key(group_id: str, topic_partition: TopicPartition) -> bytes:
    return bytes(_Writer(OFFSET_COMMIT_KEY_VERSION).string(group_id)
                 .string(topic_partition.topic).int32(topic_partition.partition).out)


def offset_commit_value(offset: OffsetAndMetadata) -> bytes:
    return bytes(_Writer(OFFSET_COMMIT_VALUE_VERSION).int64(offset.offset)
                 .int32(offset.leader_epoch).string(offset.metadata)
                 .int64(offset.commit_timestamp_ms).out)


def group_metadata_key(group_id: str) -> bytes:
    return bytes(_Writer(GROUP_METADATA_KEY_VERSION).string(group_id).out)


def group_metadata_value(group: StoredGroup) -> bytes:
    writer = (_Writer(GROUP_METADATA_VALUE_VERSION).string(group.protocol_type)
              .int32(group.generation_id).string(group.protocol_name).string(group.leader_id)
              .int64(group.state_timestamp_ms).int32(len(group.members)))
    for m in group.members:
        (writer.string(m.member_id).string(m.group_instance_id).string(m.client_id)
         .string(m.client_host).int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms)
         .bytes(m.subscription).bytes(m.assignment))
    return bytes(writer.out)


# -- decoding --------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def _unpack(self, fmt: struct.Struct) -> int:
        if self.position + fmt.size > len(self.data):
            raise OffsetsRecordError(f"record ends inside a field at byte {self.position}")
        (value,) = fmt.unpack_from(self.data, self.position)
        self.position += fmt.size
        return value

    def int16(self) -> int:
        return self._unpack(_INT16)

    def int32(self) -> int:
        return self._unpack(_INT32)

    def int64(self) -> int:
        return self._unpack(_INT64)

    def _take(self, length: int) -> bytes:
        end = self.position + length
        if length < 0 or end > len(self.data):
            raise OffsetsRecordError(f"field of {length} bytes at byte {self.position}")
        value = self.data[self.position:end]
        self.position = end
        return value

    def nullable_string(self) -> str | None:
        length = self.int16()
        return None if length == -1 else self._take(length).decode()

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise OffsetsRecordError(f"null string at byte {self.position}")
        return value

    def bytes(self) -> bytes:
        return self._take(self.int32())

    def version(self, expected: tuple[int, ...], what: str) -> int:
        version = self.int16()
        if version not in expected:
            raise OffsetsRecordError(f"{what} version {version}; this broker reads {expected}")
        return version


def decode_key(key: bytes) -> OffsetKey | GroupKey:
    reader = _Reader(key)
    version = reader.int16()
    if version in _OFFSET_COMMIT_KEY_VERSIONS:
        group_id = reader.string()
        return OffsetKey(group_id, TopicPartition(reader.string(), reader.int32()))
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupKey(reader.string())
    raise OffsetsRecordError(f"unknown key version {version}")


def decode_offset_commit_value(value: bytes) -> OffsetAndMetadata:
    reader = _Reader(value)
    reader.version((OFFSET_COMMIT_VALUE_VERSION,), "OffsetCommitValue")
    return OffsetAndMetadata(offset=reader.int64(), leader_epoch=reader.int32(),
                             metadata=reader.string(), commit_timestamp_ms=reader.int64())


def decode_group_metadata_value(value: bytes) -> StoredGroup:
    reader = _Reader(value)
    reader.version((GROUP_METADATA_VALUE_VERSION,), "GroupMetadataValue")
    protocol_type = reader.string()
    generation_id = reader.int32()
    protocol_name = reader.nullable_string()
    leader_id = reader.nullable_string()
    state_timestamp_ms = reader.int64()
    members = tuple(
        StoredMember(member_id=reader.string(), group_instance_id=reader.nullable_string(),
                     client_id=reader.string(), client_host=reader.string(),
                     rebalance_timeout_ms=reader.int32(), session_timeout_ms=reader.int32(),
                     subscription=reader.bytes(), assignment=reader.bytes())
        for _ in range(reader.int32())
    )
    return StoredGroup(protocol_type, generation_id, protocol_name, leader_id,
                       state_timestamp_ms, members)
