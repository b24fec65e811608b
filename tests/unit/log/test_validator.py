"""The log validator: the checks every append needs (`analyze_and_validate`), the leader's
(`validate_for_leader`), which of them each origin skips, and KIP-467's per-record errors."""

from __future__ import annotations


import pytest
from kio.schema.errors import ErrorCode

from batch_edits import patched, restamp_crc
from odradek.log.errors import RecordBatchTooLargeError
from odradek.log.validator import (
    NO_TIMESTAMP_BOUND,
    AppendOrigin,
    RecordError,
    RecordValidationError,
    analyze_and_validate,
    validate_for_leader,
)
from odradek.protocol.records import (
    RECORD_BATCH_OVERHEAD,
    CompressionType,
    InvalidRecordError,
    Record,
    RecordsError,
    build_batch,
)
from odradek.protocol.topic_partition import TopicPartition

CODECS = list(CompressionType)
MAX_MESSAGE_BYTES = 1_048_588  # Kafka's max.message.bytes default
NOW_MS = 1_700_000_000_000
HOUR_MS = 3_600_000
ORDERS_0 = TopicPartition("orders", 0)
LATEST_PRODUCE_VERSION = 9


def topic_config(**overrides) -> dict:
    """A topic's effective configs as the broker parses them: Kafka's defaults, overridden
    by name with '_' for '.' (``cleanup_policy=("compact",)``)."""
    return {
        "segment.bytes": 1024**3,
        "cleanup.policy": ("delete",),
        "message.timestamp.type": "CreateTime",
        "message.timestamp.difference.max.ms": NO_TIMESTAMP_BOUND,
        "message.timestamp.before.max.ms": NO_TIMESTAMP_BOUND,
        "message.timestamp.after.max.ms": NO_TIMESTAMP_BOUND,
    } | {name.replace("_", "."): value for name, value in overrides.items()}


COMPACTED = topic_config(cleanup_policy=("compact",))


def records(count=3, *, keyless=(), timestamps=None) -> list[Record]:
    """Records at offsets 0..count-1 as a producer sends them; those at ``keyless`` have no
    key."""
    return [Record(i, NOW_MS if timestamps is None else timestamps[i],
                   None if i in keyless else b"key-%d" % i, b"value-%d" % i)
            for i in range(count)]


VALID = build_batch(records())


def garbled(batch: bytes) -> bytearray:
    """``batch`` with a first record that no longer parses, under a CRC that matches it."""
    edited = bytearray(batch)
    edited[RECORD_BATCH_OVERHEAD] = 0x7F
    return restamp_crc(edited)


def validate(data, config=None, *, origin=AppendOrigin.CLIENT,
             produce_version=LATEST_PRODUCE_VERSION, max_message_bytes=MAX_MESSAGE_BYTES,
             now_ms=NOW_MS):
    """Both stages, as the leader runs them for an append."""
    batch = analyze_and_validate(data, origin=origin, max_message_bytes=max_message_bytes)
    validate_for_leader(batch, topic_config() if config is None else config,
                        topic_partition=ORDERS_0, origin=origin, now_ms=now_ms,
                        produce_version=produce_version)
    return batch


def record_errors_of(raised: pytest.ExceptionInfo) -> list[int]:
    return [error.batch_index for error in raised.value.record_errors]


# -- the checks every append needs, and the client batch checks --------------------------------

CLIENT_REJECTIONS = {
    # ProduceRequest.validateRecords: exactly one magic v2 batch.
    "no records": (None, ErrorCode.invalid_record),
    "empty records": (b"", ErrorCode.invalid_record),
    "a truncated batch": (VALID[:-1], ErrorCode.invalid_record),
    "less than a length field": (VALID[:10], ErrorCode.invalid_record),
    "two batches": (VALID + VALID, ErrorCode.invalid_record),
    "a legacy magic v1 batch": (patched(VALID, ">b", 16, 1, fix_crc=False),
                                ErrorCode.invalid_record),
    "an impossible magic": (patched(VALID, ">b", 16, 9, fix_crc=False),
                            ErrorCode.corrupt_message),
    "a length below any message": (patched(VALID, ">i", 8, 13, fix_crc=False),
                                   ErrorCode.corrupt_message),
    "trailing garbage": (VALID + b"\x00" * 5, ErrorCode.corrupt_message),
    "a partial second batch": (VALID + VALID[:30], ErrorCode.corrupt_message),
    # UnifiedLog.analyzeAndValidateRecords.
    "a base offset set by the client": (patched(VALID, ">q", 0, 5, fix_crc=False),
                                        ErrorCode.invalid_record),
    "a bad crc": (patched(VALID, ">q", 27, 12345, fix_crc=False), ErrorCode.corrupt_message),
    "an unknown codec": (patched(VALID, ">h", 21, 5), ErrorCode.corrupt_message),
    # LogValidator.validateBatch.
    "a count that disagrees with the offsets": (patched(VALID, ">i", 57, 2),
                                                ErrorCode.invalid_record),
    "a zero count": (patched(patched(VALID, ">i", 57, 0), ">i", 23, 0),
                     ErrorCode.invalid_record),
    "a negative last offset delta": (patched(VALID, ">i", 23, -5), ErrorCode.invalid_record),
    "a control batch": (build_batch(records(), is_control_batch=True),
                        ErrorCode.invalid_record),
    "a producer id without a sequence": (build_batch(records(), producer_id=4,
                                                     producer_epoch=0),
                                         ErrorCode.invalid_record),
}


