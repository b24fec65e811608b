"""The records of a share group (KIP-932) in ``__consumer_offsets``, types 10 to 15: their
bytes, which are Kafka's, and their replay into a ``ShareGroup``."""

from __future__ import annotations

import uuid

import pytest

from odradek.coordinator.group.consumer_records import (
    CONSUMER_GROUP_RECORDS,
    CurrentAssignmentValue,
    MemberAssignmentValue,
    RecordType,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberValue,
    topic_partitions,
)
from odradek.coordinator.group.offsets_topic import OffsetsRecordError
from odradek.coordinator.group.share_group import ShareGroup
from odradek.coordinator.group.share_records import (
    GROUP_KEYS,
    SHARE_GROUP_RECORDS,
    ShareGroupEpochValue,
    ShareGroupKey,
    ShareMemberSubscriptionValue,
    ShareRecordType,
    StatePartitionMetadataValue,
    TopicInfo,
    TopicPartitionsInfo,
    metadata_hash,
)

R, RECORDS = ShareRecordType, SHARE_GROUP_RECORDS
T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
ORDERS_0_2 = topic_partitions({T1: frozenset({0, 2})})

SUBSCRIPTION = ShareMemberSubscriptionValue(
    rack_id=None, client_id="client", client_host="/10.0.0.1",
    subscribed_topic_names=("orders", "payments"))

VALUES = {
    R.MEMBER_SUBSCRIPTION: SUBSCRIPTION,
    R.GROUP_EPOCH: ShareGroupEpochValue(epoch=7, metadata_hash=-3),
    R.TARGET_ASSIGNMENT_EPOCH: TargetAssignmentEpochValue(assignment_epoch=6),
    R.TARGET_ASSIGNMENT_MEMBER: TargetAssignmentMemberValue(
        topic_partitions=topic_partitions({T1: frozenset({0, 2}), T2: frozenset({0})})),
    R.CURRENT_ASSIGNMENT: MemberAssignmentValue(
        member_epoch=6, previous_member_epoch=5, state=0, assigned_partitions=ORDERS_0_2),
    R.STATE_PARTITION_METADATA: StatePartitionMetadataValue(
        initializing_topics=(TopicPartitionsInfo(topic_id=T2, topic_name="payments",
                                                 partitions=(0,), create_timestamp=1_700),),
        initialized_topics=(TopicPartitionsInfo(topic_id=T1, topic_name="orders",
                                                partitions=(0, 1, 2), create_timestamp=-1),),
        deleting_topics=(TopicInfo(topic_id=uuid.UUID(int=3), topic_name="old"),)),
}


# -- bytes -----------------------------------------------------------------------------


@pytest.mark.parametrize("record_type", list(R), ids=lambda t: t.name)
def test_every_value_type_decodes_to_what_was_encoded(record_type):
    value = VALUES[record_type]
    assert RECORDS.decode_value(record_type, RECORDS.encode_value(record_type, value)) == value


def test_a_member_key_has_kafkas_bytes():
    """ShareGroupMemberMetadataKey: not flexible, the record type in the version slot, then
    int16-length strings::

        00 0a        version 10 (the record type)
        00 01 67     GroupId "g"
        00 01 6d     MemberId "m"
    """
    key = ShareGroupKey(R.MEMBER_SUBSCRIPTION, "g", "m")
    assert RECORDS.encode_key(key) == bytes.fromhex("000a" "000167" "00016d")
    assert RECORDS.decode_key(bytes.fromhex("000a" "000167" "00016d")) == key


def test_a_group_key_has_no_member():
    """ShareGroupMetadataKey: ``00 0b``, then GroupId."""
    key = ShareGroupKey(R.GROUP_EPOCH, "g")
    assert RECORDS.encode_key(key) == bytes.fromhex("000b" "000167")
    assert RECORDS.decode_key(bytes.fromhex("000b" "000167")) == key


def test_a_member_subscription_value_has_kafkas_bytes():
    """ShareGroupMemberMetadataValue v0, flexible: compact strings are their length + 1 as
    an unsigned varint, a null one is 0::

        00 00                          value version 0
        00                             RackId: null
        07 "client"                    ClientId
        0a "/10.0.0.1"                 ClientHost
        03                             SubscribedTopicNames: compact array, 2 + 1
          07 "orders"
          09 "payments"
        00                             tagged fields
    """
    expected = bytes.fromhex("0000" "00" "07" + b"client".hex() + "0a" + b"/10.0.0.1".hex()
                             + "03" "07" + b"orders".hex() + "09" + b"payments".hex() + "00")
    assert RECORDS.encode_value(R.MEMBER_SUBSCRIPTION, SUBSCRIPTION) == expected
    assert RECORDS.decode_value(R.MEMBER_SUBSCRIPTION, expected) == SUBSCRIPTION


