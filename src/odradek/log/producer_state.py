"""Producer state: what each idempotent producer last wrote to one partition (KIP-98).

An idempotent producer stamps every batch with its producer id, its epoch and the sequence
number of the batch's first record (sequences count records, per partition, from 0). The
partition remembers, per producer, the epoch and the last five batches, so that a batch
sent again after a lost response is answered with the offsets it already has instead of
being written twice, and a lost batch (a gap in the sequences) is refused instead of
silently skipped. Kafka keeps this next to the log (``ProducerStateManager``,
``ProducerStateEntry``, ``BatchMetadata`` in its storage module), and so does odradek.

The rules for a batch a client sends, checked before it is appended (Kafka's
``ProducerAppendInfo`` and ``UnifiedLog.analyzeAndValidateProducerState``):

1. A transactional batch must belong to a transaction the producer has going here at the
   same epoch, or carry the verification guard the partition handed out when the
   transaction coordinator confirmed that the partition is in the producer's ongoing
   transaction (KIP-890): otherwise INVALID_TXN_STATE. A marker appended since the guard was
   handed out voids it, so a write delayed past the end of its transaction cannot start a
   new one here.
2. An epoch lower than the producer's current one comes from a fenced zombie:
   INVALID_PRODUCER_EPOCH (Kafka answers Produce with it since 2.7 rather than the fatal
   PRODUCER_FENCED, KIP-588).
3. Same epoch and exactly the sequence range of one of the last five batches: a retry of a
   batch that was written. It is not written again; the answer is its original offsets.
   This rule goes first: a retry is answered so even once its transaction has ended, and
   the partition leader does not ask the coordinator about it (see
   ``ReplicaManager.append_records``).
4. A higher epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER. A producer
   this partition does not know (new here, expired, or its data deleted) may start at any
   sequence: since KIP-360 the broker no longer answers UNKNOWN_PRODUCER_ID.
5. Same epoch: the first sequence must follow the last one (wrapping from Integer.MAX_VALUE
   to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER. That includes a retry older than the last five:
   Kafka no longer answers DUPLICATE_SEQUENCE_NUMBER.

Transactions (KIP-98). A producer's first transactional batch here starts its transaction at
that batch's offset; the COMMIT or ABORT marker the coordinator appends ends it (see
:mod:`odradek.protocol.control_records`). A marker is refused with INVALID_PRODUCER_EPOCH
when its epoch is older than the producer's, and with TRANSACTION_COORDINATOR_FENCED when
its coordinator epoch is older than the last marker's. The state keeps every transaction
that has started and whose marker is not yet below the high watermark: the first of them
is the *first unstable offset*, and the last stable offset (what read_committed consumers
may read up to) is the lower of it and the high watermark. For example, producer 7 writes
offsets 10..12 in a transaction while producer 8 writes 13 without one: the last stable
offset stays at 10 until producer 7's marker (say at 14) is appended and replicated, then it
is the high watermark.

Batches read back from the log (rebuilding the state at open or after a truncation) and
batches a follower appends are recorded without these checks, as Kafka records replicated
batches: the leader checked them.

The log owns its producer state (``PartitionLog.producer_state``) and keeps it in step with
its records: it checks and records the batches it appends, and truncation rebuilds the state
as of the new log end offset (Kafka's ``rebuildProducerState``).

Snapshots (``<offset, 20 digits>.snapshot`` in the partition directory) hold the state as it
was when the log end offset was ``offset``. The log takes one when a segment rolls and one at
a clean shutdown; opening a partition, or truncating it, loads the newest one not beyond the
log end offset and replays the batch headers after it, so an unclean stop costs at most a
walk over the active segment. The format is in :func:`encode_snapshot`.

Producers idle for ``producer.id.expiration.ms`` are forgotten. "Idle" is measured, as in
Kafka (``ProducerStateManager.isProducerExpired``), by the max timestamp of the producer's
last batch (the append time on LogAppendTime topics).

This class is not thread-safe: the broker's event loop owns it. It does no I/O except
reading and writing snapshots, and reading the log at :meth:`ProducerStateManager.rebuild`.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import struct
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from odradek.protocol.control_records import EndTxnMarker, read_end_txn_marker
from odradek.protocol.records import NO_SEQUENCE, RecordBatch, RecordsError, iter_batches

from odradek.log.checkpoint import read_file
from odradek.log.errors import LogError

if TYPE_CHECKING:
    from odradek.log.partition_log import PartitionLog

logger = logging.getLogger(__name__)

# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: an idempotent producer keeps at most five
# requests in flight per connection (max.in.flight.requests.per.connection <= 5), so a retry
# is always of one of the last five batches.
NUM_BATCHES_TO_RETAIN = 5

# A clean stop leaves a snapshot at the log end offset and the previous one (the last roll)
# as a fallback should the newest be torn.
SNAPSHOTS_TO_RETAIN = 2

SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_FILE = re.compile(r"(\d{20})\.snapshot")
_TMP_SUFFIX = ".tmp"

# Rebuilding the state reads the log this much at a time (only the headers are looked at).
REBUILD_READ_BYTES = 1024 * 1024

# Kafka's producer.id.expiration.ms default (one day), for a log opened outside a broker.
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000

_MAX_SEQUENCE = 2**31 - 1


# -- errors ------------------------------------------------------------------------------


class ProducerStateError(LogError):
    """A batch the producer state refuses; ``error_code`` is the partition's answer."""


