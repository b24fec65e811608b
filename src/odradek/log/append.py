"""What an append to a ``PartitionLog`` checks, stamps and answers (Kafka's
``UnifiedLog.analyzeAndValidateRecords`` and ``LogAppendInfo``).

The two appends differ in where offsets come from:

- as leader, the log assigns them: each batch is stamped in place with its base offset,
  the leader epoch and, on LogAppendTime topics, the append time. A client's batches carry
  base offset 0: a batch of 3 records appended at log end offset 100 is stored as 100..102.
- as follower, the batches keep the offsets and partition leader epochs the leader gave
  them; they must start at or after the log end offset and increase from batch to batch,
  with gaps where the leader's cleaner removed records (batches 100..102 and 110..111 may
  follow log end offset 100).

Nothing here does I/O; the log writes what passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from odradek.log.errors import (
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from odradek.log.producer_state import BatchMetadata
from odradek.protocol.records import NO_TIMESTAMP, CorruptRecordError, RecordBatch, iter_batches


# Not frozen, like the other values built for every request: a frozen dataclass's
# __init__ costs four times as much (one object.__setattr__ per field). Nothing
# changes one once built.
@dataclass(slots=True)
class LogAppendInfo:
    """What an append did; the Produce response is made from it."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int  # last offset of the first batch reaching max_timestamp
    log_append_time: int  # -1 (NO_TIMESTAMP) unless the topic uses LogAppendTime
    log_start_offset: int
    records_count: int
    valid_bytes: int
    # flush.messages unflushed messages have accumulated: before answering, run
    # log.flush_to(last_offset + 1) in an executor.
    needs_flush: bool = False


def whole_batches(records: bytearray, segment_bytes: int) -> list[RecordBatch]:
    """The batches ``records`` is made of; refuses bytes that are not whole batches and
    records that could never fit in a segment."""
    batches = list(iter_batches(records))
    valid_bytes = sum(batch.size_in_bytes for batch in batches)
    if not batches or valid_bytes != len(records):
        raise CorruptRecordError(
            f"{len(records) - valid_bytes} of {len(records)} bytes are not whole batches"
        )
    if valid_bytes > segment_bytes:
        raise RecordBatchTooLargeError(
            f"{valid_bytes} bytes of records exceed segment.bytes {segment_bytes}"
        )
    return batches


def assign_offsets(batches: Sequence[RecordBatch], first_offset: int, leader_epoch: int,
                   log_append_time: int) -> None:
    """The leader's stamping, in place. v2 batches advance by lastOffsetDelta + 1 (the count
    may be lower after compaction)."""
    offset = first_offset
    for batch in batches:
        batch.set_base_offset(offset)
        batch.set_partition_leader_epoch(leader_epoch)
        if log_append_time != NO_TIMESTAMP:
            batch.set_log_append_time(log_append_time)
        offset = batch.next_offset


def check_replicated_offsets(batches: Sequence[RecordBatch], log_end_offset: int) -> None:
    """A follower's batches continue the log: the first starts at or after the log end
    offset (else Kafka's ``UnexpectedAppendOffsetException``), offsets increase within and
    across batches (else its ``OffsetsOutOfOrderException``), and each is intact (CRC)."""
    if batches[0].base_offset < log_end_offset:
        raise UnexpectedAppendOffsetError(batches[0].base_offset, log_end_offset)
    next_offset = log_end_offset
    for batch in batches:
        if batch.base_offset < next_offset or batch.last_offset_delta < 0:
            raise OffsetsOutOfOrderError(
                f"batch {batch.base_offset}..{batch.last_offset} does not follow offset "
                f"{next_offset - 1}"
            )
        if not batch.is_valid_crc():
            raise CorruptRecordError(
                f"replicated batch at offset {batch.base_offset} is corrupt (stored crc "
                f"{batch.crc}, computed {batch.compute_checksum()})"
            )
        next_offset = batch.next_offset


def append_info(batches: Sequence[RecordBatch], *, log_append_time: int,
                log_start_offset: int, needs_flush: bool) -> LogAppendInfo:
    """The answer for ``batches`` as written (stamped, if the leader stamped them)."""
    max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, batches[0].base_offset
    records_count = valid_bytes = 0
    for batch in batches:  # one pass: a produce's single batch is the common case
        if batch.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
        records_count += batch.records_count
        valid_bytes += batch.size_in_bytes
    return LogAppendInfo(batches[0].base_offset, batches[-1].last_offset, max_timestamp,
                         offset_of_max_timestamp, log_append_time, log_start_offset,
                         records_count, valid_bytes, needs_flush)


def duplicate_append_info(batch: RecordBatch, duplicate: BatchMetadata, *,
                          log_append_time_topic: bool, log_start_offset: int) -> LogAppendInfo:
    """The answer to a producer's retry of a batch already written: the answer its first
    attempt got, with the original offsets and, on LogAppendTime topics, the original
    log-append time (the stored max timestamp), -1 otherwise. Kafka sends the stored max
    timestamp as log-append time on CreateTime topics too, which makes clients report the
    record as stamped by the broker."""
    return LogAppendInfo(
        first_offset=duplicate.first_offset,
        last_offset=duplicate.last_offset,
        max_timestamp=duplicate.timestamp,
        offset_of_max_timestamp=duplicate.last_offset,
        log_append_time=duplicate.timestamp if log_append_time_topic else NO_TIMESTAMP,
        log_start_offset=log_start_offset,
        records_count=batch.records_count,
        valid_bytes=batch.size_in_bytes,
    )
