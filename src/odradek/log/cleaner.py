"""``LogCleaner``: compaction of ``cleanup.policy=compact`` logs (Kafka's ``LogCleaner``).

A compacted log keeps at least the latest record of each key. The cleaner splits a log at
its *first dirty offset* (where the last cleaning ended, kept across restarts in each log
dir's ``cleaner-offset-checkpoint``, Kafka's offset checkpoint format) and its *first
uncleanable offset*: the active segment's base offset, or the base of the first segment
that holds records newer than ``min.compaction.lag.ms`` or beyond the high watermark::

    log_start_offset   first dirty offset   first uncleanable offset   log_end_offset
    |   clean (cleaned before)  |   dirty          |   uncleanable (incl. active)  |

A log is cleaned when dirty bytes / cleanable bytes >= ``min.cleanable.dirty.ratio``, when
its first dirty batch is older than ``max.compaction.lag.ms``, or when a tombstone it kept
has passed ``delete.retention.ms``. One round, for example with segments 0, 100, 200 and
the active 300, first dirty offset 100: the *offset map* (key -> latest offset) is built
over [100, 300); segments 0..200 are rewritten keeping a record only if its key has no
later offset in the map; a tombstone (null value) is dropped too once it sits in a
segment below the first dirty offset whose largest timestamp is ``delete.retention.ms``
old. Adjacent segments are merged while their sizes add up to at most ``segment.bytes``.
The next first dirty offset is 300.

Records keep their offsets: a rewritten batch holds the kept records at their original
offsets, its base offset the first kept one's, its producer id, epoch, flags and leader
epoch the original's, its base sequence that of the first kept record. A batch whose
records all stay is copied byte for byte, and so are control and transactional batches
(their records are not in the offset map either) and keyless records.

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

Not done (Kafka does): transactional batches are not compacted (aborted records are not
removed, committed ones supersede nothing), an emptied batch is not kept for its
producer's last sequence, and a rewritten batch's offsets run from its first to its last
kept record rather than over the original batch's whole range. The offset map holds whole
keys, not bounded by ``log.cleaner.dedupe.buffer.size``; a round cleans the whole
cleanable part of the log, however large. Tombstones age by their segment's largest
record timestamp, not by the time they were first cleaned (KIP-534's delete horizon).
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
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    CorruptRecordError,
    Record,
    RecordBatch,
    RecordsError,
    build_batch,
)

from odradek.log.checkpoint import (
    CorruptCheckpointError,
    fsync_path,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from odradek.log.errors import KafkaStorageError
from odradek.log.open_files import OpenFiles
from odradek.log.partition_log import PartitionLog
from odradek.log.segment import (
    CLEANED_FILE_SUFFIX,
    MAX_RELATIVE_OFFSET,
    SWAP_FILE_SUFFIX,
    LogSegment,
)

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

# Segments are read whole batches at a time, this many bytes per read (a larger batch is
# read on its own).
READ_CHUNK = 4 * 1024 * 1024

# Sequence numbers are int32 and wrap to 0 (Kafka's DefaultRecordBatch.incrementSequence).
_SEQUENCE_MODULUS = 2**31

TopicPartitionKey = tuple[str, int]


class CleaningAbandoned(Exception):
    """The segments being cleaned went away or could not be read: the round is dropped."""


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    """What one round cleans, decided on the event loop."""

    log: PartitionLog
    segments: tuple[LogSegment, ...]  # the log's segments below end_offset, oldest first
    sizes: tuple[int, ...]  # their sizes now: the thread reads no further
    first_dirty_offset: int
    end_offset: int  # the first uncleanable offset: the next round's first dirty offset
    drop_tombstones: tuple[bool, ...]  # per segment: clean and past delete.retention.ms
    now_ms: int


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
    drop_tombstones: tuple[bool, ...]
    now_ms: int
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
            drop_tombstones=plan.drop_tombstones,
            now_ms=plan.now_ms,
            segment_bytes=config.segment_bytes,
            index_interval_bytes=config.index_interval_bytes,
            segment_index_bytes=config.segment_index_bytes,
            delete_retention_ms=config.delete_retention_ms,
        )


@dataclass(frozen=True, slots=True)
class JobResult:
    """The worker's output: the base offsets of the ``*.swap`` segments it wrote, and when
    a tombstone they kept may go."""

    base_offsets: tuple[int, ...]
    tombstones_due_ms: int | None


@dataclass(frozen=True, slots=True)
class CleanedSegments:
    """The thread's output: the ``*.swap`` segments and when a tombstone they kept may go."""

    segments: list[LogSegment]
    tombstones_due_ms: int | None


