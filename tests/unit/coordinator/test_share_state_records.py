"""Records of __share_group_state: Kafka's bytes, Kafka's choice of partition, and Kafka's way
of combining a snapshot with the updates after it."""

from __future__ import annotations

import uuid
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.share.state_records import (
    RecordState,
    RecordType,
    ShareSnapshot,
    ShareState,
    ShareStateKey,
    ShareStateRecordError,
    ShareUpdate,
    StateBatch,
    apply_update,
    combine,
    combine_batches,
    decode_key,
    decode_value,
    encode_key,
    encode_snapshot,
    encode_update,
    partition_for,
)

AVAILABLE, ACKNOWLEDGED, ARCHIVED = (
    RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
TOPIC_ID = uuid.UUID(bytes=bytes(range(16)))
KEY = ShareStateKey("g", TOPIC_ID, 3)


def batch(first: int, last: int, state: RecordState, count: int) -> StateBatch:
    return StateBatch(first, last, state, count)


def snapshot(start_offset: int, *batches: StateBatch, leader_epoch: int = 0) -> ShareSnapshot:
    return ShareSnapshot(snapshot_epoch=0, leader_epoch=leader_epoch,
                         state=ShareState(1, start_offset, batches))


def update(start_offset: int, *batches: StateBatch, leader_epoch: int = -1) -> ShareUpdate:
    return ShareUpdate(snapshot_epoch=0, leader_epoch=leader_epoch, start_offset=start_offset,
                       batches=batches)


# -- the partition ---------------------------------------------------------------------


def test_the_coordinator_key_prints_the_topic_id_as_kafka_does():
    # Kafka's Uuid.toString: base64url without padding, not the hyphenated hex.
    assert KEY.coordinator_key == "g:AAECAwQFBgcICQoLDA0ODw:3"


# Expected values printed by Java 17 (Math.abs("...".hashCode()) % 50).
@pytest.mark.parametrize(("key", "expected"), [
    (KEY, 16),  # hashCode -720837766: abs first, then modulo
    (ShareStateKey("share-group", TOPIC_ID, 0), 45),  # hashCode -924049395
])
def test_the_partition_is_kafkas_abs_of_the_coordinator_keys_hash_modulo_the_count(
        key, expected):
    assert partition_for(key, 50) == expected


# -- keys ------------------------------------------------------------------------------


def test_a_snapshot_key_is_kafkas_layout():
    # type int16 0 | group: int16 length 1, "g" | topic id: 16 bytes | partition int32 3
    assert encode_key(RecordType.SNAPSHOT, KEY) == bytes.fromhex(
        "0000" "0001" "67" "000102030405060708090a0b0c0d0e0f" "00000003")


def test_an_update_key_is_the_same_layout_with_type_1():
    assert encode_key(RecordType.UPDATE, KEY) == bytes.fromhex(
        "0001" "0001" "67" "000102030405060708090a0b0c0d0e0f" "00000003")


_keys = st.builds(ShareStateKey, st.text(max_size=20), st.uuids().filter(lambda u: u.int),
                  st.integers(0, 2**31 - 1))


@given(st.sampled_from(RecordType), _keys)
def test_keys_round_trip(record_type, key):
    assert decode_key(encode_key(record_type, key)) == (record_type, key)


@pytest.mark.parametrize("record", [
    b"",
    b"\x00",
    bytes.fromhex("0002" "0001" "67"),  # type 2: not a share state record
    bytes.fromhex("0000" "0005" "67"),  # the group id runs past the end
    bytes.fromhex("0000" "0001" "67" "0001"),  # no room for the topic id
    bytes.fromhex("0000" "0001" "67") + bytes(16) + bytes(4),  # the zero topic id
])
def test_a_truncated_or_unknown_key_is_refused(record):
    with pytest.raises(ShareStateRecordError):
        decode_key(record)


# -- values ----------------------------------------------------------------------------


def test_a_snapshot_value_is_kafkas_version_0_layout():
    value = ShareSnapshot(snapshot_epoch=1, leader_epoch=3, state=ShareState(
        state_epoch=2, start_offset=10, batches=(batch(10, 12, ACKNOWLEDGED, 1),)))
    encoded = encode_snapshot(value)
    assert encoded == bytes.fromhex(
        "0000"  # value version 0
        "0001"  # SnapshotEpoch uint16
        "00000002"  # StateEpoch int32
        "00000003"  # LeaderEpoch int32
        "000000000000000a"  # StartOffset int64
        "02"  # StateBatches: compact array, uvarint 1 + 1
        "000000000000000a" "000000000000000c"  # FirstOffset, LastOffset int64
        "02" "0001"  # DeliveryState int8 (Acknowledged), DeliveryCount int16
        "00"  # the batch's tagged fields: none
        "00")  # the value's tagged fields: none
    assert decode_value(RecordType.SNAPSHOT, encoded) == value


def test_an_update_value_is_kafkas_version_0_layout():
    value = ShareUpdate(snapshot_epoch=65535, leader_epoch=-1, start_offset=-1, batches=(
        batch(7, 7, ARCHIVED, 5), batch(8, 9, AVAILABLE, 2)))
    encoded = encode_update(value)
    assert encoded == bytes.fromhex(
        "0000"  # value version 0
        "ffff"  # SnapshotEpoch: uint16, so 65535 (not -1)
        "ffffffff"  # LeaderEpoch -1: unchanged
        "ffffffffffffffff"  # StartOffset -1: unchanged
        "03"  # StateBatches: two
        "0000000000000007" "0000000000000007" "04" "0005" "00"
        "0000000000000008" "0000000000000009" "00" "0002" "00"
        "00")
    assert decode_value(RecordType.UPDATE, encoded) == value


_batches = st.lists(st.builds(
    StateBatch, st.integers(-1, 2**63 - 1), st.integers(-1, 2**63 - 1),
    st.sampled_from([AVAILABLE, ACKNOWLEDGED, ARCHIVED]), st.integers(0, 2**15 - 1),
), max_size=5).map(tuple)
_epochs = st.integers(-1, 2**31 - 1)


@given(st.builds(ShareSnapshot, st.integers(0, 2**16 - 1), _epochs, st.builds(
    ShareState, _epochs, st.integers(-1, 2**63 - 1), _batches)))
def test_snapshot_values_round_trip(value):
    assert decode_value(RecordType.SNAPSHOT, encode_snapshot(value)) == value


@given(st.builds(ShareUpdate, st.integers(0, 2**16 - 1), _epochs, st.integers(-1, 2**63 - 1),
                 _batches))
def test_update_values_round_trip(value):
    assert decode_value(RecordType.UPDATE, encode_update(value)) == value


def test_a_value_of_an_unknown_version_is_refused():
    encoded = bytearray(encode_update(update(-1)))
    encoded[1] = 1
    with pytest.raises(ShareStateRecordError, match="version 1"):
        decode_value(RecordType.UPDATE, bytes(encoded))


@pytest.mark.parametrize("state", [1, 3])  # ACQUIRED is never written; 3 is no state
def test_a_delivery_state_that_is_never_written_is_refused(state):
    encoded = bytearray(encode_update(update(-1, batch(0, 0, AVAILABLE, 1))))
    encoded[-5] = state  # DeliveryState, before count (2), batch tags (1), value tags (1)
    with pytest.raises(ShareStateRecordError, match=f"delivery state {state}"):
        decode_value(RecordType.UPDATE, bytes(encoded))


def test_a_truncated_value_is_refused():
    encoded = encode_snapshot(snapshot(0, batch(0, 1, AVAILABLE, 1)))
    with pytest.raises(ShareStateRecordError):
        decode_value(RecordType.SNAPSHOT, encoded[:-3])


# -- combining -------------------------------------------------------------------------


def test_an_updates_batches_replace_the_offsets_they_cover():
    current = apply_update(snapshot(10, batch(10, 19, AVAILABLE, 1)),
                           update(-1, batch(12, 13, ACKNOWLEDGED, 1)))
    assert current.state.batches == (
        batch(10, 11, AVAILABLE, 1), batch(12, 13, ACKNOWLEDGED, 1), batch(14, 19, AVAILABLE, 1))


def test_a_start_offset_of_minus_1_leaves_the_start_and_a_new_one_drops_what_is_below():
    before = snapshot(10, batch(10, 14, AVAILABLE, 1), batch(15, 19, ARCHIVED, 1))
    assert apply_update(before, update(-1)).state.start_offset == 10
    moved = apply_update(before, update(12)).state
    assert moved.start_offset == 12
    assert moved.batches == (batch(12, 14, AVAILABLE, 1), batch(15, 19, ARCHIVED, 1))
    assert apply_update(before, update(20)).state.batches == ()


def test_the_leader_epoch_changes_unless_minus_1_and_the_epochs_of_the_snapshot_stay():
    before = ShareSnapshot(snapshot_epoch=4, leader_epoch=2, state=ShareState(7, 0, ()))
    assert apply_update(before, update(-1, leader_epoch=-1)) == before
    after = apply_update(before, update(-1, leader_epoch=3))
    assert (after.snapshot_epoch, after.leader_epoch, after.state.state_epoch) == (4, 3, 7)


def test_batches_alike_that_meet_are_merged_and_uncovered_offsets_stay_uncovered():
    current = apply_update(snapshot(0, batch(0, 4, AVAILABLE, 1), batch(20, 29, ARCHIVED, 2)),
                           update(-1, batch(5, 9, AVAILABLE, 1)))
    assert current.state.batches == (batch(0, 9, AVAILABLE, 1), batch(20, 29, ARCHIVED, 2))


def test_where_batches_overlap_the_higher_delivery_count_then_the_higher_state_wins():
    # Kafka's combiner: a replayed older update (a lower count) changes nothing.
    before = snapshot(0, batch(0, 9, ARCHIVED, 2))
    assert apply_update(before, update(-1, batch(3, 5, AVAILABLE, 1))) == before
    # Equal counts: Archived (4) over Acknowledged (2) over Available (0).
    assert combine_batches([batch(0, 9, ARCHIVED, 1), batch(3, 5, ACKNOWLEDGED, 1),
                            batch(8, 12, AVAILABLE, 1)], 0) == (
        batch(0, 9, ARCHIVED, 1), batch(10, 12, AVAILABLE, 1))


def test_combining_replays_the_updates_in_order():
    first = snapshot(0, batch(0, 9, AVAILABLE, 1))
    updates = [update(-1, batch(0, 4, ACKNOWLEDGED, 1)), update(5, batch(5, 9, AVAILABLE, 2)),
               update(-1, batch(5, 6, ARCHIVED, 2), leader_epoch=5)]
    assert combine(first, updates) == apply_update(
        apply_update(apply_update(first, updates[0]), updates[1]), updates[2])
    assert combine(first, updates) == ShareSnapshot(0, 5, ShareState(1, 5, (
        batch(5, 6, ARCHIVED, 2), batch(7, 9, AVAILABLE, 2))))
    assert combine(first, []) == first


def _winners(batches: list[StateBatch], start_offset: int) -> dict[int, tuple[int, int]]:
    """Per offset, the (count, state) of the highest batch covering it."""
    won: dict[int, tuple[int, int]] = {}
    for b in batches:
        for offset in range(max(b.first_offset, start_offset), b.last_offset + 1):
            won[offset] = max(won.get(offset, (-1, -1)), (b.delivery_count, b.delivery_state))
    return won


@given(st.lists(st.builds(
    lambda first, size, state, count: StateBatch(first, first + size, state, count),
    st.integers(0, 40), st.integers(0, 8), st.sampled_from([AVAILABLE, ACKNOWLEDGED, ARCHIVED]),
    st.integers(0, 3)), max_size=8), st.integers(0, 30))
def test_combined_batches_give_each_offset_its_highest_batch_once_in_fewest_batches(
        batches, start_offset):
    combined = combine_batches(batches, start_offset)
    assert _winners(list(combined), 0) == _winners(batches, start_offset)
    for earlier, later in pairwise(combined):
        assert earlier.last_offset < later.first_offset
        assert (earlier.last_offset + 1 < later.first_offset
                or (earlier.delivery_count, earlier.delivery_state)
                != (later.delivery_count, later.delivery_state))
