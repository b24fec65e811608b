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

1. A transactional batch is refused with INVALID_TXN_STATE. No transaction coordinator runs
   here yet, so no partition can have been added to a transaction; Kafka 3.6+ answers a
   transactional write to a partition outside any ongoing transaction the same way (KIP-890).
2. An epoch lower than the producer's current one comes from a fenced zombie:
   INVALID_PRODUCER_EPOCH (Kafka answers Produce with it since 2.7 rather than the fatal
   PRODUCER_FENCED, KIP-588).
3. Same epoch and exactly the sequence range of one of the last five batches: a retry of a
   batch that was written. It is not written again; the answer is its original offsets.
4. A higher epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER. A producer
   this partition does not know (new here, expired, or its data deleted) may start at any
   sequence: since KIP-360 the broker no longer answers UNKNOWN_PRODUCER_ID.
5. Same epoch: the first sequence must follow the last one (wrapping from Integer.MAX_VALUE
   to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER. That includes a retry older than the last five:
   Kafka no longer answers DUPLICATE_SEQUENCE_NUMBER.

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

from odradek.protocol.records import RecordBatch, iter_batches

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
    epoch: a new epoch starts afresh."""

    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq

    @property
    def last_timestamp(self) -> int:
        return self.batches[-1].timestamp

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        if epoch != self.producer_epoch:
            self.producer_epoch = epoch
            self.batches.clear()
        self.batches.append(batch)

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The batch with exactly this epoch and sequence range, if it is one of the last."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _MAX_SEQUENCE)


class ProducerStateManager:
    """The producer state of the partition whose directory is ``directory``. Open it with
    :meth:`load`; a new, empty one is ``ProducerStateManager(directory)``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._producers: dict[int, ProducerStateEntry] = {}

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    # -- appends -----------------------------------------------------------------------

    def validate_append(self, batch: RecordBatch) -> BatchMetadata | None:
        """Checks a batch a client sent, before it is appended (the rules in the module
        docstring). Returns the original batch if this one is a retry of it (do not
        append; answer with its offsets), None if it is to be appended; raises a
        `ProducerStateError` if it is refused."""
        if batch.is_transactional:
            raise InvalidTxnStateError(
                f"transactional batch from producer {batch.producer_id}: this broker does "
                f"not run a transaction coordinator yet"
            )
        producer_id, epoch, first_seq = batch.producer_id, batch.producer_epoch, batch.base_sequence
        entry = self._producers.get(producer_id)
        if entry is None:
            return None  # rule 4: an unknown producer starts anywhere
        duplicate = entry.find_duplicate(epoch, first_seq, batch.last_sequence)
        if duplicate is not None:
            return duplicate
        if epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"epoch {epoch} of producer {producer_id} is older than its current epoch "
                f"{entry.producer_epoch}"
            )
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

    def update(self, batch: RecordBatch) -> None:
        """Records a batch with a producer id that is now in the log (stamped: its offsets
        are the log's)."""
        entry = self._producers.get(batch.producer_id)
        if entry is None:
            entry = self._producers[batch.producer_id] = ProducerStateEntry(
                batch.producer_id, batch.producer_epoch
            )
        entry.add_batch(
            batch.producer_epoch,
            BatchMetadata(batch.last_sequence, batch.last_offset, batch.last_offset_delta,
                          batch.max_timestamp),
        )

    def last_batch_offsets(self) -> dict[int, int]:
        """Producer id -> the last offset of its last batch, for every producer not expired
        (Kafka's ``activeProducers``' ``lastDataOffset``): the batches compaction keeps,
        emptied if need be, so that the state can be rebuilt from the log."""
        return {producer_id: entry.batches[-1].last_offset
                for producer_id, entry in self._producers.items() if entry.batches}

    def remove_expired_producers(self, now_ms: int, producer_id_expiration_ms: int) -> int:
        """Forgets the producers whose last batch is ``producer.id.expiration.ms`` old;
        returns how many."""
        expired = [
            producer_id for producer_id, entry in self._producers.items()
            if now_ms - entry.last_timestamp >= producer_id_expiration_ms
        ]
        for producer_id in expired:
            del self._producers[producer_id]
        return len(expired)

    # -- snapshots ---------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """The offsets of the snapshot files in the directory, oldest first."""
        matches = (_SNAPSHOT_FILE.fullmatch(path.name) for path in self.directory.iterdir())
        return sorted(int(match.group(1)) for match in matches if match)

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
        for old in self.snapshot_offsets()[:-SNAPSHOTS_TO_RETAIN]:
            snapshot_path(self.directory, old).unlink(missing_ok=True)

    def truncate_fully(self) -> None:
        """The log starts afresh: every producer is forgotten, every snapshot deleted."""
        self._producers = {}
        for offset in self.snapshot_offsets():
            snapshot_path(self.directory, offset).unlink()

    @classmethod
    def load(
        cls, log: PartitionLog, *, now_ms: int, producer_id_expiration_ms: int
    ) -> ProducerStateManager:
        """The state of ``log``'s producers when it opens (see :meth:`rebuild`), without the
        producers idle for ``producer.id.expiration.ms``."""
        state = cls(log.directory)
        for path in log.directory.glob(f"*{SNAPSHOT_SUFFIX}{_TMP_SUFFIX}"):
            path.unlink()  # a snapshot being written when the broker stopped
        state.rebuild(log)
        state.remove_expired_producers(now_ms, producer_id_expiration_ms)
        return state

    def rebuild(self, log: PartitionLog) -> None:
        """Replaces the state with that of ``log`` as it is now (Kafka's
        ``rebuildProducerState``): the newest readable snapshot at or below the log end
        offset, then every batch after it. Snapshots beyond the log end offset (the log was
        truncated, or recovery cut a torn tail) and unreadable ones are deleted, and all but
        the newest `SNAPSHOTS_TO_RETAIN` too."""
        self._producers = {}
        log_end_offset = log.log_end_offset
        replay_from = log.log_start_offset
        for offset in reversed(self.snapshot_offsets()):
            path = snapshot_path(log.directory, offset)
            if offset > log_end_offset:
                path.unlink()
                continue
            try:
                producers = decode_snapshot(path.read_bytes())
            except CorruptSnapshotError as e:
                logger.warning("deleting producer state snapshot %s: %s", path, e)
                path.unlink()
                continue
            self._producers = {entry.producer_id: entry for entry in producers}
            # The snapshot may predate the log start offset (retention, DeleteRecords): the
            # producers it knows are still worth knowing.
            replay_from = max(offset, log.log_start_offset)
            break
        for batch in batches_from(log, replay_from):
            if batch.has_producer_id:
                self.update(batch)
        for old in self.snapshot_offsets()[:-SNAPSHOTS_TO_RETAIN]:
            snapshot_path(log.directory, old).unlink()

    def __repr__(self) -> str:
        return f"ProducerStateManager({str(self.directory)!r}, producers={len(self._producers)})"


