"""Records of __transaction_state: Kafka's bytes, and Kafka's choice of partition."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.group.offsets_topic import partition_for as group_partition_for
from odradek.coordinator.transaction.log_records import (
    TransactionLogRecordError,
    partition_for,
    read_transaction_log_key,
    read_transaction_log_value,
    transaction_log_key,
    transaction_log_value,
    transaction_state_topic_configs,
)
from odradek.coordinator.transaction.metadata import TransactionState, TxnTransitMetadata
from odradek.protocol.topic_partition import TopicPartition

S = TransactionState
T0 = TopicPartition("t", 0)


def transit(state=S.ONGOING, partitions=(T0,), previous=-1, next_id=-1,
            version=2) -> TxnTransitMetadata:
    return TxnTransitMetadata(
        producer_id=7, previous_producer_id=previous, next_producer_id=next_id,
        producer_epoch=0, last_producer_epoch=-1, txn_timeout_ms=60_000, state=state,
        topic_partitions=frozenset(partitions), txn_start_timestamp_ms=1000,
        txn_last_update_timestamp_ms=1000, client_transaction_version=version)


def test_a_transactional_id_lives_where_a_group_of_the_same_name_would():
    assert partition_for("my-group", 50) == group_partition_for("my-group", 50) == 12
    assert partition_for("polygenelubricants", 50) == 0  # Integer.MIN_VALUE's hash


def test_a_key_is_kafkas_version_0_layout():
    key = transaction_log_key("t")
    assert key == bytes.fromhex("0000" "0001" "74")
    assert read_transaction_log_key(key) == "t"


def test_a_value_is_kafkas_flexible_version_1_layout():
    value = transaction_log_value(transit())
    assert value == bytes.fromhex(
        "0001"                                # version
        "0000000000000007" "0000" "0000ea60"  # producer 7, epoch 0, 60 s
        "01"                                  # Ongoing
        "02" "0274" "02" "00000000" "00"      # [t: [0]], no tags
        "00000000000003e8" "00000000000003e8"  # last update, start
        "01" "02" "02" "0002")                # one tag: ClientTransactionVersion 2
    txn = read_transaction_log_value("t", value)
    assert (txn.producer_id, txn.producer_epoch, txn.state, txn.topic_partitions,
            txn.client_transaction_version) == (7, 0, S.ONGOING, {T0}, 2)


def test_tagged_fields_at_their_defaults_are_left_out_and_the_others_written_in_tag_order():
    plain = transaction_log_value(transit(version=0))
    assert plain.endswith(bytes.fromhex("00000000000003e8" "00"))  # no tags

    tagged = transaction_log_value(transit(previous=5, next_id=9, version=2))
    assert tagged.endswith(bytes.fromhex(
        "03" "00" "08" "0000000000000005" "01" "08" "0000000000000009" "02" "02" "0002"))
    txn = read_transaction_log_value("t", tagged)
    assert (txn.previous_producer_id, txn.next_producer_id) == (5, 9)


def test_an_empty_transaction_writes_null_partitions():
    value = transaction_log_value(transit(state=S.EMPTY, partitions=()))
    assert value[17] == 0  # the partitions' compact length: null
    assert read_transaction_log_value("t", value).topic_partitions == set()


def test_partitions_are_grouped_by_topic():
    partitions = [TopicPartition("b", 1), TopicPartition("a", 0), TopicPartition("b", 0)]
    value = transaction_log_value(transit(partitions=partitions))
    assert bytes.fromhex("03" "0261" "02" "00000000" "00" "0262" "03" "00000000" "00000001"
                         "00") in value
    assert read_transaction_log_value("t", value).topic_partitions == set(partitions)


def test_a_version_0_value_is_read():
    value = (struct.pack(">hqhib", 0, 7, 3, 60_000, S.PREPARE_COMMIT)
             + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">ii", 1, 4)
             + struct.pack(">qq", 2000, 1000))
    txn = read_transaction_log_value("t", value)
    assert (txn.producer_id, txn.producer_epoch, txn.state, txn.topic_partitions,
            txn.txn_start_timestamp_ms, txn.txn_last_update_timestamp_ms,
            txn.previous_producer_id) == (7, 3, S.PREPARE_COMMIT, {TopicPartition("t", 4)},
                                          1000, 2000, -1)


def test_tags_this_broker_does_not_know_are_skipped():
    value = transaction_log_value(transit(version=0))
    unknown_tag = bytes.fromhex("01" "03" "02" "ffff")  # a later Kafka's tag 3
    txn = read_transaction_log_value("t", value[:-1] + unknown_tag)
    assert txn.state is S.ONGOING


_partitions = st.frozensets(st.builds(TopicPartition, st.text(min_size=1, max_size=8),
                                      st.integers(0, 2**31 - 1)), max_size=6)


@given(state=st.sampled_from([s for s in S if s is not S.EMPTY]), partitions=_partitions,
       producer_id=st.integers(0, 2**63 - 1), previous=st.integers(-1, 2**63 - 1),
       next_id=st.integers(-1, 2**63 - 1), epoch=st.integers(0, 32767),
       timeout=st.integers(1, 2**31 - 1), start=st.integers(-1, 2**62),
       update=st.integers(0, 2**62), version=st.integers(0, 2))
def test_values_round_trip(state, partitions, producer_id, previous, next_id, epoch, timeout,
                           start, update, version):
    written = TxnTransitMetadata(producer_id, previous, next_id, epoch, -1, timeout, state,
                                 partitions, start, update, version)
    txn = read_transaction_log_value("t", transaction_log_value(written))
    assert (txn.producer_id, txn.previous_producer_id, txn.next_producer_id,
            txn.producer_epoch, txn.txn_timeout_ms, txn.state, txn.topic_partitions,
            txn.txn_start_timestamp_ms, txn.txn_last_update_timestamp_ms,
            txn.client_transaction_version) == (producer_id, previous, next_id, epoch, timeout,
                                                state, partitions, start, update, version)


@given(st.text(max_size=30))
def test_keys_round_trip(transactional_id):
    assert read_transaction_log_key(transaction_log_key(transactional_id)) == transactional_id


@pytest.mark.parametrize("key", [b"", b"\x00", bytes.fromhex("0001" "0001" "74"),
                                 bytes.fromhex("0000" "0005" "74")])
def test_a_truncated_key_or_one_of_an_unknown_version_is_refused(key):
    with pytest.raises(TransactionLogRecordError):
        read_transaction_log_key(key)


def test_a_truncated_value_is_refused():
    value = transaction_log_value(transit())
    with pytest.raises(TransactionLogRecordError):
        read_transaction_log_value("t", value[:-3])


@pytest.mark.parametrize(("value", "message"), [
    (bytes.fromhex("0002") + bytes(40), "version 2"),
    (struct.pack(">hqhib", 1, 7, 0, 1, 9) + bytes(20), "status 9"),
])
def test_a_value_of_an_unknown_version_or_state_is_refused(value, message):
    with pytest.raises(TransactionLogRecordError, match=message):
        read_transaction_log_value("t", value)


def test_the_topic_is_created_compacted_uncompressed_with_its_own_min_isr_and_segments():
    config = {"transaction.state.log.min.isr": 2,
              "transaction.state.log.segment.bytes": 104857600}.__getitem__
    assert transaction_state_topic_configs(config, replication_factor=3) == {
        "cleanup.policy": "compact", "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false", "min.insync.replicas": "2",
        "segment.bytes": "104857600"}
    # A single broker could never write with min.insync.replicas 2.
    assert transaction_state_topic_configs(
        config, replication_factor=1)["min.insync.replicas"] == "1"