class InvalidProducerEpochError(ProducerStateError):
    error_code = ErrorCode.invalid_producer_epoch


class OutOfOrderSequenceError(ProducerStateError):
    error_code = ErrorCode.out_of_order_sequence_number


class InvalidTxnStateError(ProducerStateError):
    error_code = ErrorCode.invalid_txn_state


class TransactionCoordinatorFencedError(ProducerStateError):
    error_code = ErrorCode.transaction_coordinator_fenced


class CorruptSnapshotError(Exception):
    """A snapshot file that cannot be trusted: it is ignored and the log replayed instead."""


# -- state -------------------------------------------------------------------------------


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence``: sequences wrap at Integer.MAX_VALUE."""
    if sequence < decrement:
        return _MAX_SEQUENCE - (decrement - sequence) + 1
    return sequence - decrement


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One batch a producer wrote. A v2 batch's offsets and sequences advance together, so
    one delta gives both ranges: with last_seq 9, last_offset 104 and offset_delta 4 the
    batch held sequences 5..9 at offsets 100..104."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int  # the batch's max timestamp

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """A producer's epoch and its last batches (oldest first, at most five), all of that
    epoch: a new epoch starts afresh. A marker moves the epoch without a batch (transactions
    v2 bump it at every end), so a producer may have no batch of its current epoch yet."""

    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    # The coordinator epoch of the last marker: an older coordinator is fenced.
    coordinator_epoch: int = -1
    # Where the producer's ongoing transaction starts here, None when it has none.
    current_txn_first_offset: int | None = None
    # The max timestamp of its last batch or marker: expiration counts from it.
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        """The last sequence of its current epoch; -1 (NO_SEQUENCE) before the first batch,
        so that sequence 0 follows."""
        return self.batches[-1].last_seq if self.batches else -1

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.producer_epoch = epoch
            self.batches.clear()

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        self.set_epoch(epoch)
        self.batches.append(batch)
        self.last_timestamp = batch.timestamp

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The batch with exactly this epoch and sequence range, if it is one of the last."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """A transaction started here: its producer and first offset, and, once its marker is
    in the log, the marker's offset and whether it aborted."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None
    aborted: bool = False


class VerificationGuard:
    """What the partition hands out before asking the transaction coordinator to verify a
    producer's transaction; compared by identity. See rule 1 in the module docstring."""

    __slots__ = ("producer_id",)

    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id

    def __repr__(self) -> str:
        return f"VerificationGuard(producer_id={self.producer_id})"


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _MAX_SEQUENCE)


