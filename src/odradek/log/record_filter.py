"""What compaction keeps of one batch, the bounded key -> offset map it decides by, and
the transactions a cleaning round walks through.

Kafka splits the same way: ``SkimpyOffsetMap`` holds the latest offset of each key of the
dirty section, ``CleanedTransactionMetadata`` follows the transactions batch by batch, and
``MemoryRecords.filterTo`` with the cleaner's ``RecordFilter`` rewrites one batch at a time.
:func:`retain` is that filter for one v2 batch. A data batch:

* in an aborted transaction (KIP-98): no record stays;
* every record stays: the batch is copied byte for byte;
* some records stay: a new batch holds them at their own offsets (record offset deltas),
  with the original batch's base offset, last offset delta and base sequence, so that its
  offset and sequence ranges are the producer's (Kafka's ``buildRetainedRecordsInto``
  keeps ``originalBatch.baseOffset()`` and overrides the last offset). For example, a
  batch at offsets 100..104 with sequences 5..9 whose only record left is 103 becomes a
  one-record batch still at base offset 100, last offset 104, base sequence 5;
* no record stays: the batch goes, unless it holds its producer's last sequence, in which
  case only its header stays (``BatchRetention.RETAIN_EMPTY``): rebuilding the producer
  state from the log then still finds the producer's last sequence (and epoch), and its
  next batch is not refused as OUT_OF_ORDER_SEQUENCE_NUMBER. Consumers skip the empty
  batch.

A control batch (a COMMIT or ABORT marker) stays as it is while its transaction has data
in the log: a batch of it the round walked over, even one it removes (Kafka's rule; an
ABORT marker kept so also keeps its entry in the cleaned transaction index, which
read_committed consumers need to drop that data). Once the round finds no data of its
transaction, the marker may go, but only after ``delete.retention.ms`` (KIP-534), so that
a consumer reading meanwhile still sees how the transaction ended: the first round that
finds it so rewrites it with a *delete horizon*, that round's time + delete.retention.ms,
in its base timestamp (see :mod:`odradek.protocol.records`), and a round from the horizon
on removes it. A marker that is the last thing its producer wrote (it has no data batch of
its current epoch) stays, records and all, for the producer's epoch.

For example, producer 7 writes 10..11 in a transaction and aborts it (marker 12, index
entry (7, 10, 12)), producer 8 writes 13 and commits (marker 14), and both write more
later (neither batch is its producer's last). A round at time T removes 10..11 and keeps
marker 12 with its entry, and 13 unless its key has a later record; both markers stay. A
round at T2 finds no data of producer 7's transaction: marker 12 is stamped with the
horizon T2 + delete.retention.ms and its entry goes; the first round at or after the
horizon removes it. Marker 14 follows the same path once 13 is gone.

Pure functions on bytes and a state machine over the batches walked: no I/O, safe on any
thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.protocol.control_records import read_end_txn_marker
from odradek.protocol.records import CompressionType, Record, RecordBatch, build_batch

from odradek.log.transaction_index import AbortedTxn

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
class MarkerRead:
    """What the walk knows of a control batch: whether its transaction has no data left
    (the marker may go, after its delete horizon), and for an ABORT marker kept for its
    transaction's data, the transaction index entry that goes with it."""

    removable: bool
    aborted_txn: AbortedTxn | None = None


class CleanedTransactions:
    """The transactions a walk over the log (oldest batch first) is inside of (Kafka's
    ``CleanedTransactionMetadata``). ``aborted_txns`` are those overlapping the walk, from
    the transaction indexes: one becomes its producer's current aborted transaction when
    the walk reaches its first offset, and ends at its ABORT marker; the producer's
    transactional batches in between are its data. A transactional batch outside of one
    belongs to a committed transaction (the walk stays below the last stable offset), which
    its COMMIT marker ends. Not thread-safe."""

    def __init__(self, aborted_txns: Iterable[AbortedTxn]) -> None:
        # Not reached yet, the smallest first offset last.
        self._unreached = sorted(aborted_txns, key=lambda txn: txn.first_offset, reverse=True)
        # Producer id -> the aborted transaction the walk is in.
        self._aborted: dict[int, AbortedTxn] = {}
        # Producers whose current transaction had data in the walk.
        self._with_data: set[int] = set()

    def _reach(self, offset: int) -> None:
        while self._unreached and self._unreached[-1].first_offset <= offset:
            txn = self._unreached.pop()
            self._aborted.setdefault(txn.producer_id, txn)

    def on_data_batch(self, batch: RecordBatch) -> bool:
        """Walks over a data batch; whether it belongs to an aborted transaction."""
        self._reach(batch.last_offset)
        if not batch.is_transactional:
            return False
        self._with_data.add(batch.producer_id)
        return batch.producer_id in self._aborted

    def on_control_batch(self, batch: RecordBatch) -> MarkerRead:
        """Walks over a control batch. Raises ``CorruptRecordError`` for an unreadable one."""
        self._reach(batch.last_offset)
        if not batch.records_count:
            return MarkerRead(removable=True)  # emptied by a cleaner (Kafka's)
        marker = read_end_txn_marker(batch)
        if marker is None:
            return MarkerRead(removable=False)  # a control record of another kind: kept
        producer_id = batch.producer_id
        had_data = producer_id in self._with_data
        self._with_data.discard(producer_id)
        txn = None if marker.commit else self._aborted.pop(producer_id, None)
        return MarkerRead(removable=not had_data, aborted_txn=txn if had_data else None)