@pytest.mark.parametrize(("data", "error_code"), CLIENT_REJECTIONS.values(),
                         ids=CLIENT_REJECTIONS.keys())
def test_a_clients_batch_is_refused_with_kafkas_error_code(data, error_code):
    with pytest.raises(RecordsError) as raised:
        validate(data)
    assert raised.value.error_code is error_code


def test_a_batch_over_max_message_bytes_is_message_too_large():
    validate(VALID, max_message_bytes=len(VALID))
    with pytest.raises(RecordsError) as raised:
        validate(VALID, max_message_bytes=len(VALID) - 1)
    assert raised.value.error_code is ErrorCode.message_too_large


def test_a_followers_batch_is_not_held_to_max_message_bytes_nor_to_base_offset_0():
    # Kafka's appendAsFollower: the leader accepted the batch, and gave it its offsets.
    stamped = patched(VALID, ">q", 0, 500, fix_crc=False)
    batch = analyze_and_validate(stamped, origin=AppendOrigin.REPLICATION,
                                 max_message_bytes=len(VALID) - 1)
    assert batch.base_offset == 500
    with pytest.raises(RecordsError):
        analyze_and_validate(patched(stamped, ">q", 27, 1, fix_crc=False),
                             origin=AppendOrigin.REPLICATION, max_message_bytes=len(VALID))


def test_the_validated_batch_is_a_view_over_the_callers_buffer_not_a_copy():
    data = bytearray(build_batch(records(4), producer_id=42, producer_epoch=3, base_sequence=8,
                                 is_transactional=True, compression=CompressionType.SNAPPY))
    batch = validate(data)
    assert (batch.producer_id, batch.base_sequence, batch.last_sequence) == (42, 8, 11)
    assert batch.buffer.obj is data
    batch.set_base_offset(70)  # the leader stamps the bytes it was given
    assert data[:8] == (70).to_bytes(8, "big")


# -- the leader's batch checks ------------------------------------------------------------------


def test_a_batch_larger_than_a_segment_is_record_list_too_large():
    validate(VALID, topic_config(segment_bytes=len(VALID)))
    with pytest.raises(RecordBatchTooLargeError) as raised:
        validate(VALID, topic_config(segment_bytes=len(VALID) - 1))
    assert raised.value.error_code is ErrorCode.record_list_too_large


def test_zstd_needs_produce_v7():
    zstd = build_batch(records(), compression=CompressionType.ZSTD)
    with pytest.raises(RecordsError) as raised:
        validate(zstd, produce_version=6)
    assert raised.value.error_code is ErrorCode.unsupported_compression_type
    validate(zstd, produce_version=7)
    validate(build_batch(records(), compression=CompressionType.LZ4), produce_version=6)


def test_a_coordinator_may_write_control_batches_and_no_produce_version_applies():
    # Kafka checks offsets, control records and sequences only for clients
    # (LogValidator.validateBatch); zstd's Produce version is a Produce request's rule.
    marker = build_batch(records(1), is_control_batch=True, compression=CompressionType.ZSTD)
    assert validate(marker, origin=AppendOrigin.COORDINATOR, produce_version=None).is_control_batch
    with pytest.raises(InvalidRecordError):
        validate(marker, origin=AppendOrigin.CLIENT, produce_version=None)


def test_a_coordinators_records_on_a_compacted_topic_still_need_keys():
    # __consumer_offsets is compacted: Kafka's key check applies to every origin.
    with pytest.raises(RecordValidationError) as raised:
        validate(build_batch(records(2, keyless={1})), COMPACTED,
                 origin=AppendOrigin.COORDINATOR, produce_version=None)
    assert record_errors_of(raised) == [1]


# -- per-record errors (KIP-467) ----------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_each_keyless_record_on_a_compacted_topic_is_named_by_its_index(codec):
    keyless = {0, 7, 13, 21, 42, 50, 64, 77, 98, 99}
    data = build_batch(records(100, keyless=keyless), compression=codec)
    validate(data)  # a topic that is not compacted takes them
    with pytest.raises(RecordValidationError) as raised:
        validate(data, COMPACTED)
    error = raised.value
    assert error.error_code is ErrorCode.invalid_record
    assert error.record_errors == tuple(
        RecordError(index, "Compacted topic cannot accept message without key in topic "
                           "partition orders-0")
        for index in sorted(keyless))
    assert error.error_message.startswith(
        "One or more records have been rejected due to 10 record errors in total")
    assert error.error_message.count("RecordError(") == 3  # Kafka quotes the first three