def test_a_group_epoch_value_has_kafkas_bytes():
    """ShareGroupMetadataValue v0: Epoch int32, MetadataHash int64, tagged fields."""
    value = ShareGroupEpochValue(epoch=5, metadata_hash=42)
    expected = bytes.fromhex("0000" "00000005" "000000000000002a" "00")
    assert RECORDS.encode_value(R.GROUP_EPOCH, value) == expected
    assert RECORDS.decode_value(R.GROUP_EPOCH, expected) == value


def test_a_current_assignment_value_is_a_consumer_groups_without_pending_revocations():
    """ShareGroupCurrentMemberAssignmentValue v0 has the fields of the consumer group's
    value (``test_consumer_records`` spells its bytes out) but PartitionsPendingRevocation:
    after AssignedPartitions come the value's tagged fields."""
    value = MemberAssignmentValue(member_epoch=5, previous_member_epoch=4, state=0,
                                  assigned_partitions=ORDERS_0_2)
    expected = bytes.fromhex("0000" "00000005" "00000004" "00" "02" + T1.bytes.hex()
                             + "03" "00000000" "00000002" "00" "00")
    consumer = CurrentAssignmentValue(member_epoch=5, previous_member_epoch=4, state=0,
                                      assigned_partitions=ORDERS_0_2,
                                      partitions_pending_revocation=())

    assert RECORDS.encode_value(R.CURRENT_ASSIGNMENT, value) == expected
    assert RECORDS.decode_value(R.CURRENT_ASSIGNMENT, expected) == value
    assert CONSUMER_GROUP_RECORDS.encode_value(RecordType.CURRENT_ASSIGNMENT, consumer) == (
        expected[:-1] + bytes.fromhex("01" "00"))  # an empty array, then the tagged fields


def test_a_state_partition_metadata_value_has_kafkas_bytes():
    """ShareGroupStatePartitionMetadataValue v0: three compact arrays of structs, each
    struct ending with its tagged fields::

        00 00                      value version 0
        02                         InitializingTopics: 1 + 1
          00 .. 00 02 | 02 "p"       TopicId, TopicName
          02 00 00 00 00             Partitions [0]
          00 00 00 00 00 00 00 07    CreateTimestamp 7
          00
        01                         InitializedTopics: empty
        02                         DeletingTopics: 1 + 1
          00 .. 00 03 | 02 "o" | 00  TopicId, TopicName, tagged fields
        00
    """
    value = StatePartitionMetadataValue(
        initializing_topics=(TopicPartitionsInfo(topic_id=T2, topic_name="p", partitions=(0,),
                                                 create_timestamp=7),),
        initialized_topics=(),
        deleting_topics=(TopicInfo(topic_id=uuid.UUID(int=3), topic_name="o"),))
    expected = bytes.fromhex(
        "0000" "02" + T2.bytes.hex() + "02" + b"p".hex() + "02" "00000000"
        "0000000000000007" "00" "01" "02" + uuid.UUID(int=3).bytes.hex() + "02" + b"o".hex()
        + "00" "00")
    assert RECORDS.encode_value(R.STATE_PARTITION_METADATA, value) == expected
    assert RECORDS.decode_value(R.STATE_PARTITION_METADATA, expected) == value


@pytest.mark.parametrize(("share", "consumer"), [
    (R.TARGET_ASSIGNMENT_EPOCH, RecordType.TARGET_ASSIGNMENT_EPOCH),
    (R.TARGET_ASSIGNMENT_MEMBER, RecordType.TARGET_ASSIGNMENT_MEMBER),
])
def test_the_target_assignment_values_are_the_consumer_groups_byte_for_byte(share, consumer):
    value = VALUES[share]
    assert RECORDS.encode_value(share, value) == CONSUMER_GROUP_RECORDS.encode_value(
        consumer, value)


@pytest.mark.parametrize("record_type", list(R), ids=lambda t: t.name)
def test_every_key_type_round_trips_with_a_member_only_where_kafka_has_one(record_type):
    member_keyed = record_type in (R.MEMBER_SUBSCRIPTION, R.TARGET_ASSIGNMENT_MEMBER,
                                   R.CURRENT_ASSIGNMENT)
    key = ShareGroupKey(record_type, "group-é", "member-1" if member_keyed else None)
    encoded = RECORDS.encode_key(key)
    assert encoded[:2] == int(record_type).to_bytes(2, "big")
    assert RECORDS.decode_key(encoded) == key
    assert len(encoded) == 2 + 2 + len("group-é".encode()) + (
        2 + len("member-1") if member_keyed else 0)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 8, 9, 16])
