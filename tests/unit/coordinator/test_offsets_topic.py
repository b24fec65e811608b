"""Records of __consumer_offsets: Kafka's bytes, and Kafka's choice of partition."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.group.offsets_topic import (
    GroupKey,
    OffsetAndMetadata,
    OffsetKey,
    OffsetsRecordError,
    StoredGroup,
    StoredMember,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
)
from odradek.protocol.topic_partition import TopicPartition


# Expected values printed by Java 17 ("...".hashCode()).
@pytest.mark.parametrize(("text", "expected"), [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),
    ("my-group", -1906497762),
    ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE
    ("\U0001F600", 1772899),  # one code point, two UTF-16 code units
])
def test_the_hash_is_javas_string_hash_code(text, expected):
    assert java_string_hash(text) == expected


def test_the_partition_is_kafkas_abs_of_the_hash_modulo_the_partition_count():
    assert partition_for("my-group", 50) == 12  # a negative hash: abs first, then modulo
    # Utils.abs(Integer.MIN_VALUE) is 0, not MIN_VALUE's negation.
    assert partition_for("polygenelubricants", 50) == 0


def test_an_offset_commit_key_is_kafkas_version_1_layout():
    key = offset_commit_key("g", TopicPartition("t", 0))
    assert key == bytes.fromhex("0001" "0001" "67" "0001" "74" "00000000")
    assert decode_key(key) == OffsetKey("g", TopicPartition("t", 0))


def test_a_group_metadata_key_is_kafkas_version_2_layout():
    key = group_metadata_key("g")
    assert key == bytes.fromhex("0002" "0001" "67")
    assert decode_key(key) == GroupKey("g")


def test_an_offset_commit_value_is_kafkas_version_3_layout():
    value = offset_commit_value(OffsetAndMetadata(42, 7, "m", 1_700_000_000_000))
    assert value == (bytes.fromhex("0003" "000000000000002a" "00000007" "0001") + b"m"
                     + (1_700_000_000_000).to_bytes(8, "big"))


def test_a_group_metadata_value_is_kafkas_version_3_layout():
    group = StoredGroup("consumer", 3, "range", "m1", 1_700_000_000_000, (
        StoredMember("m1", None, "c", "/127.0.0.1", 300_000, 45_000, b"sub", b"as"),))
    value = group_metadata_value(group)
    assert value == (
        bytes.fromhex("0003") + b"\x00\x08consumer" + bytes.fromhex("00000003")
        + b"\x00\x05range" + b"\x00\x02m1" + (1_700_000_000_000).to_bytes(8, "big")
        + bytes.fromhex("00000001") + b"\x00\x02m1" + bytes.fromhex("ffff") + b"\x00\x01c"
        + b"\x00\x0a/127.0.0.1" + (300_000).to_bytes(4, "big") + (45_000).to_bytes(4, "big")
        + b"\x00\x00\x00\x03sub" + b"\x00\x00\x00\x02as")
    assert decode_group_metadata_value(value) == group


_text = st.text(max_size=20)
_nullable = st.none() | _text


@given(st.builds(OffsetAndMetadata, st.integers(-1, 2**63 - 1), st.integers(-1, 2**31 - 1),
                 _text, st.integers(0, 2**62)))
def test_offset_commit_values_round_trip(offset):
    assert decode_offset_commit_value(offset_commit_value(offset)) == offset


@given(st.builds(StoredGroup, _text, st.integers(0, 2**31 - 1), _nullable, _nullable,
                 st.integers(-1, 2**62), st.lists(st.builds(
                     StoredMember, _text, _nullable, _text, _text, st.integers(0, 2**31 - 1),
                     st.integers(0, 2**31 - 1), st.binary(max_size=20),
                     st.binary(max_size=20)), max_size=4).map(tuple)))
def test_group_metadata_values_round_trip(group):
    assert decode_group_metadata_value(group_metadata_value(group)) == group


@pytest.mark.parametrize("record", [
    b"", b"\x00", bytes.fromhex("0003"), bytes.fromhex("0001" "0005" "67"),
])
def test_a_truncated_or_unknown_key_is_refused(record):
    with pytest.raises(OffsetsRecordError):
        decode_key(record)


def test_a_value_of_an_unknown_version_is_refused():
    with pytest.raises(OffsetsRecordError, match="version 9"):
        decode_offset_commit_value(bytes.fromhex("0009") + bytes(30))
