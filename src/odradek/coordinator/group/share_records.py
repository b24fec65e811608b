"""The records a share group (KIP-932) keeps in ``__consumer_offsets``, byte for byte Kafka's
(``ShareGroup*Key.json`` and ``*Value.json`` in Kafka's ``group-coordinator``, as of Kafka
4.1, whose ShareGroupHeartbeat v1 this broker serves).

Like a consumer group's (``consumer_records``, whose layouts and code these share), a share
group is a set of keys that each change on their own:

====  ==========================================  ==============================================
type  key                                         value
====  ==========================================  ==============================================
10    ShareGroupMemberMetadataKey (group,         the member's rack, client id and host, and the
      member)                                     topics it subscribes to
11    ShareGroupMetadataKey (group)               the group epoch, and a hash of the subscribed
                                                  topics it was bumped for (KIP-1101)
12    ShareGroupTargetAssignmentMetadataKey       the epoch of the target assignment
      (group)
13    ShareGroupTargetAssignmentMemberKey         the member's partitions in the target assignment
      (group, member)
14    ShareGroupCurrentMemberAssignmentKey        the member's epoch, previous epoch, state and
      (group, member)                             partitions
15    ShareGroupStatePartitionMetadataKey         the topics whose share-partition state the
      (group)                                     group initialized, is initializing or deleting
====  ==========================================  ==============================================

Type 9 was Kafka 4.0's ShareGroupPartitionMetadata, replaced in 4.1 by the hash in type 11; a
key of that version is not read. Types 12 and 13 have the values of the consumer group's
types 6 and 7, byte for byte, and the same classes here; type 14's is the start of type 8's
(without the partitions pending revocation: a share member has nothing to revoke).

Kafka keeps type 15 for its share coordinators' InitializeShareGroupState, which odradek does
not have: a share-partition's state is started by its leader, at its first fetch
(``coordinator.share``). So odradek writes only its tombstone, when the group is deleted, and
reads it in a log Kafka wrote without keeping anything of it.

The group's value, ShareGroupMetadataValue version 0 (flexible)::

    00 00                      value version 0
    00 00 00 05                Epoch 5
    00 00 00 00 00 00 00 2a    MetadataHash 42
    00                         tagged fields
"""

import enum
import hashlib
import struct
import uuid
from collections.abc import Mapping
from dataclasses import field

from kio.static.primitive import i32, i64

from odradek.coordinator.group.consumer_records import (
    GroupRecords,
    MemberAssignmentValue,
    RecordKey,
    RecordStruct,
    RecordValue,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberValue,
    record_class,
)


class ShareRecordType(enum.IntEnum):
    MEMBER_SUBSCRIPTION = 10  # ShareGroupMemberMetadata
    GROUP_EPOCH = 11  # ShareGroupMetadata
    TARGET_ASSIGNMENT_EPOCH = 12  # ShareGroupTargetAssignmentMetadata
    TARGET_ASSIGNMENT_MEMBER = 13  # ShareGroupTargetAssignmentMember
    CURRENT_ASSIGNMENT = 14  # ShareGroupCurrentMemberAssignment
    STATE_PARTITION_METADATA = 15  # ShareGroupStatePartitionMetadata


class ShareGroupKey(RecordKey):
    """A share group record's key; its type is a :class:`ShareRecordType`."""

    __slots__ = ()


@record_class
class ShareMemberSubscriptionValue(RecordValue):
    rack_id: str | None = field(metadata={"kafka_type": "string"})
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    subscribed_topic_names: tuple[str, ...] = field(metadata={"kafka_type": "string"})


@record_class
class ShareGroupEpochValue(RecordValue):
    """The group epoch, and the :func:`metadata_hash` of the topics it was last bumped
    for."""

    epoch: i32 = field(metadata={"kafka_type": "int32"})
    metadata_hash: i64 = field(metadata={"kafka_type": "int64"})


@record_class
class TopicPartitionsInfo(RecordStruct):
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = field(metadata={"kafka_type": "string"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})
    create_timestamp: i64 = field(metadata={"kafka_type": "int64"})


@record_class
class TopicInfo(RecordStruct):
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = field(metadata={"kafka_type": "string"})


@record_class
class StatePartitionMetadataValue(RecordValue):
    initializing_topics: tuple[TopicPartitionsInfo, ...]
    initialized_topics: tuple[TopicPartitionsInfo, ...]
    deleting_topics: tuple[TopicInfo, ...]


SHARE_GROUP_RECORDS = GroupRecords(
    "share group", ShareRecordType, ShareGroupKey,
    (ShareRecordType.MEMBER_SUBSCRIPTION, ShareRecordType.TARGET_ASSIGNMENT_MEMBER,
     ShareRecordType.CURRENT_ASSIGNMENT), {
        ShareRecordType.MEMBER_SUBSCRIPTION: ShareMemberSubscriptionValue,
        ShareRecordType.GROUP_EPOCH: ShareGroupEpochValue,
        ShareRecordType.TARGET_ASSIGNMENT_EPOCH: TargetAssignmentEpochValue,
        ShareRecordType.TARGET_ASSIGNMENT_MEMBER: TargetAssignmentMemberValue,
        ShareRecordType.CURRENT_ASSIGNMENT: MemberAssignmentValue,
        ShareRecordType.STATE_PARTITION_METADATA: StatePartitionMetadataValue,
    })

# What a share group's deletion writes tombstones for once its members are gone, in Kafka's
# order (``ShareGroup.createGroupTombstoneRecords``): the group epoch's goes last.
GROUP_KEYS = (ShareRecordType.TARGET_ASSIGNMENT_EPOCH, ShareRecordType.STATE_PARTITION_METADATA,
              ShareRecordType.GROUP_EPOCH)

_TOPIC = struct.Struct(">16sii")  # topic id, partition count, length of the name


def metadata_hash(topics: Mapping[str, tuple[uuid.UUID, int]]) -> int:
    """ShareGroupMetadataValue's MetadataHash for the subscribed topics (name -> id, partition
    count). The group epoch is bumped when it changes — a topic deleted, created again or
    given partitions — which a heartbeat finds out after a load too, as the group keeps its
    hash but not its topics. Kafka hashes each topic's id, name, partition count and
    partitions' racks with XXH3 and combines them; odradek's assignor does not look at racks,
    and compares hashes only with its own, so a BLAKE2b of the rest serves. No topics hash
    to 0, as in Kafka."""
    if not topics:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for name, (topic_id, partitions) in sorted(topics.items()):
        encoded = name.encode()
        digest.update(_TOPIC.pack(topic_id.bytes, partitions, len(encoded)) + encoded)
    return int.from_bytes(digest.digest(), "big", signed=True)