class ProducerStateManager:
    """The producer state of the partition whose directory is ``directory``. Open it with
    :meth:`load`; a new, empty one is ``ProducerStateManager(directory)``."""

    def __init__(self, directory: Path, snapshot_offsets: Iterable[int] = ()) -> None:
        self.directory = directory
        # The offsets of the snapshot files in the directory, oldest first: listed once at
        # load, then kept as snapshots are written and deleted (as Kafka's
        # ProducerStateManager keeps its snapshots map), so a roll lists no directory.
        self._snapshots = sorted(snapshot_offsets)
        self._producers: dict[int, ProducerStateEntry] = {}
        # Transactions started and not yet ended, by first offset. They start at the log
        # end, so insertion order is offset order: the first key is the smallest.
        self._ongoing: dict[int, TxnMetadata] = {}
        # Ended transactions whose marker is not below the high watermark yet, by first
        # offset, in the order their markers were appended.
        self._unreplicated: dict[int, TxnMetadata] = {}
        self._verification_guards: dict[int, VerificationGuard] = {}

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def entries(self) -> list[ProducerStateEntry]:
        return list(self._producers.values())

    # -- transactions ------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is ongoing or whose marker is
        not yet replicated; None when every transaction here is decided."""
        firsts = []
        if self._ongoing:
            firsts.append(next(iter(self._ongoing)))
        if self._unreplicated:  # in the order of their markers: a few, until replicated
            firsts.append(min(self._unreplicated))
        return min(firsts) if firsts else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is now below the high watermark are decided for good."""
        if not self._unreplicated:
            return
        for first_offset, txn in list(self._unreplicated.items()):
            if txn.last_offset < high_watermark:
                del self._unreplicated[first_offset]

    def duplicate_of(self, batch: RecordBatch) -> BatchMetadata | None:
        """The batch here that ``batch`` is a retry of: one of its producer's last batches,
        at the same epoch and sequence numbers (rule 3 in the module docstring)."""
        entry = self._producers.get(batch.producer_id)
        if entry is None or batch.base_sequence == NO_SEQUENCE:
            return None
        return entry.find_duplicate(batch.producer_epoch, batch.base_sequence,
                                    batch.last_sequence)

    def ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        entry = self._producers.get(producer_id)
        return (entry is not None and entry.current_txn_first_offset is not None
                and entry.producer_epoch == producer_epoch)

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        """A guard for a transactional write about to be verified with the coordinator
        (Kafka's ``maybeCreateVerificationStateEntry``): the producer's current one, or a
        new one. A marker for the producer voids it."""
        guard = self._verification_guards.get(producer_id)
        if guard is None:
            guard = self._verification_guards[producer_id] = VerificationGuard(producer_id)
        return guard

    def _end_transaction(self, entry: ProducerStateEntry, marker_offset: int,
                         aborted: bool) -> TxnMetadata:
        first_offset = entry.current_txn_first_offset
        if first_offset is None:
            first_offset = marker_offset  # a marker alone: nothing was written here
        else:
            self._ongoing.pop(first_offset, None)
        entry.current_txn_first_offset = None
        txn = TxnMetadata(entry.producer_id, first_offset, marker_offset, aborted)
        self._unreplicated[first_offset] = txn
        return txn

    def last_stable_offset_after(self, txn: TxnMetadata) -> int:
        """The last stable offset once ``txn`` ended (an aborted transaction index entry's
        last field, Kafka's ``lastStableOffset(completedTxn)``): the start of the first
        other transaction still ongoing, else the offset after the marker."""
        for other in self._ongoing.values():
            if other.producer_id != txn.producer_id:
                return other.first_offset
        return txn.last_offset + 1

    # -- appends -----------------------------------------------------------------------

    def validate_append(self, batch: RecordBatch,
                        verification_guard: VerificationGuard | None = None
                        ) -> BatchMetadata | None:
        """Checks a batch a client sent, before it is appended (the rules in the module
        docstring). Returns the original batch if this one is a retry of it (do not
        append; answer with its offsets), None if it is to be appended; raises a
        `ProducerStateError` if it is refused."""
        producer_id, epoch, first_seq = batch.producer_id, batch.producer_epoch, batch.base_sequence
        entry = self._producers.get(producer_id)
        # A coordinator's transactional batch (offsets a transaction commits) has no
        # sequence: only the epoch and the transaction are checked.
        sequenced = first_seq != NO_SEQUENCE
        duplicate = self.duplicate_of(batch)
        if duplicate is not None:
            return duplicate
        if batch.is_transactional and not self.ongoing_transaction(producer_id, epoch) \
                and (verification_guard is None
                     or self._verification_guards.get(producer_id) is not verification_guard):
            raise InvalidTxnStateError(
                f"transactional batch from producer {producer_id} at epoch {epoch}: the "
                f"partition is not in an ongoing transaction of that producer")
        if entry is None:
            return None  # rule 4: an unknown producer starts anywhere
        if epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"epoch {epoch} of producer {producer_id} is older than its current epoch "
                f"{entry.producer_epoch}"
            )
        if not sequenced:
            return None
        if epoch != entry.producer_epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"new epoch {epoch} of producer {producer_id} starts at sequence "
                    f"{first_seq}, not 0"
                )
        elif not _in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {producer_id}: {first_seq} "
                f"(incoming), {entry.last_seq} (current end sequence number)"
            )
        return None

    def validate_marker(self, batch: RecordBatch, marker: EndTxnMarker) -> None:
        """Checks a marker the coordinator sends (Kafka's ``appendEndTxnMarker`` checks)."""
        entry = self._producers.get(batch.producer_id)
        if entry is None:
            return
        if batch.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"marker epoch {batch.producer_epoch} of producer {batch.producer_id} is older "
                f"than its current epoch {entry.producer_epoch}")
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {batch.producer_id} from coordinator epoch "
                f"{marker.coordinator_epoch}, older than {entry.coordinator_epoch}")

    def update(self, batch: RecordBatch) -> TxnMetadata | None:
        """Records a batch with a producer id that is now in the log (stamped: its offsets
        are the log's). Returns the transaction a marker ended, None for other batches."""
        entry = self._producers.get(batch.producer_id)
        if entry is None:
            entry = self._producers[batch.producer_id] = ProducerStateEntry(
                batch.producer_id, batch.producer_epoch
            )
        if batch.is_control_batch:
            try:
                marker = read_end_txn_marker(batch)
            except RecordsError as e:
                logger.warning("%s: unreadable control batch at %d: %s", self.directory,
                               batch.base_offset, e)
                return None
            if marker is None:
                return None
            entry.set_epoch(batch.producer_epoch)
            entry.coordinator_epoch = marker.coordinator_epoch
            entry.last_timestamp = batch.max_timestamp
            self._verification_guards.pop(batch.producer_id, None)
            return self._end_transaction(entry, batch.base_offset, not marker.commit)
        if batch.base_sequence == NO_SEQUENCE:
            entry.set_epoch(batch.producer_epoch)
            entry.last_timestamp = batch.max_timestamp
        else:
            entry.add_batch(
                batch.producer_epoch,
                BatchMetadata(batch.last_sequence, batch.last_offset, batch.last_offset_delta,
                              batch.max_timestamp),
            )
        if batch.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = batch.base_offset
            self._ongoing[batch.base_offset] = TxnMetadata(batch.producer_id, batch.base_offset)
            self._verification_guards.pop(batch.producer_id, None)
        return None

    def last_batch_offsets(self) -> dict[int, int]:
        """Producer id -> the last offset of its last batch, for every producer not expired
        (Kafka's ``activeProducers``' ``lastDataOffset``): the batches compaction keeps,
        emptied if need be, so that the state can be rebuilt from the log."""
        return {producer_id: entry.batches[-1].last_offset
                for producer_id, entry in self._producers.items() if entry.batches}

    def remove_expired_producers(self, now_ms: int, producer_id_expiration_ms: int) -> int:
        """Forgets the producers whose last batch is ``producer.id.expiration.ms`` old and
        that have no transaction going here; returns how many."""
        expired = [
            producer_id for producer_id, entry in self._producers.items()
            if now_ms - entry.last_timestamp >= producer_id_expiration_ms
            and entry.current_txn_first_offset is None
        ]
        for producer_id in expired:
            del self._producers[producer_id]
            self._verification_guards.pop(producer_id, None)
        return len(expired)

    # -- snapshots ---------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """The offsets of the snapshot files in the directory, oldest first."""
        return list(self._snapshots)

    def _delete_snapshots(self, offsets: Iterable[int]) -> None:
        for offset in list(offsets):
            snapshot_path(self.directory, offset).unlink(missing_ok=True)
            self._snapshots.remove(offset)

    def take_snapshot(self, offset: int) -> None:
        """Writes the state as of log end offset ``offset`` (fsynced, replaced atomically),
        then deletes all but the newest `SNAPSHOTS_TO_RETAIN` snapshots."""
        path = snapshot_path(self.directory, offset)
        tmp = path.with_name(path.name + _TMP_SUFFIX)
        with open(tmp, "wb") as f:
            f.write(encode_snapshot(self._producers.values()))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        if offset not in self._snapshots:
            bisect.insort(self._snapshots, offset)
        self._delete_snapshots(self._snapshots[:-SNAPSHOTS_TO_RETAIN])

    def _reset(self) -> None:
        self._producers = {}
        self._ongoing = {}
        self._unreplicated = {}
        self._verification_guards = {}

    def truncate_fully(self) -> None:
        """The log starts afresh: every producer is forgotten, every snapshot deleted."""
        self._reset()
        self._delete_snapshots(self._snapshots)

    @classmethod
    def load(
        cls, log: PartitionLog, *, now_ms: int, producer_id_expiration_ms: int,
        file_names: Iterable[str] | None = None,
    ) -> ProducerStateManager:
        """The state of ``log``'s producers when it opens (see :meth:`rebuild`), without the
        producers idle for ``producer.id.expiration.ms``. ``file_names``: the names in the
        log's directory, if the caller listed it already."""
        snapshot_offsets = []
        for name in os.listdir(log.directory) if file_names is None else file_names:
            if name.endswith(SNAPSHOT_SUFFIX + _TMP_SUFFIX):
                # A snapshot being written when the broker stopped.
                (log.directory / name).unlink()
            elif match := _SNAPSHOT_FILE.fullmatch(name):
                snapshot_offsets.append(int(match.group(1)))
        state = cls(log.directory, snapshot_offsets)
        state.rebuild(log)
        state.remove_expired_producers(now_ms, producer_id_expiration_ms)
        return state

    def rebuild(self, log: PartitionLog) -> None:
        """Replaces the state with that of ``log`` as it is now (Kafka's
        ``rebuildProducerState``): the newest readable snapshot at or below the log end
        offset, then every batch after it. Snapshots beyond the log end offset (the log was
        truncated, or recovery cut a torn tail) and unreadable ones are deleted, and all but
        the newest `SNAPSHOTS_TO_RETAIN` too.

        Transactions ongoing at the snapshot continue; each abort marker replayed is given
        to ``log.restore_aborted_txn``, which adds it to its segment's transaction index if
        a crash lost it. Transactions ended below the log's high watermark are decided."""
        self._reset()
        log_end_offset = log.log_end_offset
        replay_from = log.log_start_offset
        for offset in reversed(self.snapshot_offsets()):
            if offset > log_end_offset:
                self._delete_snapshots([offset])
                continue
            path = os.path.join(self.directory, snapshot_file_name(offset))
            try:
                producers = decode_snapshot(read_file(path))
            except CorruptSnapshotError as e:
                logger.warning("deleting producer state snapshot %s: %s", path, e)
                self._delete_snapshots([offset])
                continue
            self._producers = {entry.producer_id: entry for entry in producers}
            ongoing = sorted((entry.current_txn_first_offset, entry.producer_id)
                             for entry in producers if entry.current_txn_first_offset is not None)
            self._ongoing = {first: TxnMetadata(producer_id, first)
                             for first, producer_id in ongoing}
            # The snapshot may predate the log start offset (retention, DeleteRecords): the
            # producers it knows are still worth knowing.
            replay_from = max(offset, log.log_start_offset)
            break
        for batch in batches_from(log, replay_from):
            if batch.has_producer_id:
                txn = self.update(batch)
                if txn is not None and txn.aborted:
                    log.restore_aborted_txn(txn, self.last_stable_offset_after(txn))
        self.on_high_watermark_updated(log.high_watermark)
        self._delete_snapshots(self._snapshots[:-SNAPSHOTS_TO_RETAIN])

    def __repr__(self) -> str:
        return f"ProducerStateManager({str(self.directory)!r}, producers={len(self._producers)})"