@dataclass(frozen=True, slots=True)
class CleanResult:
    end_offset: int
    tombstones_due_ms: int | None


# -- planning (event loop) -----------------------------------------------------------------


def first_uncleanable_offset(log: PartitionLog, first_dirty_offset: int, now_ms: int) -> int:
    """The active segment's base offset, or the base of the first dirty segment holding a
    record newer than min.compaction.lag.ms or at or beyond the high watermark."""
    segments = log.segments
    min_lag = log.config.min_compaction_lag_ms
    for segment in segments[:-1]:
        if segment.next_offset <= first_dirty_offset or not segment.size:
            continue
        if (segment.next_offset > log.high_watermark
                or (min_lag > 0 and segment.largest_timestamp() > now_ms - min_lag)):
            return segment.base_offset
    return segments[-1].base_offset


def plan_cleaning(
    log: PartitionLog, first_dirty_offset: int, now_ms: int,
    tombstones_due_ms: int | None = None,
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
        or (tombstones_due_ms is not None and now_ms >= tombstones_due_ms)
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
        offset_map = _build_offset_map(job)
        return _write_cleaned(job, offset_map)
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
    return CleanedSegments(segments, result.tombstones_due_ms)


def _remove_swap_files(directory: Path, base_offsets: Iterable[int]) -> None:
    from odradek.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_path
    for base_offset in base_offsets:
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
            with contextlib.suppress(OSError):
                segment_path(directory, base_offset, suffix + SWAP_FILE_SUFFIX).unlink(
                    missing_ok=True)


def _build_offset_map(job: CleaningJob) -> dict[bytes, int]:
    """key -> latest offset in the dirty section (Kafka's ``SkimpyOffsetMap``)."""
    offset_map: dict[bytes, int] = {}
    for segment, size in zip(job.segments, job.sizes):
        if segment.next_offset <= job.first_dirty_offset:
            continue
        for batch in _read_batches(segment, size):
            if batch.is_control_batch or batch.is_transactional:
                continue  # see _retain
            for record in batch.records():
                if record.key is not None and record.offset >= job.first_dirty_offset:
                    offset_map[record.key] = record.offset
    return offset_map


def _groups(job: CleaningJob) -> Iterator[list[int]]:
    """Indexes of adjacent segments merged into one, while their sizes add up to at most
    segment.bytes and their index entries fit one index (Kafka's ``groupSegmentsBySize``)."""
    max_bytes = job.segment_bytes
    group: list[int] = []
    group_bytes = offset_entries = time_entries = 0
    for i, segment in enumerate(job.segments):
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


def _write_cleaned(job: CleaningJob, offset_map: dict[bytes, int]) -> JobResult:
    files = OpenFiles(capacity=1)  # this worker's own: the broker's are the loop's
    cleaned_segments: list[LogSegment] = []
    tombstones_due_ms: int | None = None
    try:
        for group in _groups(job):
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
                for batch in _read_batches(job.segments[i], job.sizes[i]):
                    retained, tombstone = _retain(batch, offset_map, job.drop_tombstones[i])
                    kept_tombstone = kept_tombstone or tombstone
                    if retained is not None:
                        cleaned.append(retained, [RecordBatch(retained)], job.now_ms)
            if kept_tombstone:
                newest = cleaned.max_timestamp if cleaned.max_timestamp != NO_TIMESTAMP \
                    else job.now_ms
                due = newest + job.delete_retention_ms
                tombstones_due_ms = due if tombstones_due_ms is None \
                    else min(tombstones_due_ms, due)
        # An emptied segment goes, unless it is the first: its base offset holds the log
        # start (plans always begin at the log's first segment).
        kept = [s for i, s in enumerate(cleaned_segments) if s.size or i == 0]
        for segment in cleaned_segments:
            if segment not in kept:
                segment.close()
                _remove_files(segment)
        for segment in kept:
            segment.persist_indexes()
            segment.fsync_log()
            segment.fsync_indexes()
            segment.rename_files(SWAP_FILE_SUFFIX)
        fsync_path(job.directory)
    except BaseException:
        for segment in cleaned_segments:
            segment.close()
            _remove_files(segment)
        raise
    finally:
        files.close_all()
    return JobResult(tuple(s.base_offset for s in kept), tombstones_due_ms)


def _retain(
    batch: RecordBatch, offset_map: dict[bytes, int], drop_tombstones: bool
) -> tuple[bytes | None, bool]:
    """The batch as it stays in the cleaned log (None if nothing stays), and whether it
    keeps a tombstone."""
    if batch.is_control_batch or batch.is_transactional:
        # Without transaction markers to tell aborted from committed records, a
        # transactional record neither supersedes another nor is superseded (Kafka leaves
        # aborted ones out of the offset map): the batch stays as it is.
        return bytes(batch.buffer), False
    records = batch.records()
    kept = [r for r in records if _keep(r, offset_map, drop_tombstones)]
    kept_tombstone = any(r.value is None and r.key is not None for r in kept)
    if len(kept) == len(records):
        return bytes(batch.buffer), kept_tombstone
    if not kept:
        return None, False
    return build_batch(
        kept,
        compression=batch.compression_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=_sequence_of(batch, kept[0]),
        is_transactional=batch.is_transactional,
        timestamp_type=batch.timestamp_type,
        partition_leader_epoch=batch.partition_leader_epoch,
    ), kept_tombstone


def _keep(record: Record, offset_map: dict[bytes, int], drop_tombstones: bool) -> bool:
    if record.key is None:
        return True  # nothing to compact it against (a topic that was not compacted)
    latest = offset_map.get(record.key)
    if latest is not None and record.offset < latest:
        return False
    return not (record.value is None and drop_tombstones)


def _sequence_of(batch: RecordBatch, record: Record) -> int:
    if batch.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return (batch.base_sequence + record.offset - batch.base_offset) % _SEQUENCE_MODULUS


def _read_batches(segment: LogSegment | SegmentInfo, size: int) -> Iterator[RecordBatch]:
    """The batches in the first ``size`` bytes of ``segment``, read through a descriptor of
    its own."""
    try:
        fd = os.open(segment.log_path, os.O_RDONLY)
    except FileNotFoundError as e:
        raise CleaningAbandoned(f"{segment.log_path} is gone") from e
    try:
        position = 0
        while position < size:
            chunk = os.pread(fd, min(READ_CHUNK, size - position), position)
            if len(chunk) < RECORD_BATCH_OVERHEAD:
                raise CorruptRecordError(f"{segment.log_path}: truncated at {position}")
            batch_size = RecordBatch(chunk).size_in_bytes
            if batch_size > len(chunk):  # one batch larger than the chunk
                chunk = os.pread(fd, batch_size, position)
            offset = 0
            while offset + RECORD_BATCH_OVERHEAD <= len(chunk):
                batch = RecordBatch(chunk, offset)
                if batch.size_in_bytes < RECORD_BATCH_OVERHEAD:
                    raise CorruptRecordError(f"{segment.log_path}: bad batch at {position}")
                if offset + batch.size_in_bytes > len(chunk):
                    break
                yield batch
                offset += batch.size_in_bytes
            if offset == 0:
                raise CorruptRecordError(f"{segment.log_path}: truncated at {position}")
            position += offset
    finally:
        os.close(fd)


def _remove_files(segment: LogSegment) -> None:
    segment.log_path.unlink(missing_ok=True)
    segment.offset_index.delete()
    segment.time_index.delete()


# -- swapping (event loop) -----------------------------------------------------------------


def swap_in(plan: CleaningPlan, cleaned: CleanedSegments) -> bool:
    """Puts the cleaned segments in place of the planned ones; False (and the cleaned
    files removed) if the log changed them meanwhile."""
    try:
        swapped = plan.log.replace_segments(list(plan.segments), list(plan.sizes),
                                            cleaned.segments)
    except KafkaStorageError:
        swapped = False
    if not swapped:
        logger.info("%s: the log changed while it was cleaned; abandoning the round",
                    plan.log.name)
        for segment in cleaned.segments:
            with contextlib.suppress(OSError):
                _remove_files(segment)
    return swapped


def clean(
    log: PartitionLog, first_dirty_offset: int, now_ms: int,
    tombstones_due_ms: int | None = None,
) -> CleanResult | None:
    """One round on ``log``, all on the calling thread (tests and tools); None if the log
    needed none or the round was abandoned."""
    plan = plan_cleaning(log, first_dirty_offset, now_ms, tombstones_due_ms)
    if plan is None:
        return None
    try:
        cleaned = build_cleaned_segments(plan)
    except CleaningAbandoned as e:
        logger.warning("%s", e)
        return None
    if not swap_in(plan, cleaned):
        return None
    return CleanResult(plan.end_offset, cleaned.tombstones_due_ms)


# -- the service -------------------------------------------------------------------------


@dataclass
class LogCleaner:
    """Cleans the compacted logs ``logs()`` returns, one at a time, and keeps each log
    dir's ``cleaner-offset-checkpoint``. Each round's heavy work (:func:`run_cleaning_job`)
    runs in a worker process of its own (spawned on first use, ended by :meth:`close`), so
    that it does not hold the broker's GIL; with ``use_process=False``, on
    ``run_in_executor``. Not thread-safe: the broker's event loop owns it."""

    logs: Callable[[], Iterable[tuple[TopicPartitionKey, PartitionLog]]]
    log_dirs: list[Path]
    clock: Callable[[], int]
    run_in_executor: Callable[..., Awaitable]
    use_process: bool = True
    _pool: ProcessPoolExecutor | None = None
    _first_dirty: dict[TopicPartitionKey, int] = field(default_factory=dict)
    _tombstones_due: dict[TopicPartitionKey, int] = field(default_factory=dict)
    # The log each key was last seen with: a topic deleted and created again starts over.
    _seen: dict[TopicPartitionKey, PartitionLog] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for log_dir in self.log_dirs:
            try:
                self._first_dirty.update(
                    read_offsets_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT))
            except (CorruptCheckpointError, OSError) as e:
                logger.warning("%s: cleaning its logs from their start", e)

    def first_dirty_offset(self, key: TopicPartitionKey) -> int:
        return self._first_dirty.get(key, 0)

    async def clean_logs(self) -> int:
        """One round on every log that needs one; returns how many were cleaned."""
        cleaned_count = 0
        logs = dict(self.logs())
        for key in set(self._first_dirty) | set(self._tombstones_due) | set(self._seen):
            if key not in logs or self._seen.get(key, logs[key]) is not logs[key]:
                self._forget(key)
        self._seen.update(logs)
        for key, log in logs.items():
            plan = plan_cleaning(log, self.first_dirty_offset(key), self.clock(),
                                 self._tombstones_due.get(key))
            if plan is None:
                continue
            try:
                result = await self._run_job(CleaningJob.of(plan))
                cleaned = open_cleaned_segments(plan, result)
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
            self._first_dirty[key] = plan.end_offset
            if cleaned.tombstones_due_ms is None:
                self._tombstones_due.pop(key, None)
            else:
                self._tombstones_due[key] = cleaned.tombstones_due_ms
            logger.info("%s: cleaned up to offset %d", log.name, plan.end_offset)
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

    def _forget(self, key: TopicPartitionKey) -> None:
        self._first_dirty.pop(key, None)
        self._tombstones_due.pop(key, None)
        self._seen.pop(key, None)

    def checkpoint_snapshot(self) -> dict[Path, dict[TopicPartitionKey, int]]:
        snapshot: dict[Path, dict[TopicPartitionKey, int]] = {d: {} for d in self.log_dirs}
        for key, log in self.logs():
            if key in self._first_dirty and log.directory.parent in snapshot:
                snapshot[log.directory.parent][key] = self._first_dirty[key]
        return snapshot

    @staticmethod
    def write_checkpoints(snapshot: dict[Path, dict[TopicPartitionKey, int]]) -> None:
        """Blocking (fsync): run on an executor thread. A failing dir is logged and skipped:
        its logs are cleaned again from their start after a restart, which is safe."""
        for log_dir, entries in snapshot.items():
            try:
                write_offsets_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, entries)
            except OSError as e:
                logger.error("%s: cannot write the cleaner checkpoint: %s", log_dir, e)
