"""Kafka's log validator: every check a record batch passes before it is appended.

Two stages, split as in Kafka's storage layer by who appends (`AppendOrigin`):

* `analyze_and_validate` (Kafka's ``UnifiedLog.analyzeAndValidateRecords``, with the batch
  rules of ``ProduceRequest.validateRecords``): what every append needs, leader or
  follower. Exactly one whole magic v2 batch, a base offset of 0 from a client, the size
  against ``max.message.bytes``, the CRC32C and a known compression codec. It reads the
  header once and returns a `RecordBatch` view over the caller's buffer, without a copy.
* `validate_for_leader` (Kafka's ``LogValidator``): what only the leader checks, before it
  assigns offsets. A client's batch must have consistent offsets and count, no control
  records, and a sequence when it has a producer id (``LogValidator.validateBatch``); zstd
  needs Produce v7 (KIP-110); the batch must fit in a segment (``segment.bytes``); and, per
  record, a key on compacted topics and a CreateTime timestamp within the topic's bounds.

Records are decoded only for the per-record checks, and only when the topic asks for one
(``cleanup.policy=compact``, or a bound on CreateTime timestamps); otherwise appending stays
header-only, which keeps the produce path from ever decompressing a batch.

KIP-467: a record that fails a per-record check fails its whole batch (nothing of it is
appended), and the error names every failing record by its index in the batch. For
example, a batch of 100 records to a compacted topic in which records 3 and 70 have no key
is refused with INVALID_RECORD and record errors for batch indexes 3 and 70.

The functions do no I/O and read no clock: the leader's ``now_ms`` is passed in.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.log.errors import RecordBatchTooLargeError
from odradek.protocol.compression import CompressionType
from odradek.protocol.records import (
    COMPRESSION_CODEC_MASK,
    NO_TIMESTAMP,
    Buffer,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatch,
    RecordsError,
    RecordTooLargeError,
    read_batch,
)
from odradek.protocol.topic_partition import TopicPartition

# KIP-110: zstd batches need Produce v7, so that older clients are never handed zstd data.
ZSTD_MIN_PRODUCE_VERSION = 7
# The default of the message.timestamp.*.max.ms configs (Long.MAX_VALUE): no bound.
NO_TIMESTAMP_BOUND = 2**63 - 1
# Kafka's INVALID_RECORD message quotes at most this many of the record errors; the
# response carries all of them.
RECORD_ERRORS_IN_MESSAGE = 3


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's ``AppendOrigin``); it decides which checks apply."""

    CLIENT = enum.auto()  # a Produce request
    COORDINATOR = enum.auto()  # a coordinator's own records (offsets, groups, markers)
    REPLICATION = enum.auto()  # a follower copying what its leader already validated


@dataclass(frozen=True, slots=True)
class RecordError:
    """One refused record, by its index in the batch (Kafka's ``ProduceResponse.RecordError``;
    the fields are Produce v8's, KIP-467)."""

    batch_index: int
    batch_index_error_message: str


class RecordValidationError(RecordsError):
    """Records that failed a per-record check; the batch is refused whole.

    ``error_code`` is INVALID_TIMESTAMP when any record's timestamp is out of range and
    INVALID_RECORD otherwise, ``error_message`` the partition's message and
    ``record_errors`` one entry per failing record (Kafka's ``RecordValidationException``).
    """

    def __init__(self, error_code: ErrorCode, error_message: str,
                 record_errors: Sequence[RecordError]) -> None:
        super().__init__(error_message)
        self.error_code = error_code
        self.error_message = error_message
        self.record_errors = tuple(record_errors)


class UnsupportedCompressionTypeError(RecordsError):
    """A zstd batch in a Produce request older than v7 (KIP-110)."""

    error_code = ErrorCode.unsupported_compression_type


def analyze_and_validate(records: Buffer | None, *, origin: AppendOrigin,
                         max_message_bytes: int) -> RecordBatch:
    """Validate the one batch of an append and return it: a view over ``records``.

    In Kafka's order and with its error codes: exactly one v2 batch (INVALID_RECORD; a
    length or magic no batch can have is CORRUPT_MESSAGE), base offset 0 from a client
    (INVALID_RECORD), the size (MESSAGE_TOO_LARGE; not for REPLICATION, which the leader
    already accepted), the CRC and the codec (CORRUPT_MESSAGE). A leader's append is one
    batch whatever its origin; a follower validates each fetched batch (``batch.buffer``).
    """
    if not records:
        raise InvalidRecordError("Produce requests must have at least one record batch")
    batch = read_batch(records)
    if batch is None:
        # Kafka finds no batch in a truncated one, hence INVALID_RECORD, not CORRUPT_MESSAGE.
        raise InvalidRecordError("Produce requests must have at least one record batch")
    size = batch.size_in_bytes
    if size != len(records):
        if read_batch(records, size) is not None:
            raise InvalidRecordError("Produce requests must contain exactly one record batch")
        # Kafka silently trims a partial trailing batch; no client sends one, so we refuse
        # rather than acknowledge bytes we dropped.
        raise CorruptRecordError(f"{len(records) - size} trailing bytes after the record batch")
    if origin is AppendOrigin.CLIENT and batch.base_offset != 0:
        raise InvalidRecordError(f"batch base offset should be 0, but it is {batch.base_offset}")
    if size > max_message_bytes and origin is not AppendOrigin.REPLICATION:
        raise RecordTooLargeError(
            f"record batch of {size} bytes exceeds max.message.bytes {max_message_bytes}"
        )
    if not batch.is_valid_crc():
        raise CorruptRecordError(
            f"record batch is corrupt (stored crc {batch.crc}, computed {batch.compute_checksum()})"
        )
    if batch.attributes & COMPRESSION_CODEC_MASK > CompressionType.ZSTD:
        raise CorruptRecordError(f"unknown compression codec in attributes {batch.attributes}")
    return batch