def snapshot_file_name(offset: int) -> str:
    """``00000000000000000050.snapshot`` for offset 50 (Kafka's name)."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_path(directory: Path, offset: int) -> Path:
    """``<directory>/00000000000000000050.snapshot`` for offset 50."""
    return directory / snapshot_file_name(offset)


def batches_from(log: PartitionLog, offset: int) -> Iterator[RecordBatch]:
    """Every batch holding an offset at or after ``offset``, read a chunk at a time."""
    while offset < log.log_end_offset:
        records = log.read(offset, REBUILD_READ_BYTES).records
        if not records:
            return
        next_offset = offset
        for batch in iter_batches(records):
            if batch.next_offset > offset:
                yield batch
            next_offset = batch.next_offset
        if next_offset <= offset:
            return  # no whole batch read back: stop rather than loop
        offset = next_offset


# -- snapshot format ---------------------------------------------------------------------

SNAPSHOT_VERSION = 2

# A snapshot file, all integers big-endian. The header:
#
#     offset  field           type    notes
#     0       version         int16   2 (1 is still read: it had no transactions)
#     2       crc             uint32  CRC-32C of every byte after this field
#     6       producerCount   int32
#     10      producers
#
# Each producer, then its batches (oldest first; at most five, none after a marker bumped
# the epoch):
#
#     producerId             int64
#     producerEpoch          int16
#     coordinatorEpoch       int32   of its last marker, -1 before any     (version 2)
#     currentTxnFirstOffset  int64   its ongoing transaction's start, -1   (version 2)
#     lastTimestamp          int64   of its last batch or marker           (version 2)
#     batchCount             int8
#     batches, each:
#       lastSequence  int32
#       lastOffset    int64
#       offsetDelta   int32   lastOffset - firstOffset (= lastSequence - firstSequence)
#       timestamp     int64   the batch's max timestamp
#
# Kafka's own snapshot keeps only each producer's last batch; keeping all five lets every
# request a producer had in flight be deduplicated after a restart, not only the last.
_SNAPSHOT_HEADER = struct.Struct(">hIi")
_CRC_END = 6  # version + crc: the CRC covers what follows
_PRODUCER_V1 = struct.Struct(">qhb")
_PRODUCER = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iqiq")


def encode_snapshot(producers: Iterable[ProducerStateEntry]) -> bytes:
    """The snapshot file's bytes for ``producers`` (see the format above)."""
    body = bytearray()
    count = 0
    for entry in producers:
        first = entry.current_txn_first_offset
        body += _PRODUCER.pack(entry.producer_id, entry.producer_epoch, entry.coordinator_epoch,
                               -1 if first is None else first, entry.last_timestamp,
                               len(entry.batches))
        for batch in entry.batches:
            body += _BATCH.pack(batch.last_seq, batch.last_offset, batch.offset_delta,
                                batch.timestamp)
        count += 1
    covered = struct.pack(">i", count) + body
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(covered)) + covered


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """The producers of a snapshot file; raises `CorruptSnapshotError` for a torn, altered
    or unknown one."""
    try:
        version, crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    except struct.error as e:
        raise CorruptSnapshotError(f"truncated header ({len(data)} bytes)") from e
    if version not in (1, SNAPSHOT_VERSION):
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    if crc32c(memoryview(data)[_CRC_END:]) != crc:
        raise CorruptSnapshotError("CRC mismatch")
    position = _SNAPSHOT_HEADER.size
    producers = []
    try:
        for _ in range(count):
            if version == 1:
                producer_id, epoch, batch_count = _PRODUCER_V1.unpack_from(data, position)
                coordinator_epoch, first, last_timestamp = -1, -1, -1
                position += _PRODUCER_V1.size
            else:
                (producer_id, epoch, coordinator_epoch, first, last_timestamp,
                 batch_count) = _PRODUCER.unpack_from(data, position)
                position += _PRODUCER.size
            if not (0 if version > 1 else 1) <= batch_count <= NUM_BATCHES_TO_RETAIN:
                raise CorruptSnapshotError(f"producer {producer_id} with {batch_count} batches")
            entry = ProducerStateEntry(producer_id, epoch, coordinator_epoch=coordinator_epoch,
                                       current_txn_first_offset=None if first < 0 else first,
                                       last_timestamp=last_timestamp)
            for _ in range(batch_count):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, position)))
                position += _BATCH.size
            if version == 1:
                entry.last_timestamp = entry.batches[-1].timestamp
            producers.append(entry)
    except struct.error as e:
        raise CorruptSnapshotError(f"{count} producers do not fit in {len(data)} bytes") from e
    if position != len(data):
        raise CorruptSnapshotError(f"{len(data) - position} bytes after the last producer")
    return producers