@dataclass(frozen=True, slots=True)
class RetainedBatch:
    """What stays of one batch: its bytes (None if nothing); whether it keeps a tombstone
    (the log then has one to remove after delete.retention.ms); the delete horizon a kept
    marker waits for; and the transaction index entry a kept ABORT marker keeps."""

    data: bytes | None
    kept_tombstone: bool = False
    delete_horizon_ms: int | None = None
    aborted_txn: AbortedTxn | None = None


def retain(
    batch: RecordBatch, offset_map: OffsetMap, transactions: CleanedTransactions, *,
    drop_tombstones: bool, is_producers_last: bool, now_ms: int, delete_retention_ms: int,
) -> RetainedBatch:
    """The batch as it stays in the cleaned log (see the module docstring), walking
    ``transactions`` over it. ``is_producers_last``: the batch holds its active producer's
    last sequence, or is a marker of a producer with no data batch of its epoch (Kafka's
    ``isBatchLastRecordOfProducer``)."""
    if batch.is_control_batch:
        return _retain_marker(batch, transactions.on_control_batch(batch), is_producers_last,
                              now_ms, delete_retention_ms)
    if transactions.on_data_batch(batch):
        return _emptied(batch, is_producers_last)
    records = batch.records()
    kept = [r for r in records if _keep(r, offset_map, drop_tombstones)]
    kept_tombstone = any(r.value is None for r in kept if r.key is not None)
    if len(kept) == len(records) and records:
        return RetainedBatch(bytes(batch.buffer), kept_tombstone)
    if kept:
        return RetainedBatch(_rebuilt(batch, kept), kept_tombstone)
    return _emptied(batch, is_producers_last)


def _retain_marker(batch: RecordBatch, marker: MarkerRead, is_producers_last: bool,
                   now_ms: int, delete_retention_ms: int) -> RetainedBatch:
    if not marker.removable:
        return RetainedBatch(bytes(batch.buffer), aborted_txn=marker.aborted_txn)
    if not batch.records_count:
        return _emptied(batch, is_producers_last)
    horizon = batch.delete_horizon_ms
    if horizon is None:
        # KIP-534: first found removable now; it goes at a round from the horizon on.
        horizon = now_ms + delete_retention_ms
        return RetainedBatch(_rebuilt(batch, batch.records(), delete_horizon_ms=horizon),
                             delete_horizon_ms=horizon)
    if now_ms < horizon:
        return RetainedBatch(bytes(batch.buffer), delete_horizon_ms=horizon)
    # Past its horizon. Kept whole when it is its producer's last: a rebuild of the
    # producer state reads the epoch from the marker's record, not from an empty batch.
    return RetainedBatch(bytes(batch.buffer) if is_producers_last else None)


def _emptied(batch: RecordBatch, is_producers_last: bool) -> RetainedBatch:
    """A batch none of whose records stay: its header alone if its producer needs it."""
    if not is_producers_last:
        return RetainedBatch(None)
    return RetainedBatch(_rebuilt(batch, []) if batch.records_count else bytes(batch.buffer))


def _keep(record: Record, offset_map: OffsetMap, drop_tombstones: bool) -> bool:
    if record.key is None:
        return True  # nothing to compact it against (a topic that was not compacted)
    latest = offset_map.get(record.key)
    if latest is not None and record.offset < latest:
        return False
    return not (record.value is None and drop_tombstones)


def _rebuilt(batch: RecordBatch, kept: list[Record], delete_horizon_ms: int | None = None
             ) -> bytes:
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
        is_control_batch=batch.is_control_batch,
        timestamp_type=batch.timestamp_type,
        partition_leader_epoch=batch.partition_leader_epoch,
        delete_horizon_ms=delete_horizon_ms,
    )