def test_other_key_versions_are_not_share_group_keys(version):
    """3 to 8 are a consumer group's; 9 was Kafka 4.0's ShareGroupPartitionMetadata."""
    assert not RECORDS.is_key(version)


def test_a_truncated_key_or_value_is_a_record_error():
    with pytest.raises(OffsetsRecordError, match="share group key"):
        RECORDS.decode_key(bytes.fromhex("000e" "000167" "0005"))
    data = RECORDS.encode_value(R.CURRENT_ASSIGNMENT, VALUES[R.CURRENT_ASSIGNMENT])
    with pytest.raises(OffsetsRecordError):
        RECORDS.decode_value(R.CURRENT_ASSIGNMENT, data[:-5])


def test_a_value_with_an_unknown_tagged_field_decodes():
    """A newer Kafka may add tagged fields: they are skipped, as Kafka skips them."""
    data = bytes.fromhex("0000" "00000007" "0000000000000001"
                         "01" "00" "02" "abcd")  # one tagged field: tag 0, 2 bytes
    assert RECORDS.decode_value(R.GROUP_EPOCH, data) == ShareGroupEpochValue(
        epoch=7, metadata_hash=1)


# -- the metadata hash -----------------------------------------------------------------


def test_the_metadata_hash_follows_the_topics_ids_and_partition_counts():
    topics = {"orders": (T1, 3), "payments": (T2, 1)}
    assert metadata_hash({}) == 0
    assert metadata_hash(topics) == metadata_hash(dict(reversed(topics.items())))
    assert metadata_hash(topics) != metadata_hash(topics | {"orders": (T1, 4)})
    assert metadata_hash(topics) != metadata_hash(topics | {"orders": (uuid.UUID(int=9), 3)})
    assert metadata_hash(topics) != metadata_hash({"orders": (T1, 3)})
    assert -2**63 <= metadata_hash(topics) < 2**63


# -- replay ----------------------------------------------------------------------------


def replayed(*records: tuple[ShareRecordType, str | None, object | None]) -> ShareGroup:
    """A group of nothing but these records: (type, member id, value or None)."""
    group = ShareGroup("g")
    for record_type, member_id, value in records:
        group.replay(ShareGroupKey(record_type, "g", member_id), value, 100)
    return group


MEMBER_RECORDS = [(R.MEMBER_SUBSCRIPTION, "m", SUBSCRIPTION),
                  (R.TARGET_ASSIGNMENT_MEMBER, "m", VALUES[R.TARGET_ASSIGNMENT_MEMBER]),
                  (R.CURRENT_ASSIGNMENT, "m", VALUES[R.CURRENT_ASSIGNMENT])]


def test_replay_builds_the_group_and_its_members():
    group = replayed((R.GROUP_EPOCH, None, VALUES[R.GROUP_EPOCH]), *MEMBER_RECORDS,
                     (R.TARGET_ASSIGNMENT_EPOCH, None, VALUES[R.TARGET_ASSIGNMENT_EPOCH]),
                     (R.STATE_PARTITION_METADATA, None, VALUES[R.STATE_PARTITION_METADATA]))

    assert (group.group_epoch, group.assignment_epoch, group.metadata_hash) == (7, 6, -3)
    member = group.members["m"]
    assert (member.rack_id, member.client_id, member.client_host) == (
        None, "client", "/10.0.0.1")
    assert member.subscribed_topic_names == ("orders", "payments")
    assert (member.member_epoch, member.previous_member_epoch) == (6, 5)
    assert member.assigned == {T1: frozenset({0, 2})}
    assert group.target == {"m": {T1: frozenset({0, 2}), T2: frozenset({0})}}
    assert (str(group.state), group.state_timestamp_ms) == ("Stable", 100)


def test_a_members_tombstones_remove_it():
    """In Kafka's order (``removeMember``): assignment, target, then subscription."""
    group = replayed(*MEMBER_RECORDS, *[(t, "m", None) for t, _, _ in reversed(MEMBER_RECORDS)])
    assert (group.members, group.target) == ({}, {})
    assert str(group.state) == "Empty"


def test_an_assignment_tombstone_of_a_member_not_in_the_group_changes_nothing():
    assert replayed((R.CURRENT_ASSIGNMENT, "gone", None)).members == {}


def test_the_group_tombstones_remove_the_group():
    group = replayed((R.GROUP_EPOCH, None, VALUES[R.GROUP_EPOCH]),
                     (R.TARGET_ASSIGNMENT_EPOCH, None, VALUES[R.TARGET_ASSIGNMENT_EPOCH]),
                     *[(t, None, None) for t in GROUP_KEYS])
    assert group.removed and str(group.state) == "Dead"
    assert group.assignment_epoch == 0