def test_keyed_records_on_a_compacted_topic_pass():
    validate(build_batch(records(5)), topic_config(cleanup_policy=("compact", "delete")))


@pytest.mark.parametrize(("configs", "age_ms", "accepted"), [
    ({"message_timestamp_before_max_ms": HOUR_MS}, 2 * HOUR_MS, False),
    ({"message_timestamp_before_max_ms": HOUR_MS}, HOUR_MS, True),
    ({"message_timestamp_after_max_ms": HOUR_MS}, -2 * HOUR_MS, False),
    ({"message_timestamp_after_max_ms": HOUR_MS}, 2 * HOUR_MS, True),
    ({"message_timestamp_difference_max_ms": HOUR_MS}, 2 * HOUR_MS, False),
    ({"message_timestamp_difference_max_ms": HOUR_MS}, -2 * HOUR_MS, False),
    ({"message_timestamp_difference_max_ms": HOUR_MS,
      "message_timestamp_before_max_ms": 3 * HOUR_MS}, 2 * HOUR_MS, True),
    ({"message_timestamp_type": "LogAppendTime",
      "message_timestamp_before_max_ms": HOUR_MS}, 2 * HOUR_MS, True),
], ids=["old-before", "at-the-bound", "future-after", "old-after", "old-difference",
        "future-difference", "before-over-difference", "log-append-time"])
def test_create_time_timestamps_are_checked_against_the_topic_bounds(configs, age_ms,
                                                                     accepted):
    data = build_batch(records(1, timestamps=[NOW_MS - age_ms]))
    if accepted:
        validate(data, topic_config(**configs))
        return
    with pytest.raises(RecordValidationError) as raised:
        validate(data, topic_config(**configs))
    assert raised.value.error_code is ErrorCode.invalid_timestamp
    assert record_errors_of(raised) == [0]


def test_each_record_out_of_bounds_is_named_even_between_in_bounds_first_and_last():
    # The first record's timestamp is the batch's base and the last is its max.
    data = build_batch(records(3, timestamps=[NOW_MS, NOW_MS - 2 * HOUR_MS, NOW_MS + 1]))
    with pytest.raises(RecordValidationError) as raised:
        validate(data, topic_config(message_timestamp_before_max_ms=HOUR_MS))
    assert raised.value.error_message == (
        "One or more records have been rejected due to invalid timestamp")
    [error] = raised.value.record_errors
    assert error.batch_index == 1
    assert error.batch_index_error_message == (
        f"Timestamp {NOW_MS - 2 * HOUR_MS} of message with offset 1 is out of range. The "
        f"timestamp should be within [{NOW_MS - HOUR_MS}, {NOW_MS + NO_TIMESTAMP_BOUND}]")


def test_a_record_failing_both_checks_gets_one_error_and_timestamps_decide_the_code():
    # Kafka's validateRecord reports a missing key before the timestamp; any invalid
    # timestamp makes the batch's error INVALID_TIMESTAMP.
    data = build_batch(records(3, keyless={0, 1}, timestamps=[NOW_MS, NOW_MS - 2 * HOUR_MS,
                                                              NOW_MS - 2 * HOUR_MS]))
    config = topic_config(cleanup_policy=("compact",), message_timestamp_before_max_ms=HOUR_MS)
    with pytest.raises(RecordValidationError) as raised:
        validate(data, config)
    assert raised.value.error_code is ErrorCode.invalid_timestamp
    assert record_errors_of(raised) == [0, 1, 2]
    assert "without key" in raised.value.record_errors[1].batch_index_error_message
    assert "out of range" in raised.value.record_errors[2].batch_index_error_message


# -- records are decoded only when a check needs them -------------------------------------------


def test_a_plain_topics_batch_is_validated_from_its_header_alone():
    validate(garbled(VALID))
    validate(garbled(VALID), topic_config(message_timestamp_type="LogAppendTime",
                                          message_timestamp_before_max_ms=HOUR_MS))


@pytest.mark.parametrize("config", [
    COMPACTED, topic_config(message_timestamp_after_max_ms=HOUR_MS),
], ids=["compacted", "bounded-timestamps"])
def test_records_are_decoded_when_the_topic_checks_each_one(config):
    with pytest.raises(InvalidRecordError):
        validate(garbled(VALID), config)


def test_undecodable_compressed_records_on_a_compacted_topic_are_a_corrupt_message():
    batch = bytearray(build_batch(records(), compression=CompressionType.LZ4))
    batch[RECORD_BATCH_OVERHEAD + 4:] = b"\x01" * (len(batch) - RECORD_BATCH_OVERHEAD - 4)
    with pytest.raises(RecordsError) as raised:
        validate(restamp_crc(batch), COMPACTED)
    assert raised.value.error_code is ErrorCode.corrupt_message
