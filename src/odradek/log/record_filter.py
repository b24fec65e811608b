"""What compaction keeps of one batch, and the bounded key -> offset map it decides by.

Kafka splits the same way: ``SkimpyOffsetMap`` holds the latest offset of each key of the
dirty section, and ``MemoryRecords.filterTo`` with the cleaner's ``RecordFilter`` rewrites
one batch at a time. :func:`retain` is that filter for one v2 batch:

* every record stays: the batch is copied byte for byte;
* some records stay: a new batch holds them at their own offsets (record offset deltas),
  with the original batch's base offset, last offset delta and base sequence, so that its
  offset and sequence ranges are the producer's (Kafka's ``buildRetainedRecordsInto``
  keeps ``originalBatch.baseOffset()`` and overrides the last offset). For example, a
  batch at offsets 100..104 with sequences 5..9 whose only record left is 103 becomes a
  one-record batch still at base offset 100, last offset 104, base sequence 5;
* no record stays: the batch goes, unless it holds its producer's last sequence, in which
  case only its header stays (``BatchRetention.RETAIN_EMPTY``): rebuilding the producer
  state from the log then still finds the producer's last sequence, and its next batch is
  not refused as OUT_OF_ORDER_SEQUENCE_NUMBER. Consumers skip the empty batch.

Pure functions on bytes: no I/O, safe on any thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.protocol.records import (
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    Record,
    RecordBatch,
    build_batch,
)

# Kafka's SkimpyOffsetMap stores an entry as a 16-byte MD5 hash of the key and an 8-byte
# offset; log.cleaner.dedupe.buffer.size is counted in those entries.
OFFSET_MAP_BYTES_PER_ENTRY = 24
# Kafka's defaults for log.cleaner.dedupe.buffer.size and log.cleaner.io.buffer.load.factor.
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR = 0.9

# The v2 header fields the cleaner rewrites, at their byte offsets in the header (the full
# layout is in odradek.protocol.records). The CRC covers everything from attributes on.
_BATCH_LENGTH = struct.Struct(">i")  # at 8: bytes after this field
_BATCH_LENGTH_OFFSET = 8
_CRC = struct.Struct(">I")
_CRC_OFFSET = 17
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_OFFSET = 21
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_OFFSET = 23
_BASE_TIMESTAMP = struct.Struct(">q")
_BASE_TIMESTAMP_OFFSET = 27
_RECORDS_COUNT = struct.Struct(">i")
_RECORDS_COUNT_OFFSET = 57
_COMPRESSION_CODEC_MASK = 0x07
_LOG_OVERHEAD = 12  # baseOffset + batchLength


def offset_map_capacity(dedupe_buffer_size: int, load_factor: float, threads: int = 1) -> int:
    """How many keys one cleaning round maps (Kafka's ``maxDesiredMapSize``): each cleaner
    thread gets an equal share of ``log.cleaner.dedupe.buffer.size`` (at most 2 GiB),
    filled to ``log.cleaner.io.buffer.load.factor``. Raises ``ValueError`` when not even
    one record fits, as Kafka's ``Cleaner`` refuses to start."""
    slots = min(dedupe_buffer_size // threads, 2**31 - 1) // OFFSET_MAP_BYTES_PER_ENTRY
    if slots * load_factor <= 1:
        raise ValueError(
            "offset map is too small to fit in even a single message, so log cleaning will "
            "never make progress: increase log.cleaner.dedupe.buffer.size")
    return int(slots * load_factor)


@dataclass(slots=True)
class OffsetMap:
    """Key -> latest offset in the dirty section, at most ``capacity`` keys (Kafka's
    ``SkimpyOffsetMap``, with whole keys instead of their hashes: no collisions, the same
    bound). Not thread-safe."""

    capacity: int
    offsets: dict[bytes, int] = field(default_factory=dict)

    def fits(self, keys: dict[bytes, int]) -> bool:
        """Whether adding ``keys`` keeps the map within its capacity."""
        new = sum(1 for key in keys if key not in self.offsets)
        return len(self.offsets) + new <= self.capacity

    def update(self, keys: dict[bytes, int]) -> None:
        self.offsets.update(keys)

    def get(self, key: bytes) -> int | None:
        return self.offsets.get(key)


@dataclass(frozen=True, slots=True)
class RetainedBatch:
    """What stays of one batch: its bytes (None if nothing), and whether it keeps a
    tombstone (the log then has one to remove after delete.retention.ms)."""

    data: bytes | None
    kept_tombstone: bool = False


def retain(
    batch: RecordBatch, offset_map: OffsetMap, *, drop_tombstones: bool,
    holds_producers_last_sequence: bool,
) -> RetainedBatch:
    """The batch as it stays in the cleaned log (see the module docstring)."""
    if batch.is_control_batch or batch.is_transactional:
        # Transactions do not exist in odradek yet: transactional batches are copied untouched.
        return RetainedBatch(bytes(batch.buffer))
    records = batch.records()
    kept = [r for r in records if _keep(r, offset_map, drop_tombstones)]
    kept_tombstone = any(r.value is None for r in kept if r.key is not None)
    if len(kept) == len(records) and records:
        return RetainedBatch(bytes(batch.buffer), kept_tombstone)
    if kept:
        return RetainedBatch(_rebuilt(batch, kept), kept_tombstone)
    if holds_producers_last_sequence:
        return RetainedBatch(empty_batch(batch))
    return RetainedBatch(None)


def _keep(record: Record, offset_map: OffsetMap, drop_tombstones: bool) -> bool:
    if record.key is None:
        return True  # nothing to compact it against (a topic that was not compacted)
    latest = offset_map.get(record.key)
    if latest is not None and record.offset < latest:
        return False
    return not (record.value is None and drop_tombstones)


def _rebuilt(batch: RecordBatch, kept: list[Record]) -> bytes:
    """``kept`` in a batch over the original's whole offset and sequence range."""
    data = bytearray(build_batch(
        kept,
        base_offset=batch.base_offset,
        compression=batch.compression_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        timestamp_type=batch.timestamp_type,
        partition_leader_epoch=batch.partition_leader_epoch,
    ))
    # build_batch ends the batch at its last record; Kafka's overrideLastOffset keeps the
    # original last offset so that the batch's last sequence stays the producer's.
    _LAST_OFFSET_DELTA.pack_into(data, _LAST_OFFSET_DELTA_OFFSET, batch.last_offset_delta)
    return _with_crc(data)


def empty_batch(batch: RecordBatch) -> bytes:
    """``batch``'s header alone, no records (Kafka's ``DefaultRecordBatch.writeEmptyHeader``):
    the same base offset, last offset delta, producer id, epoch, base sequence, flags and
    max timestamp; uncompressed, base timestamp -1, zero records."""
    data = bytearray(batch.buffer[:RECORD_BATCH_OVERHEAD])
    _BATCH_LENGTH.pack_into(data, _BATCH_LENGTH_OFFSET, RECORD_BATCH_OVERHEAD - _LOG_OVERHEAD)
    _ATTRIBUTES.pack_into(data, _ATTRIBUTES_OFFSET,
                          batch.attributes & ~_COMPRESSION_CODEC_MASK)
    _BASE_TIMESTAMP.pack_into(data, _BASE_TIMESTAMP_OFFSET, NO_TIMESTAMP)
    _RECORDS_COUNT.pack_into(data, _RECORDS_COUNT_OFFSET, 0)
    return _with_crc(data)


def _with_crc(data: bytearray) -> bytes:
    _CRC.pack_into(data, _CRC_OFFSET, RecordBatch(data).compute_checksum())
    return bytes(data)