def validate_for_leader(batch: RecordBatch, topic_config: Mapping[str, Any], *,
                        topic_partition: TopicPartition, origin: AppendOrigin, now_ms: int,
                        produce_version: int | None = None) -> None:
    """The leader's checks of a batch `analyze_and_validate` returned, before it is appended.

    ``topic_config`` holds the topic's effective configs by Kafka's names (a ``Partition``'s
    ``topic_config``); ``produce_version`` is the Produce request's version for a CLIENT
    append. The batch checks are Kafka's for clients only: a coordinator writes control
    batches, and its offsets are its own. Raises `RecordValidationError` naming each record
    that fails a per-record check, or the typed error of the first batch check that fails.
    """
    if origin is AppendOrigin.CLIENT:
        _validate_client_batch(batch)
    if (produce_version is not None and produce_version < ZSTD_MIN_PRODUCE_VERSION
            and batch.compression_type is CompressionType.ZSTD):
        raise UnsupportedCompressionTypeError(
            f"Produce requests with version {produce_version} are not allowed to use "
            f"ZStandard compression"
        )
    segment_bytes = topic_config["segment.bytes"]
    if batch.size_in_bytes > segment_bytes:
        # Kafka: a batch that can never fit in a segment is RECORD_LIST_TOO_LARGE.
        raise RecordBatchTooLargeError(
            f"{batch.size_in_bytes} bytes exceed segment.bytes ({segment_bytes})"
        )
    compacted = "compact" in topic_config["cleanup.policy"]
    bounds = _timestamp_bounds(topic_config)
    if compacted or bounds is not None:
        _validate_records(batch, topic_partition, compacted=compacted, bounds=bounds,
                          now_ms=now_ms)


def _validate_client_batch(batch: RecordBatch) -> None:
    """Kafka's ``LogValidator.validateBatch`` for a client's batch, header only."""
    last_offset_delta = batch.last_offset_delta
    if last_offset_delta < 0:
        raise InvalidRecordError(f"invalid last offset delta {last_offset_delta}")
    # With a non-negative delta this also refuses Kafka's "invalid reported count" (<= 0).
    if batch.records_count != last_offset_delta + 1:
        raise InvalidRecordError(
            f"inconsistent batch offset range [0, {last_offset_delta}] and count of "
            f"records {batch.records_count}"
        )
    if batch.is_control_batch:
        raise InvalidRecordError("clients are not allowed to write control records")
    if batch.has_producer_id and batch.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence number {batch.base_sequence} in record batch with producerId "
            f"{batch.producer_id}"
        )


def _timestamp_bounds(topic_config: Mapping[str, Any]) -> tuple[int, int] | None:
    """(before.max.ms, after.max.ms) when the topic bounds CreateTime timestamps, else None.

    Each unset bound falls back to the deprecated message.timestamp.difference.max.ms, as in
    Kafka 3.6+ (KIP-937). LogAppendTime topics have none: the broker's clock replaces every
    timestamp.
    """
    if topic_config["message.timestamp.type"] != "CreateTime":
        return None
    difference_max_ms = topic_config["message.timestamp.difference.max.ms"]
    before_max_ms = topic_config["message.timestamp.before.max.ms"]
    after_max_ms = topic_config["message.timestamp.after.max.ms"]
    if before_max_ms == NO_TIMESTAMP_BOUND:
        before_max_ms = difference_max_ms
    if after_max_ms == NO_TIMESTAMP_BOUND:
        after_max_ms = difference_max_ms
    if before_max_ms == NO_TIMESTAMP_BOUND and after_max_ms == NO_TIMESTAMP_BOUND:
        return None
    return before_max_ms, after_max_ms


def _validate_records(batch: RecordBatch, topic_partition: TopicPartition, *, compacted: bool,
                      bounds: tuple[int, int] | None, now_ms: int) -> None:
    """Kafka's ``LogValidator.validateRecord``: at most one error per record, the key's
    before the timestamp's. The batch's max timestamp alone cannot decide the lower bound,
    and is only the producer's word for the upper one, so every record is read."""
    errors: list[RecordError] = []
    invalid_timestamp = False
    for batch_index, record in enumerate(batch.records()):
        if compacted and record.key is None:
            errors.append(RecordError(
                batch_index,
                f"Compacted topic cannot accept message without key in topic partition "
                f"{topic_partition}",
            ))
        elif bounds is not None and record.timestamp != NO_TIMESTAMP:
            before_max_ms, after_max_ms = bounds
            if (now_ms - record.timestamp > before_max_ms
                    or record.timestamp - now_ms > after_max_ms):
                invalid_timestamp = True
                errors.append(RecordError(
                    batch_index,
                    f"Timestamp {record.timestamp} of message with offset {record.offset} is "
                    f"out of range. The timestamp should be within "
                    f"[{now_ms - before_max_ms}, {now_ms + after_max_ms}]",
                ))
    if not errors:
        return
    if invalid_timestamp:
        # Kafka's message whatever the count; the details are in the record errors.
        raise RecordValidationError(
            ErrorCode.invalid_timestamp,
            "One or more records have been rejected due to invalid timestamp",
            errors,
        )
    raise RecordValidationError(
        ErrorCode.invalid_record,
        f"One or more records have been rejected due to {len(errors)} record errors in "
        f"total, and only showing the first three errors at most: "
        f"{errors[:RECORD_ERRORS_IN_MESSAGE]}",
        errors,
    )
