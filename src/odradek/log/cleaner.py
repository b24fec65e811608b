"""``LogCleaner``: compaction of ``cleanup.policy=compact`` logs (Kafka's ``LogCleaner``).

A compacted log keeps at least the latest record of each key. The cleaner splits a log at
its *first dirty offset* (where the last cleaning ended, kept across restarts in each log
dir's ``cleaner-offset-checkpoint``, Kafka's offset checkpoint format) and its *first
uncleanable offset*: the active segment's base offset, or the base of the first segment
that holds records newer than ``min.compaction.lag.ms`` or at or beyond the last stable
offset (KIP-98: an undecided transaction's records, and what follows them, stay as they
are until it ends)::

    log_start_offset   first dirty offset   first uncleanable offset   log_end_offset
    |   clean (cleaned before)  |   dirty          |   uncleanable (incl. active)  |

A log is cleaned when dirty bytes / cleanable bytes >= ``min.cleanable.dirty.ratio``, when
its first dirty batch is older than ``max.compaction.lag.ms``, or when a tombstone or a
transaction marker it kept may go (``deletes_due_ms``). One round, for example with
segments 0, 100, 200 and the active 300, first dirty offset 100: the *offset map* (key ->
latest offset) is built over [100, 300), leaving out the records of aborted transactions
(Kafka's ``buildOffsetMap``); segments 0..200 are rewritten keeping a record only if its
key has no later offset in the map and it is not in an aborted transaction; a tombstone
(null value) is dropped too once it sits in a segment below the first dirty offset whose
largest timestamp is ``delete.retention.ms`` old. Adjacent segments are merged while their
sizes add up to at most ``segment.bytes``. The next first dirty offset is 300.

The offset map holds at most ``log.cleaner.dedupe.buffer.size`` * ``log.cleaner.io.buffer.
load.factor`` / 24 keys (:class:`CleanerConfig`). When the dirty section has more, the map
takes whole segments while their keys fit and the round ends at the first segment that
would overflow it: in the example, if the keys of segments 100 and 200 together do not
fit, the round maps [100, 200), rewrites segments 0 and 100, and the next round starts at
200. A first dirty segment whose keys alone do not fit makes the log uncleanable until it
is reopened (Kafka 0.10's ``buildOffsetMap``; since 0.11 Kafka maps part of a segment).

What stays of each batch is :mod:`odradek.log.record_filter`'s decision (Kafka's
``filterTo``): records keep their offsets, a rewritten batch its base offset, last offset
and base sequence, and an emptied batch that holds an active producer's last sequence
stays as a header. The active producers and their last offsets come from the log's
producer state when the round is planned (Kafka's ``lastRecordsOfActiveProducers``), and
so do the aborted transactions overlapping the round (the transaction indexes, as
``collect_aborted_transactions`` finds them), which the round walks through in offset
order (:class:`~odradek.log.record_filter.CleanedTransactions`). Transaction markers stay
while their transaction has data, then carry a delete horizon (KIP-534) and go once it has
passed. A cleaned segment's ``.txnindex`` keeps the aborted transactions whose ABORT marker
it keeps for their data (Kafka's ``CleanedTransactionMetadata``); a transaction whose marker
is in a later segment keeps its entry there.

Concurrency: :func:`plan_cleaning` and :func:`swap_in` run on the event loop (they look at
and change the segment list); :func:`run_cleaning_job`, the reading and writing, runs in
a spawned worker process (so it does not hold the broker's GIL) on a :class:`CleaningJob`
of plain data, with descriptors of its own; the loop then opens what it wrote
(:func:`open_cleaned_segments`). :func:`build_cleaned_segments` does both on the calling
thread. Its output is ``<base>.log.cleaned``
(and ``.index.cleaned``, ``.timeindex.cleaned``), fsynced and renamed ``*.swap``; the swap
(:meth:`odradek.log.PartitionLog.replace_segments`) is abandoned if the log changed the
cleaned segments meanwhile (truncation, retention, DeleteRecords), and the loader completes
a swap a crash interrupted (:mod:`odradek.log.loader`).

Not done (Kafka does): tombstones age by their segment's largest record timestamp, not by
the delete horizon markers carry (KIP-534 gives tombstones one too). The last batch before
the round's end is dropped when emptied (Kafka keeps it as a header, so that the cleaned
segment still ends at the round's end offset).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from odradek.protocol.records import (
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    CorruptRecordError,
    RecordBatch,
    RecordsError,
)
from odradek.protocol.topic_partition import TopicPartition

from odradek.log.checkpoint import (
    CorruptCheckpointError,
    fsync_path,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from odradek.log.errors import KafkaStorageError
from odradek.log.open_files import OpenFiles
from odradek.log.partition_log import PartitionLog
from odradek.log.record_filter import (
    DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR,
    DEFAULT_DEDUPE_BUFFER_SIZE,
    CleanedTransactions,
    OffsetMap,
    offset_map_capacity,
    retain,
)
from odradek.log.segment import (
    CLEANED_FILE_SUFFIX,
    MAX_RELATIVE_OFFSET,
    SEGMENT_FILE_SUFFIXES,
    SWAP_FILE_SUFFIX,
    LogSegment,
    segment_path,
)
from odradek.log.transaction_index import AbortedTxn

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

# Segments are read whole batches at a time, this many bytes per read (a larger batch is
# read on its own).
READ_CHUNK = 4 * 1024 * 1024


class CleaningAbandoned(Exception):
    """The segments being cleaned went away or could not be read: the round is dropped."""


class OffsetMapTooSmallError(CleaningAbandoned):
    """The first dirty segment has more keys than the offset map holds: the log cannot be
    cleaned with this ``log.cleaner.dedupe.buffer.size``."""


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker configs a cleaning round follows (Kafka's ``CleanerConfig``, one cleaner
    thread)."""

    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE
    io_buffer_load_factor: float = DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR

    def __post_init__(self) -> None:
        # Refuses a buffer that cannot hold one key, as Kafka's Cleaner does at start.
        offset_map_capacity(self.dedupe_buffer_size, self.io_buffer_load_factor)

    @property
    def offset_map_capacity(self) -> int:
        return offset_map_capacity(self.dedupe_buffer_size, self.io_buffer_load_factor)


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    """What one round cleans, decided on the event loop."""

    log: PartitionLog
    segments: tuple[LogSegment, ...]  # the log's segments below end_offset, oldest first
    sizes: tuple[int, ...]  # their sizes now: the thread reads no further
    first_dirty_offset: int
    end_offset: int  # the first uncleanable offset: where the round ends if the map allows
    drop_tombstones: tuple[bool, ...]  # per segment: clean and past delete.retention.ms
    now_ms: int
    # producer id -> last offset of its last batch, for the active producers
    producer_last_offsets: dict[int, int]
    # producer id -> epoch, for the active producers with no batch of their epoch: their
    # markers of that epoch are what they wrote last
    producer_marker_epochs: dict[int, int]
    # the aborted transactions overlapping [segments[0].base_offset, end_offset)
    aborted_txns: tuple[AbortedTxn, ...]
    cleaner_config: CleanerConfig


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What the cleaning worker needs of one planned segment: plain, picklable data."""

    log_path: Path
    base_offset: int
    next_offset: int
    offset_entries: int
    time_entries: int
    offset_max_entries: int
    time_max_entries: int

    def can_hold(self, last_offset: int) -> bool:
        return last_offset - self.base_offset <= MAX_RELATIVE_OFFSET


@dataclass(frozen=True, slots=True)
class CleaningJob:
    """A plan as plain, picklable data, for :func:`run_cleaning_job` in a worker process."""

    name: str
    directory: Path
    segments: tuple[SegmentInfo, ...]
    sizes: tuple[int, ...]
    first_dirty_offset: int
    end_offset: int
    drop_tombstones: tuple[bool, ...]
    now_ms: int
    producer_last_offsets: dict[int, int]
    producer_marker_epochs: dict[int, int]
    aborted_txns: tuple[AbortedTxn, ...]
    offset_map_capacity: int
    segment_bytes: int
    index_interval_bytes: int
    segment_index_bytes: int
    delete_retention_ms: int

    @classmethod
    def of(cls, plan: CleaningPlan) -> CleaningJob:
        config = plan.log.config
        return cls(
            name=plan.log.name,
            directory=plan.log.directory,
            segments=tuple(
                SegmentInfo(
                    log_path=s.log_path, base_offset=s.base_offset, next_offset=s.next_offset,
                    offset_entries=len(s.offset_index), time_entries=len(s.time_index),
                    offset_max_entries=s.offset_index.max_entries,
                    time_max_entries=s.time_index.max_entries,
                )
                for s in plan.segments
            ),
            sizes=plan.sizes,
            first_dirty_offset=plan.first_dirty_offset,
            end_offset=plan.end_offset,
            drop_tombstones=plan.drop_tombstones,
            now_ms=plan.now_ms,
            producer_last_offsets=plan.producer_last_offsets,
            producer_marker_epochs=plan.producer_marker_epochs,
            aborted_txns=plan.aborted_txns,
            offset_map_capacity=plan.cleaner_config.offset_map_capacity,
            segment_bytes=config.segment_bytes,
            index_interval_bytes=config.index_interval_bytes,
            segment_index_bytes=config.segment_index_bytes,
            delete_retention_ms=config.delete_retention_ms,
        )


@dataclass(frozen=True, slots=True)
class JobResult:
    """The worker's output: the base offsets of the ``*.swap`` segments it wrote, how many
    of the planned segments they replace, where the round ended (the next first dirty
    offset), and when the first tombstone or transaction marker they kept may go."""

    base_offsets: tuple[int, ...]
    replaced: int
    end_offset: int
    deletes_due_ms: int | None


@dataclass(frozen=True, slots=True)
class CleanedSegments:
    """The ``*.swap`` segments, opened; the first ``replaced`` planned segments are what
    they replace."""

    segments: list[LogSegment]
    replaced: int
    end_offset: int
    deletes_due_ms: int | None


@dataclass(frozen=True, slots=True)
class CleanResult:
    end_offset: int
    deletes_due_ms: int | None


# -- planning (event loop) -----------------------------------------------------------------


def first_uncleanable_offset(log: PartitionLog, first_dirty_offset: int, now_ms: int) -> int:
    """The active segment's base offset, or the base of the first dirty segment holding a
    record newer than min.compaction.lag.ms or at or beyond the last stable offset (Kafka's
    ``LogCleanerManager.cleanableOffsets``; the last stable offset is at most the high
    watermark)."""
    segments = log.segments
    min_lag = log.config.min_compaction_lag_ms
    last_stable_offset = log.last_stable_offset
    for segment in segments[:-1]:
        if segment.next_offset <= first_dirty_offset or not segment.size:
            continue
        if (segment.next_offset > last_stable_offset
                or (min_lag > 0 and segment.largest_timestamp() > now_ms - min_lag)):
            return segment.base_offset
    return segments[-1].base_offset


def plan_cleaning(
    log: PartitionLog, first_dirty_offset: int, now_ms: int,
    deletes_due_ms: int | None = None, cleaner_config: CleanerConfig = CleanerConfig(),
) -> CleaningPlan | None:
    """The round to run on ``log`` now, or None if it needs none (Kafka's
    ``LogCleanerManager.grabFilthiestCompactedLog`` for one log)."""
    config = log.config
    if not config.compact or log.offline_reason is not None:
        return None
    if not log.log_start_offset <= first_dirty_offset <= log.log_end_offset:
        first_dirty_offset = log.log_start_offset  # truncated or trimmed since: start over
    end_offset = first_uncleanable_offset(log, first_dirty_offset, now_ms)
    cleanable = [s for s in log.segments[:-1] if s.base_offset < end_offset]
    if not cleanable:
        return None
    dirty = [s for s in cleanable if s.next_offset > first_dirty_offset and s.size]
    dirty_bytes = sum(s.size for s in dirty)
    total_bytes = sum(s.size for s in cleanable)
    due = (
        (dirty_bytes > 0 and dirty_bytes / total_bytes >= config.min_cleanable_dirty_ratio)
        or (dirty and now_ms - dirty[0].first_batch_timestamp() > config.max_compaction_lag_ms)
        or (deletes_due_ms is not None and now_ms >= deletes_due_ms)
    )
    if not due:
        return None
    horizon_ms = now_ms - config.delete_retention_ms
    return CleaningPlan(
        log=log,
        segments=tuple(cleanable),
        sizes=tuple(s.size for s in cleanable),
        first_dirty_offset=first_dirty_offset,
        end_offset=end_offset,
        drop_tombstones=tuple(
            s.next_offset <= first_dirty_offset and s.largest_timestamp() <= horizon_ms
            for s in cleanable
        ),
        now_ms=now_ms,
        producer_last_offsets=log.producer_state.last_batch_offsets(),
        producer_marker_epochs={entry.producer_id: entry.producer_epoch
                                for entry in log.producer_state.entries() if not entry.batches},
        aborted_txns=tuple(log.collect_aborted_transactions(cleanable[0].base_offset,
                                                            end_offset)),
        cleaner_config=cleaner_config,
    )


# -- cleaning (executor thread) ------------------------------------------------------------


def build_cleaned_segments(plan: CleaningPlan) -> CleanedSegments:
    """Reads the planned segments and writes their cleaned replacements as ``*.swap``
    files, fsynced, all on the calling thread (see :func:`run_cleaning_job`), then opens
    them as segments of the log. Raises ``CleaningAbandoned``."""
    return open_cleaned_segments(plan, run_cleaning_job(CleaningJob.of(plan)))


def run_cleaning_job(job: CleaningJob) -> JobResult:
    """The heavy part of a round: blocking, touching no state of the log and using
    descriptors of its own, so it runs in a worker process (or any thread). Raises
    ``CleaningAbandoned``."""
    try:
        offset_map, mapped = _build_offset_map(job)
        return _write_cleaned(job, offset_map, mapped)
    except (OSError, RecordsError, ValueError) as e:  # ValueError: offsets out of order
        raise CleaningAbandoned(f"{job.name}: {e}") from e


def open_cleaned_segments(plan: CleaningPlan, result: JobResult) -> CleanedSegments:
    """The ``*.swap`` files a job wrote, as segments on the log's descriptors (event loop:
    reads the indexes and at most the tail after the last index entry)."""
    config = plan.log.config
    segments: list[LogSegment] = []
    try:
        for base_offset in result.base_offsets:
            segment = LogSegment(
                plan.log.directory, base_offset,
                index_interval_bytes=config.index_interval_bytes,
                max_index_size=config.segment_index_bytes,
                files=plan.log.context.files, file_suffix=SWAP_FILE_SUFFIX,
            )
            segments.append(segment)
            segment._load_tail()
            if segment.size:
                segment.rolling_base_ms = plan.now_ms
    except (OSError, RecordsError, ValueError) as e:
        for segment in segments:
            with contextlib.suppress(OSError):
                segment.close()
        _remove_swap_files(plan.log.directory, result.base_offsets)
        raise CleaningAbandoned(f"{plan.log.name}: {e}") from e
    return CleanedSegments(segments, result.replaced, result.end_offset,
                           result.deletes_due_ms)


def _remove_swap_files(directory: Path, base_offsets: Iterable[int]) -> None:
    for base_offset in base_offsets:
        for suffix in SEGMENT_FILE_SUFFIXES:
            with contextlib.suppress(OSError):
                segment_path(directory, base_offset, suffix + SWAP_FILE_SUFFIX).unlink(
                    missing_ok=True)


def _build_offset_map(job: CleaningJob) -> tuple[OffsetMap, int]:
    """Key -> latest offset over the dirty segments, as many whole segments as fit the map
    (Kafka's ``buildOffsetMap``), and how many of the planned segments the round cleans:
    those before the first segment left out. The records of aborted transactions supersede
    nothing: they are left out. Raises ``OffsetMapTooSmallError`` if not even the first
    dirty segment fits."""
    offset_map = OffsetMap(job.offset_map_capacity)
    # The walk starts in the dirty section: transactions that ended before it are over.
    transactions = CleanedTransactions(
        txn for txn in job.aborted_txns if txn.last_offset >= job.first_dirty_offset)
    mapped_any = False
    for i, (segment, size) in enumerate(zip(job.segments, job.sizes)):
        if segment.next_offset <= job.first_dirty_offset:
            continue
        keys: dict[bytes, int] = {}
        for batch in _read_batches(segment.log_path, size):
            if batch.is_control_batch:
                transactions.on_control_batch(batch)
                continue
            if transactions.on_data_batch(batch):
                continue  # aborted
            for record in batch.records():
                if record.key is not None and record.offset >= job.first_dirty_offset:
                    keys[record.key] = record.offset
        if not offset_map.fits(keys):
            if not mapped_any:
                raise OffsetMapTooSmallError(
                    f"{job.name}: the segment at offset {segment.base_offset} has more keys "
                    f"than the offset map holds ({job.offset_map_capacity}); increase "
                    f"log.cleaner.dedupe.buffer.size")
            return offset_map, i
        offset_map.update(keys)
        mapped_any = True
    return offset_map, len(job.segments)


def _groups(job: CleaningJob, count: int) -> Iterator[list[int]]:
    """Indexes of adjacent segments among the first ``count`` merged into one, while their
    sizes add up to at most segment.bytes and their index entries fit one index (Kafka's
    ``groupSegmentsBySize``)."""
    max_bytes = job.segment_bytes
    group: list[int] = []
    group_bytes = offset_entries = time_entries = 0
    for i, segment in enumerate(job.segments[:count]):
        first = job.segments[group[0]] if group else segment
        if group and (
            group_bytes + job.sizes[i] > max_bytes
            or offset_entries + segment.offset_entries > first.offset_max_entries
            or time_entries + segment.time_entries > first.time_max_entries
            or not first.can_hold(segment.next_offset - 1)
        ):
            yield group
            group, group_bytes, offset_entries, time_entries = [], 0, 0, 0
        group.append(i)
        group_bytes += job.sizes[i]
        offset_entries += segment.offset_entries
        time_entries += segment.time_entries
    if group:
        yield group


def _is_producers_last(job: CleaningJob, batch: RecordBatch) -> bool:
    """Whether ``batch`` is what its active producer wrote last (Kafka's
    ``isBatchLastRecordOfProducer``): its last data batch, holding its last sequence, or,
    for a producer with no data batch of its epoch, a marker of that epoch."""
    if batch.is_control_batch:
        return job.producer_marker_epochs.get(batch.producer_id) == batch.producer_epoch
    return job.producer_last_offsets.get(batch.producer_id) == batch.last_offset


def _write_cleaned(job: CleaningJob, offset_map: OffsetMap, count: int) -> JobResult:
    """Rewrites the first ``count`` planned segments."""
    files = OpenFiles(capacity=1)  # this worker's own: the broker's are the loop's
    cleaned_segments: list[LogSegment] = []
    deletes_due: list[int] = []
    # One walk over the round's segments, in offset order, across the groups.
    transactions = CleanedTransactions(job.aborted_txns)
    try:
        for group in _groups(job, count):
            first = job.segments[group[0]]
            cleaned = LogSegment.create(
                job.directory, first.base_offset,
                index_interval_bytes=job.index_interval_bytes,
                max_index_size=job.segment_index_bytes,
                files=files, file_suffix=CLEANED_FILE_SUFFIX,
            )
            cleaned_segments.append(cleaned)
            kept_tombstone = False
            for i in group:
                for batch in _read_batches(job.segments[i].log_path, job.sizes[i]):
                    retained = retain(
                        batch, offset_map, transactions, drop_tombstones=job.drop_tombstones[i],
                        is_producers_last=_is_producers_last(job, batch), now_ms=job.now_ms,
                        delete_retention_ms=job.delete_retention_ms,
                    )
                    kept_tombstone = kept_tombstone or retained.kept_tombstone
                    if retained.data is not None:
                        cleaned.append(retained.data, [RecordBatch(retained.data)], job.now_ms)
                    if retained.aborted_txn is not None:
                        cleaned.txn_index.append(retained.aborted_txn)
                    if retained.delete_horizon_ms is not None:
                        deletes_due.append(retained.delete_horizon_ms)
            if kept_tombstone:
                newest = cleaned.max_timestamp if cleaned.max_timestamp != NO_TIMESTAMP \
                    else job.now_ms
                deletes_due.append(newest + job.delete_retention_ms)
        # An emptied segment goes, unless it is the first: its base offset holds the log
        # start (plans always begin at the log's first segment).
        kept = [s for i, s in enumerate(cleaned_segments) if s.size or i == 0]
        for segment in cleaned_segments:
            if segment not in kept:
                segment.close()
                segment.remove_files()
        for segment in kept:
            segment.persist_indexes()
            segment.fsync_log()
            segment.fsync_indexes()
            segment.rename_files(SWAP_FILE_SUFFIX)
        fsync_path(job.directory)
    except BaseException:
        for segment in cleaned_segments:
            segment.close()
            segment.remove_files()
        raise
    finally:
        files.close_all()
    end_offset = job.segments[count].base_offset if count < len(job.segments) \
        else job.end_offset
    return JobResult(tuple(s.base_offset for s in kept), count, end_offset,
                     min(deletes_due, default=None))


def _read_batches(log_path: Path, size: int) -> Iterator[RecordBatch]:
    """The batches in the first ``size`` bytes of the segment file ``log_path``, read
    through a descriptor of its own."""
    try:
        fd = os.open(log_path, os.O_RDONLY)
    except FileNotFoundError as e:
        raise CleaningAbandoned(f"{log_path} is gone") from e
    try:
        position = 0
        while position < size:
            chunk = os.pread(fd, min(READ_CHUNK, size - position), position)
            if len(chunk) < RECORD_BATCH_OVERHEAD:
                raise CorruptRecordError(f"{log_path}: truncated at {position}")
            batch_size = RecordBatch(chunk).size_in_bytes
            if batch_size > len(chunk):  # one batch larger than the chunk
                chunk = os.pread(fd, batch_size, position)
            offset = 0
            while offset + RECORD_BATCH_OVERHEAD <= len(chunk):
                batch = RecordBatch(chunk, offset)
                if batch.size_in_bytes < RECORD_BATCH_OVERHEAD:
                    raise CorruptRecordError(f"{log_path}: bad batch at {position}")
                if offset + batch.size_in_bytes > len(chunk):
                    break
                yield batch
                offset += batch.size_in_bytes
            if offset == 0:
                raise CorruptRecordError(f"{log_path}: truncated at {position}")
            position += offset
    finally:
        os.close(fd)


# -- swapping (event loop) -----------------------------------------------------------------


def swap_in(plan: CleaningPlan, cleaned: CleanedSegments) -> bool:
    """Puts the cleaned segments in place of the planned ones they replace; False (and
    the cleaned files removed) if the log changed those meanwhile."""
    try:
        swapped = plan.log.replace_segments(list(plan.segments[:cleaned.replaced]),
                                            list(plan.sizes[:cleaned.replaced]),
                                            cleaned.segments)
    except KafkaStorageError:
        swapped = False
    if not swapped:
        logger.info("%s: the log changed while it was cleaned; abandoning the round",
                    plan.log.name)
        for segment in cleaned.segments:
            with contextlib.suppress(OSError):
                segment.remove_files()
    return swapped


def clean(
    log: PartitionLog, first_dirty_offset: int, now_ms: int,
    deletes_due_ms: int | None = None, cleaner_config: CleanerConfig = CleanerConfig(),
) -> CleanResult | None:
    """One round on ``log``, all on the calling thread (tests and tools); None if the log
    needed none or the round was abandoned."""
    plan = plan_cleaning(log, first_dirty_offset, now_ms, deletes_due_ms, cleaner_config)
    if plan is None:
        return None
    try:
        cleaned = build_cleaned_segments(plan)
    except CleaningAbandoned as e:
        logger.warning("%s", e)
        return None
    if not swap_in(plan, cleaned):
        return None
    return CleanResult(cleaned.end_offset, cleaned.deletes_due_ms)


# -- the service -------------------------------------------------------------------------


@dataclass
class LogCleaner:
    """Cleans the compacted logs ``logs()`` returns, one at a time, and keeps each log
    dir's ``cleaner-offset-checkpoint``. Each round's heavy work (:func:`run_cleaning_job`)
    runs in a worker process of its own (spawned on first use, ended by :meth:`close`), so
    that it does not hold the broker's GIL; with ``use_process=False``, on
    ``run_in_executor``. A log whose first dirty segment has more keys than the offset map
    holds is left alone until it is reopened (Kafka's uncleanable partitions). Not
    thread-safe: the broker's event loop owns it."""

    logs: Callable[[], Iterable[tuple[TopicPartition, PartitionLog]]]
    log_dirs: list[Path]
    clock: Callable[[], int]
    run_in_executor: Callable[..., Awaitable]
    use_process: bool = True
    config: CleanerConfig = CleanerConfig()
    _pool: ProcessPoolExecutor | None = None
    _first_dirty: dict[TopicPartition, int] = field(default_factory=dict)
    _deletes_due: dict[TopicPartition, int] = field(default_factory=dict)
    # The log each key was last seen with: a topic deleted and created again starts over.
    _seen: dict[TopicPartition, PartitionLog] = field(default_factory=dict)
    _uncleanable: set[TopicPartition] = field(default_factory=set)

    def __post_init__(self) -> None:
        for log_dir in self.log_dirs:
            try:
                self._first_dirty.update(
                    read_offsets_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT))
            except (CorruptCheckpointError, OSError) as e:
                logger.warning("%s: cleaning its logs from their start", e)

    def first_dirty_offset(self, key: TopicPartition) -> int:
        return self._first_dirty.get(key, 0)

    async def clean_logs(self) -> int:
        """One round on every log that needs one; returns how many were cleaned."""
        cleaned_count = 0
        logs = dict(self.logs())
        for key in set(self._first_dirty) | set(self._deletes_due) | set(self._seen) \
                | self._uncleanable:
            if key not in logs or self._seen.get(key, logs[key]) is not logs[key]:
                self._forget(key)
        self._seen.update(logs)
        for key, log in logs.items():
            if key in self._uncleanable:
                continue
            plan = plan_cleaning(log, self.first_dirty_offset(key), self.clock(),
                                 self._deletes_due.get(key), self.config)
            if plan is None:
                continue
            try:
                result = await self._run_job(CleaningJob.of(plan))
                cleaned = open_cleaned_segments(plan, result)
            except OffsetMapTooSmallError as e:
                logger.error("%s; not cleaning it again until it is reopened", e)
                self._uncleanable.add(key)
                continue
            except CleaningAbandoned as e:
                logger.warning("abandoning a cleaning round: %s", e)
                continue
            except BrokenProcessPool as e:  # the worker died: a new one next round
                logger.error("%s: the cleaner's worker process failed: %s", log.name, e)
                self._pool = None
                _remove_swap_files(log.directory, (s.base_offset for s in plan.segments))
                continue
            if not swap_in(plan, cleaned):
                continue
            cleaned_count += 1
            self._first_dirty[key] = cleaned.end_offset
            if cleaned.deletes_due_ms is None:
                self._deletes_due.pop(key, None)
            else:
                self._deletes_due[key] = cleaned.deletes_due_ms
            logger.info("%s: cleaned up to offset %d", log.name, cleaned.end_offset)
        if cleaned_count:
            await self.run_in_executor(self.write_checkpoints, self.checkpoint_snapshot())
        return cleaned_count

    async def _run_job(self, job: CleaningJob) -> JobResult:
        if not self.use_process:
            return await self.run_in_executor(run_cleaning_job, job)
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, run_cleaning_job, job)

    def close(self) -> None:
        """Ends the worker process, after the round it is running (if any) ends."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _forget(self, key: TopicPartition) -> None:
        self._first_dirty.pop(key, None)
        self._deletes_due.pop(key, None)
        self._seen.pop(key, None)
        self._uncleanable.discard(key)

    def checkpoint_snapshot(self) -> dict[Path, dict[TopicPartition, int]]:
        snapshot: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
        for key, log in self.logs():
            if key in self._first_dirty and log.directory.parent in snapshot:
                snapshot[log.directory.parent][key] = self._first_dirty[key]
        return snapshot

    @staticmethod
    def write_checkpoints(snapshot: dict[Path, dict[TopicPartition, int]]) -> None:
        """Blocking (fsync): run on an executor thread. A failing dir is logged and skipped:
        its logs are cleaned again from their start after a restart, which is safe."""
        for log_dir, entries in snapshot.items():
            try:
                write_offsets_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, entries)
            except OSError as e:
                logger.error("%s: cannot write the cleaner checkpoint: %s", log_dir, e)
