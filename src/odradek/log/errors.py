"""Typed errors of the log, each naming the Kafka error code the broker answers with
(the convention of :class:`odradek.protocol.records.RecordsError`).

Records that are not whole v2 batches raise the protocol layer's ``CorruptRecordError``.
"""

from __future__ import annotations

from typing import ClassVar

from kio.schema.errors import ErrorCode


class LogError(Exception):
    error_code: ClassVar[ErrorCode]


class OffsetOutOfRangeError(LogError):
    """An offset below ``log_start_offset`` or above ``log_end_offset`` (or, for
    DeleteRecords, above the high watermark)."""

    error_code = ErrorCode.offset_out_of_range

    def __init__(self, offset: int, lower: int, upper: int) -> None:
        super().__init__(f"offset {offset} is outside [{lower}, {upper}]")
        self.offset = offset


class RecordBatchTooLargeError(LogError):
    """Records larger than ``segment.bytes``: they could never fit in a segment (Kafka's
    ``RecordBatchTooLargeException``, sent as RECORD_LIST_TOO_LARGE)."""

    error_code = ErrorCode.record_list_too_large


class LogDirConflictError(LogError):
    """The same partition found in two log dirs: Kafka refuses to start rather than pick one
    ("Duplicate log directories found")."""

    error_code = ErrorCode.kafka_storage_error


class KafkaStorageError(LogError, OSError):
    """A log whose log dir failed (an I/O error in it, or missing or unreadable at startup):
    the partition is offline until a restart finds the dir healthy (Kafka's
    ``KafkaStorageException``). It is an ``OSError`` too, so code that already answers I/O
    failures with KAFKA_STORAGE_ERROR needs nothing new."""

    error_code = ErrorCode.kafka_storage_error


# A follower's append that does not continue its log. Only the replica fetcher meets these;
# Kafka's exceptions for them are not API errors, hence UNKNOWN_SERVER_ERROR.


class UnexpectedAppendOffsetError(LogError):
    """A follower's records starting below its log end offset (Kafka's
    ``UnexpectedAppendOffsetException``): it must truncate first."""

    error_code = ErrorCode.unknown_server_error

    def __init__(self, first_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"replicated records start at offset {first_offset}, below the log end offset "
            f"{log_end_offset}"
        )
        self.first_offset = first_offset
        self.log_end_offset = log_end_offset


class OffsetsOutOfOrderError(LogError):
    """A follower's batches whose offsets do not increase (Kafka's
    ``OffsetsOutOfOrderException``)."""

    error_code = ErrorCode.unknown_server_error