def snapshot_path(directory: Path, offset: int) -> Path:
    """``<directory>/00000000000000000050.snapshot`` for offset 50 (Kafka's name)."""
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


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

SNAPSHOT_VERSION = 1

# A snapshot file, all integers big-endian. The header:
#
#     offset  field           type    notes
#     0       version         int16   1
#     2       crc             uint32  CRC-32C of every byte after this field
#     6       producerCount   int32
#     10      producers
#
# Each producer, then its batches (oldest first; at least one, at most five):
#
#     producerId      int64
#     producerEpoch   int16
#     batchCount      int8
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
_PRODUCER = struct.Struct(">qhb")
_BATCH = struct.Struct(">iqiq")


def encode_snapshot(producers: Iterable[ProducerStateEntry]) -> bytes:
    """The snapshot file's bytes for ``producers`` (see the format above)."""
    body = bytearray()
    count = 0
    for entry in producers:
        body += _PRODUCER.pack(entry.producer_id, entry.producer_epoch, len(entry.batches))
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
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    if crc32c(memoryview(data)[_CRC_END:]) != crc:
        raise CorruptSnapshotError("CRC mismatch")
    position = _SNAPSHOT_HEADER.size
    producers = []
    try:
        for _ in range(count):
            producer_id, epoch, batch_count = _PRODUCER.unpack_from(data, position)
            position += _PRODUCER.size
            if not 0 < batch_count <= NUM_BATCHES_TO_RETAIN:
                raise CorruptSnapshotError(f"producer {producer_id} with {batch_count} batches")
            entry = ProducerStateEntry(producer_id, epoch)
            for _ in range(batch_count):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, position)))
                position += _BATCH.size
            producers.append(entry)
    except struct.error as e:
        raise CorruptSnapshotError(f"{count} producers do not fit in {len(data)} bytes") from e
    if position != len(data):
        raise CorruptSnapshotError(f"{len(data) - position} bytes after the last producer")
    return producers
