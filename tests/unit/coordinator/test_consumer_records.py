"""The records of a consumer group (KIP-848) in ``__consumer_offsets``, types 3 to 8: their
bytes, which are Kafka's, and their replay into a ``ConsumerGroup``."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from odradek.coordinator.group.consumer_group import ConsumerGroup, MemberState
from odradek.coordinator.group.consumer_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberSubscriptionValue,
    PartitionRacks,
    RecordType,
    SubscriptionMetadataValue,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberValue,
    TopicMetadataValue,
    TopicPartitions,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    is_consumer_group_key,
    partitions_of,
    topic_partitions,
)
from odradek.coordinator.group.offsets_topic import OffsetsRecordError

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
R = RecordType


def tps(topic_id: uuid.UUID, *partitions: int) -> TopicPartitions:
    return TopicPartitions(topic_id=topic_id, partitions=partitions)


SUBSCRIPTION = MemberSubscriptionValue(
    instance_id="pod-1", rack_id="rack-a", client_id="app", client_host="/10.0.0.1",
    subscribed_topic_names=("orders", "payments"), subscribed_topic_regex=None,
    rebalance_timeout_ms=30_000, server_assignor="range")

VALUES = {
    R.GROUP_EPOCH: GroupEpochValue(epoch=7),
    R.SUBSCRIPTION_METADATA: SubscriptionMetadataValue(topics=(
        TopicMetadataValue(topic_id=T1, topic_name="orders", num_partitions=3,
                           partition_metadata=()),
        TopicMetadataValue(topic_id=T2, topic_name="payments", num_partitions=1,
                           partition_metadata=(PartitionRacks(partition=0,
                                                              racks=("a", "b")),)))),
    R.MEMBER_SUBSCRIPTION: SUBSCRIPTION,
    R.TARGET_ASSIGNMENT_EPOCH: TargetAssignmentEpochValue(assignment_epoch=6),
    R.TARGET_ASSIGNMENT_MEMBER: TargetAssignmentMemberValue(
        topic_partitions=(tps(T1, 0, 2), tps(T2, 0))),
    R.CURRENT_ASSIGNMENT: CurrentAssignmentValue(
        member_epoch=6, previous_member_epoch=5, state=MemberState.UNREVOKED_PARTITIONS,
        assigned_partitions=(tps(T1, 0),), partitions_pending_revocation=(tps(T1, 2),)),
}


# -- bytes -----------------------------------------------------------------------------


@pytest.mark.parametrize("record_type", list(R), ids=lambda t: t.name)
def test_every_value_type_decodes_to_what_was_encoded(record_type):
    value = VALUES[record_type]
    assert decode_value(record_type, encode_value(record_type, value)) == value


def test_a_member_subscription_by_regular_expression_round_trips():
    value = MemberSubscriptionValue(
        instance_id=None, rack_id=None, client_id="", client_host="",
        subscribed_topic_names=(), subscribed_topic_regex="orders-.*",
        rebalance_timeout_ms=-1, server_assignor=None)
    assert decode_value(R.MEMBER_SUBSCRIPTION,
                        encode_value(R.MEMBER_SUBSCRIPTION, value)) == value


def test_a_current_assignment_value_has_kafkas_bytes():
    """ConsumerGroupCurrentMemberAssignmentValue v0, flexible::

        00 00                      value version 0
        00 00 00 05                MemberEpoch 5
        00 00 00 04                PreviousMemberEpoch 4
        00                         State 0 (stable)
        02                         AssignedPartitions: compact array, 1 + 1
          00 .. 00 01                TopicId (16 bytes)
          03                         Partitions: compact array, 2 + 1
          00 00 00 00 00 00 00 02    0, 2
          00                         tagged fields of the element
        01                         PartitionsPendingRevocation: empty compact array
        00                         tagged fields of the value
    """
    value = CurrentAssignmentValue(member_epoch=5, previous_member_epoch=4, state=0,
                                   assigned_partitions=(tps(T1, 0, 2),),
                                   partitions_pending_revocation=())
    expected = bytes.fromhex(
        "0000" "00000005" "00000004" "00" "02" + T1.bytes.hex()
        + "03" "00000000" "00000002" "00" "01" "00")
    assert encode_value(R.CURRENT_ASSIGNMENT, value) == expected
    assert decode_value(R.CURRENT_ASSIGNMENT, expected) == value


def test_a_member_key_has_kafkas_bytes():
    """ConsumerGroupCurrentMemberAssignmentKey: not flexible, the record type in the version
    slot, then int16-length strings::

        00 08        version 8 (the record type)
        00 01 67     GroupId "g"
        00 01 6d     MemberId "m"
    """
    key = ConsumerGroupKey(R.CURRENT_ASSIGNMENT, "g", "m")
    assert encode_key(key) == bytes.fromhex("0008" "000167" "00016d")
    assert decode_key(bytes.fromhex("0008" "000167" "00016d")) == key


@pytest.mark.parametrize("record_type", list(R), ids=lambda t: t.name)
def test_every_key_type_round_trips_with_a_member_only_where_kafka_has_one(record_type):
    member_keyed = record_type in (R.MEMBER_SUBSCRIPTION, R.TARGET_ASSIGNMENT_MEMBER,
                                   R.CURRENT_ASSIGNMENT)
    key = ConsumerGroupKey(record_type, "group-é", "member-1" if member_keyed else None)
    encoded = encode_key(key)
    assert encoded[:2] == int(record_type).to_bytes(2, "big")
    assert is_consumer_group_key(int.from_bytes(encoded[:2], "big"))
    assert decode_key(encoded) == key
    group_id = "group-é".encode()
    assert len(encoded) == 2 + 2 + len(group_id) + (2 + len("member-1") if member_keyed else 0)


@pytest.mark.parametrize("version", [0, 1, 2, 9])
def test_the_classic_key_versions_are_not_consumer_group_keys(version):
    assert not is_consumer_group_key(version)


def test_a_truncated_key_is_a_record_error():
    with pytest.raises(OffsetsRecordError):
        decode_key(bytes.fromhex("0008" "000167" "0005"))


def test_a_value_of_an_unknown_version_is_a_record_error():
    data = bytearray(encode_value(R.GROUP_EPOCH, GroupEpochValue(epoch=1)))
    data[1] = 1
    with pytest.raises(OffsetsRecordError, match="version 1"):
        decode_value(R.GROUP_EPOCH, bytes(data))


def test_a_truncated_value_is_a_record_error():
    data = encode_value(R.CURRENT_ASSIGNMENT, VALUES[R.CURRENT_ASSIGNMENT])
    with pytest.raises(OffsetsRecordError):
        decode_value(R.CURRENT_ASSIGNMENT, data[:-5])


def test_a_value_of_another_type_is_not_encoded():
    with pytest.raises(TypeError):
        encode_value(R.GROUP_EPOCH, TargetAssignmentEpochValue(assignment_epoch=1))


# -- tagged fields ---------------------------------------------------------------------


def test_a_value_with_an_unknown_tagged_field_decodes():
    """A newer Kafka may add tagged fields: they are skipped, as Kafka skips them."""
    data = bytes.fromhex("0000" "00000007"
                         "01" "05" "02" "abcd")  # one tagged field: tag 5, 2 bytes
    assert decode_value(R.GROUP_EPOCH, data) == GroupEpochValue(epoch=7)


def test_an_unknown_tagged_field_inside_a_struct_is_skipped_too():
    data = bytes.fromhex("0000" "02" + T1.bytes.hex() + "02" "00000003"
                         "01" "09" "01" "ff"  # the element's tagged fields: tag 9, 1 byte
                         "00")
    assert decode_value(R.TARGET_ASSIGNMENT_MEMBER, data) == TargetAssignmentMemberValue(
        topic_partitions=(tps(T1, 3),))


def test_kafkas_classic_member_metadata_tag_is_read_with_the_rest():
    """Kafka writes tag 0 of a member's subscription (ClassicMemberMetadata, a nullable
    struct) for classic members of a consumer group: size, a varint 1 (present), the
    struct; next to an unknown tag, which is skipped."""
    plain = encode_value(R.MEMBER_SUBSCRIPTION, SUBSCRIPTION)
    struct = bytes.fromhex("0000000a"  # SessionTimeoutMs
                           "02" "06" + b"range".hex() + "03" + b"xy".hex() + "00"
                           "00")  # the struct's tagged fields
    tagged = bytes([2, 0, len(struct) + 1, 1]) + struct + bytes.fromhex("07" "01" "ff")
    assert plain.endswith(b"\x00")  # odradek writes no tagged field
    decoded = decode_value(R.MEMBER_SUBSCRIPTION, plain[:-1] + tagged)
    assert decoded == dataclasses.replace(
        SUBSCRIPTION, classic_member_metadata=ClassicMemberMetadata(
            session_timeout_ms=10,
            supported_protocols=(ClassicProtocol(name="range", metadata=b"xy"),)))


# -- assignments as records list them ------------------------------------------------------


def test_an_assignment_is_listed_by_topic_id_with_partitions_ascending_and_no_empty_topics():
    listed = topic_partitions({T2: frozenset({3, 1}), T1: frozenset({2}),
                               uuid.UUID(int=9): frozenset()})
    assert listed == (tps(T1, 2), tps(T2, 1, 3))
    assert partitions_of(listed) == {T1: frozenset({2}), T2: frozenset({1, 3})}


def test_a_topic_listed_twice_is_one_topic():
    assert partitions_of((tps(T1, 0), tps(T1, 1), tps(T2))) == {T1: frozenset({0, 1})}
    assert partitions_of(None) == {}


# -- replay --------------------------------------------------------------------------------


def key(record_type: RecordType, member_id: str | None = None) -> ConsumerGroupKey:
    return ConsumerGroupKey(record_type, "g", member_id)


def replayed(*records) -> ConsumerGroup:
    group = ConsumerGroup("g")
    for record_key, value in records:
        group.replay(record_key, value, 100)
    return group


def test_replay_builds_the_group_its_members_and_who_holds_each_partition():
    group = replayed(
        (key(R.GROUP_EPOCH), GroupEpochValue(epoch=7)),
        (key(R.SUBSCRIPTION_METADATA), VALUES[R.SUBSCRIPTION_METADATA]),
        (key(R.MEMBER_SUBSCRIPTION, "m"), SUBSCRIPTION),
        (key(R.TARGET_ASSIGNMENT_MEMBER, "m"), VALUES[R.TARGET_ASSIGNMENT_MEMBER]),
        (key(R.TARGET_ASSIGNMENT_EPOCH), TargetAssignmentEpochValue(assignment_epoch=6)),
        (key(R.CURRENT_ASSIGNMENT, "m"), VALUES[R.CURRENT_ASSIGNMENT]))

    assert (group.group_epoch, group.assignment_epoch) == (7, 6)
    assert set(group.subscription_metadata) == {"orders", "payments"}
    assert group.subscription_metadata["orders"].partitions == 3
    member = group.members["m"]
    assert (member.instance_id, member.rack_id, member.server_assignor) == (
        "pod-1", "rack-a", "range")
    assert member.subscribed_topic_names == ("orders", "payments")
    assert (member.member_epoch, member.previous_member_epoch, member.state) == (
        6, 5, MemberState.UNREVOKED_PARTITIONS)
    assert member.assigned == {T1: frozenset({0})}
    assert member.pending_revocation == {T1: frozenset({2})}
    assert group.target == {"m": {T1: frozenset({0, 2}), T2: frozenset({0})}}
    assert group.static_members == {"pod-1": "m"}
    # Partitions being revoked are still held, at the member's epoch.
    assert group.partition_epochs == {(T1, 0): 6, (T1, 2): 6}
    assert str(group.state) == "Assigning"  # group epoch 7 > assignment epoch 6


def test_a_member_records_tombstones_remove_it_and_free_its_partitions():
    group = replayed(
        (key(R.GROUP_EPOCH), GroupEpochValue(epoch=1)),
        (key(R.MEMBER_SUBSCRIPTION, "m"), SUBSCRIPTION),
        (key(R.CURRENT_ASSIGNMENT, "m"), VALUES[R.CURRENT_ASSIGNMENT]),
        (key(R.CURRENT_ASSIGNMENT, "m"), None),
        (key(R.TARGET_ASSIGNMENT_MEMBER, "m"), None),
        (key(R.MEMBER_SUBSCRIPTION, "m"), None))
    assert group.members == {} and group.static_members == {}
    assert group.partition_epochs == {}
    assert str(group.state) == "Empty"


def test_an_assignment_tombstone_of_a_member_not_in_the_group_changes_nothing():
    """Kafka ignores it: a tombstone never creates a member (a log cleaned of the member's
    values may still hold it)."""
    group = replayed((key(R.GROUP_EPOCH), GroupEpochValue(epoch=3)),
                     (key(R.CURRENT_ASSIGNMENT, "gone"), None))
    assert group.members == {}
    assert str(group.state) == "Empty"


def test_a_group_epoch_tombstone_removes_the_group():
    group = replayed((key(R.GROUP_EPOCH), GroupEpochValue(epoch=3)),
                     (key(R.TARGET_ASSIGNMENT_EPOCH), None),
                     (key(R.SUBSCRIPTION_METADATA), None),
                     (key(R.GROUP_EPOCH), None))
    assert group.removed and str(group.state) == "Dead"
    assert group.subscription_metadata == {} and group.assignment_epoch == 0


def test_a_new_assignment_moves_the_partition_epochs_with_the_member():
    before = CurrentAssignmentValue(member_epoch=3, previous_member_epoch=2, state=0,
                                    assigned_partitions=(tps(T1, 0, 1),),
                                    partitions_pending_revocation=())
    after = CurrentAssignmentValue(member_epoch=4, previous_member_epoch=3, state=0,
                                   assigned_partitions=(tps(T1, 1, 2),),
                                   partitions_pending_revocation=())
    group = replayed((key(R.MEMBER_SUBSCRIPTION, "m"), SUBSCRIPTION),
                     (key(R.CURRENT_ASSIGNMENT, "m"), before),
                     (key(R.CURRENT_ASSIGNMENT, "m"), after))
    assert group.partition_epochs == {(T1, 1): 4, (T1, 2): 4}
    assert group.partition_epoch(T1, 0) == -1


def test_an_unknown_member_state_is_kept_as_unknown():
    value = CurrentAssignmentValue(member_epoch=3, previous_member_epoch=2, state=42,
                                   assigned_partitions=(), partitions_pending_revocation=())
    group = replayed((key(R.MEMBER_SUBSCRIPTION, "m"), SUBSCRIPTION),
                     (key(R.CURRENT_ASSIGNMENT, "m"), value))
    assert group.members["m"].state is MemberState.UNKNOWN
