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

from dataclasses import dataclass, field

from odradek.protocol.records import CompressionType, Record, RecordBatch, build_batch

# Kafka's SkimpyOffsetMap stores an entry as a 16-byte MD5 hash of the key and an 8-byte
# offset; log.cleaner.dedupe.buffer.size is counted in those entries.
OFFSET_MAP_BYTES_PER_ENTRY = 24
# Kafka's defaults for log.cleaner.dedupe.buffer.size and log.cleaner.io.buffer.load.factor.
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR = 0.9


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
    if kept or holds_producers_last_sequence:
        return RetainedBatch(_rebuilt(batch, kept), kept_tombstone)
    return RetainedBatch(None)


def _keep(record: Record, offset_map: OffsetMap, drop_tombstones: bool) -> bool:
    if record.key is None:
        return True  # nothing to compact it against (a topic that was not compacted)
    latest = offset_map.get(record.key)
    if latest is not None and record.offset < latest:
        return False
    return not (record.value is None and drop_tombstones)


def _rebuilt(batch: RecordBatch, kept: list[Record]) -> bytes:
    """``kept`` in a batch over the original's whole offset and sequence range; with no
    record kept, the original's header alone (uncompressed, its max timestamp)."""
    return build_batch(
        kept,
        base_offset=batch.base_offset,
        last_offset=batch.last_offset,
        max_timestamp=None if kept else batch.max_timestamp,
        compression=batch.compression_type if kept else CompressionType.NONE,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        timestamp_type=batch.timestamp_type,
        partition_leader_epoch=batch.partition_leader_epoch,
    )
