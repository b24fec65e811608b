"""``LogManager``: the partition logs in the broker's log dirs (Kafka's ``LogManager``).

Each log dir (``log.dirs``) holds partition directories named ``<topic>-<partition>``, three
checkpoint files and, between a clean shutdown and the next start, the clean shutdown
marker (see :mod:`odradek.log.checkpoint`)::

    /var/lib/odradek/data/
        orders-0/00000000000000000000.log ...
        orders-1/...
        log-start-offset-checkpoint
        recovery-point-offset-checkpoint
        replication-offset-checkpoint      the high watermarks
        .kafka_cleanshutdown

A topic name may itself contain ``-`` and ``.``, so the partition number is what follows
the *last* ``-``. A directory being deleted is renamed ``<topic>-<partition>.<uuid>-delete``
first; a start finishing such an interrupted delete removes it.

JBOD (seeds: "JBOD broker tolerates one disk failure"): a new partition goes to the online
log dir holding the fewest partitions. A dir that fails (an ``OSError`` in any of its logs,
or missing or unreadable at startup) goes offline with all its partitions, which answer
KAFKA_STORAGE_ERROR, while the other dirs keep serving. A log dir that does not exist at
startup is created, unless partitions this broker hosts are found in no other dir: then it
is the dir that held them, lost, and it stays offline, so that its partitions are never
recreated empty elsewhere (Kafka refuses to create a log that is not new while a dir is
offline). It stays offline until a restart finds it healthy.

The manager is each log's ``LogContext``: it owns the open descriptors (bounded, see
:mod:`odradek.log.open_files`), takes failed dirs offline, and removes deleted segments'
files after ``file.delete.delay.ms``. The broker drives its periodic work: retention
(``delete_old_segments``), ``logs_to_flush``, ``write_checkpoints``,
``write_high_watermark_checkpoints`` and ``delete_due_files``; the log cleaner
(:mod:`odradek.log.cleaner`) takes its logs from ``compacted_logs``. A log opens with its
checkpointed high watermark (its log start offset if it has none, as in Kafka), and with
its producers idle for ``producer.id.expiration.ms`` forgotten.

After a clean shutdown a start reads only the checkpoints and each partition's leader
epochs: its logs open deferred (``PartitionLog.deferred``), each loading on first use, and
the broker loads the rest a slice at a time once it serves (``load_deferred``). 10,000
partitions cost about 2.8 s of loading; the broker listens without waiting for them.

This class is not thread-safe: the broker's event loop owns it. ``log_dir_failed`` may be
called from any thread; it hands the work to the owner through ``call_soon_threadsafe``.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import itertools
import logging
import os
import re
import shutil
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

from odradek.protocol.topic_partition import TopicPartition

from odradek.log.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CorruptCheckpointError,
    fsync_path,
    read_offsets_checkpoint,
    write_clean_shutdown_file,
    write_offsets_checkpoint,
)
from odradek.log.config import LogConfig
from odradek.log.errors import KafkaStorageError, LogDirConflictError
from odradek.log.local_log import DELETE_DIR_SUFFIX, LocalLog
from odradek.log.open_files import DEFAULT_MAX_OPEN_SEGMENT_FILES, OpenFiles
from odradek.log.partition_log import PartitionLog
from odradek.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from odradek.log.segment import LogSegment

logger = logging.getLogger(__name__)

# Kafka's legal topic characters; the partition is the digits after the last "-".
_PARTITION_DIR = re.compile(r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>[0-9]+)")

# Per online log dir: (recovery points, log start offsets) of its partitions.
CheckpointSnapshot = dict[Path, tuple[dict[TopicPartition, int], dict[TopicPartition, int]]]
# Per online log dir: the high watermarks of its partitions.
HighWatermarkSnapshot = dict[Path, dict[TopicPartition, int]]


def parse_partition_dir(name: str) -> TopicPartition | None:
    """``TopicPartition("orders.v2-eu", 3)`` for ``orders.v2-eu-3``; None for any other
    name."""
    if name.endswith(DELETE_DIR_SUFFIX):
        return None
    match = _PARTITION_DIR.fullmatch(name)
    if match is None:
        return None
    return TopicPartition(match.group("topic"), int(match.group("partition")))


def _call_now(callback: Callable[[], object]) -> None:
    callback()


def _default_producer_id_expiration_ms() -> int:
    return DEFAULT_PRODUCER_ID_EXPIRATION_MS


class LogManager:
    def __init__(
        self, log_dirs: Iterable[Path], *, clock: Callable[[], int],
        max_open_files: int = DEFAULT_MAX_OPEN_SEGMENT_FILES,
        call_soon_threadsafe: Callable[[Callable[[], object]], object] = _call_now,
        producer_id_expiration_ms: Callable[[], int] = _default_producer_id_expiration_ms,
    ) -> None:
        """``call_soon_threadsafe`` runs a callback on the owner's thread (the event loop's
        method of that name); the default runs it at once, for a single-threaded owner.
        ``producer_id_expiration_ms`` gives that broker config's current value (it may
        change at runtime), read as each log opens."""
        self.log_dirs = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("at least one log dir is needed")
        self._clock = clock
        self._call_soon_threadsafe = call_soon_threadsafe
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self.files = OpenFiles(max_open_files)
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path | None] = {}  # None: never loaded
        self._partition_counts = dict.fromkeys(self.log_dirs, 0)
        # Failed log dirs and why.
        self.offline_dirs: dict[Path, str] = {}
        self._last_flush_ms: dict[TopicPartition, int] = {}
        # (due ms, sequence, segment): segments renamed *.deleted, removed when due.
        self._file_deletions: list[tuple[int, int, LogSegment]] = []
        self._sequence = itertools.count()
        # Logs opened deferred after a clean shutdown, in the order load_deferred loads them.
        self._deferred: deque[PartitionLog] = deque()

    # -- loading -----------------------------------------------------------------------

    def load_all(
        self, config_for: Callable[[str], LogConfig], hosted: Iterable[TopicPartition] = ()
    ) -> dict[TopicPartition, PartitionLog]:
        """Opens every partition found in the log dirs, recovering those of a dir without
        the clean shutdown marker from their recovery points, then removes the markers.
        ``config_for`` maps a topic to its log config; ``hosted`` are the partitions this
        broker is known to host, which decide whether a missing dir is new or lost."""
        config_for = functools.cache(config_for)  # one per topic, not one per partition
        absent = []
        for log_dir in self.log_dirs:
            if not os.path.lexists(log_dir):
                absent.append(log_dir)
                continue
            try:
                self._load_dir(log_dir, config_for)
            except OSError as e:
                self._take_dir_offline(log_dir, f"cannot be loaded: {e}")
        stranded = sorted(set(hosted) - self._logs.keys())
        for log_dir in absent:
            if stranded:
                self._take_dir_offline(log_dir, "missing, and it held partitions found in no "
                                                "other log dir")
                continue
            try:
                log_dir.mkdir(parents=True)
            except OSError as e:
                self._take_dir_offline(log_dir, f"cannot be created: {e}")
        if self.offline_dirs:
            for tp in stranded:
                self._register(tp, None, self._offline_log(tp, config_for(tp.topic)))
        return dict(self._logs)

    def _offline_log(self, tp: TopicPartition, config: LogConfig) -> PartitionLog:
        """A partition that is in no online dir: it is where it would be in an offline one."""
        log_dir = next(iter(self.offline_dirs))
        return PartitionLog.offline(log_dir / str(tp), config, f"log dir {log_dir} is offline",
                                    self)

    def _load_dir(self, log_dir: Path, config_for: Callable[[str], LogConfig]) -> None:
        started_ms = self._clock()
        had_clean_shutdown = (log_dir / CLEAN_SHUTDOWN_FILE).exists()
        recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT)
        log_start_offsets = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
        loaded: dict[TopicPartition, PartitionLog] = {}
        try:
            with os.scandir(log_dir) as entries:
                names = sorted(entry.name for entry in entries if entry.is_dir())
            for name in names:
                child = log_dir / name
                if name.endswith(DELETE_DIR_SUFFIX):
                    logger.info("removing %s, a delete interrupted by a stop", child)
                    shutil.rmtree(child)
                    continue
                tp = parse_partition_dir(name)
                if tp is None:
                    continue
                if tp in self._logs:
                    raise LogDirConflictError(
                        f"{tp} is in both {self._dir_of[tp]} and {log_dir}"
                    )
                if had_clean_shutdown and tp in recovery_points and tp in log_start_offsets:
                    # The shutdown checkpointed it: its offsets are known, its segments can
                    # wait (see PartitionLog.deferred).
                    loaded[tp] = PartitionLog.deferred(
                        child, config_for(tp.topic), log_start_offset=log_start_offsets[tp],
                        log_end_offset=recovery_points[tp],
                        high_watermark=high_watermarks.get(tp, 0), clock=self._clock,
                        producer_id_expiration_ms=self._producer_id_expiration_ms,
                        context=self,
                    )
                    continue
                loaded[tp] = PartitionLog.open(
                    child, config_for(tp.topic), now_ms=self._clock(),
                    log_start_offset=log_start_offsets.get(tp, 0),
                    recovery_point=recovery_points.get(tp, 0),
                    # Missing: the log start offset (open() raises it to that), as in Kafka.
                    high_watermark=high_watermarks.get(tp, 0),
                    had_clean_shutdown=had_clean_shutdown,
                    producer_id_expiration_ms=self._producer_id_expiration_ms(), context=self,
                )
            if had_clean_shutdown:
                (log_dir / CLEAN_SHUTDOWN_FILE).unlink()
                fsync_path(log_dir)
        except OSError:
            for log in loaded.values():
                log.take_offline("its log dir failed while loading")
            raise
        for tp, log in loaded.items():
            self._register(tp, log_dir, log)
        deferred = [log for log in loaded.values() if not log.loaded]
        self._deferred.extend(deferred)
        logger.info(
            "opened %d partitions from %s in %d ms (%s)", len(loaded), log_dir,
            self._clock() - started_ms,
            f"clean shutdown: nothing recovered, {len(deferred)} to load on first use or "
            "in the background" if had_clean_shutdown
            else "no clean shutdown: recovered from the recovery points" if loaded
            else "nothing to recover",
        )

    @property
    def deferred_count(self) -> int:
        """How many logs opened deferred (see ``PartitionLog.deferred``) may still wait to
        be loaded."""
        return len(self._deferred)

    def load_deferred(self, limit: int) -> int:
        """Loads up to ``limit`` of the logs still deferred, the order they were opened in
        (the broker calls it a slice at a time between other work until none is left);
        returns how many may still wait. A log whose dir fails meanwhile goes offline, as
        on any other read."""
        while limit > 0 and self._deferred:
            log = self._deferred.popleft()
            if log.loaded or log.offline_reason is not None:
                continue  # loaded on first use, or offline or deleted since
            with contextlib.suppress(KafkaStorageError):
                log.load()
            limit -= 1
        return len(self._deferred)

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
        try:
            return read_offsets_checkpoint(path)
        except CorruptCheckpointError as e:
            # Losing it only makes records hidden by DeleteRecords readable again, recovery
            # start from the beginning of each log, or the high watermarks start at the log
            # start offsets until the replication layer moves them.
            logger.warning("ignoring %s", e)
            return {}

    def _register(self, tp: TopicPartition, log_dir: Path | None, log: PartitionLog) -> None:
        self._logs[tp] = log
        self._dir_of[tp] = log_dir
        if log_dir is not None:
            self._partition_counts[log_dir] += 1
        self._last_flush_ms[tp] = self._clock()

    # -- partitions --------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get(TopicPartition(topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """The partition's log, created in the online log dir holding the fewest partitions
        if new (Kafka's placement); an offline log if every dir is offline. An existing log
        keeps its config: see ``update_config``."""
        tp = TopicPartition(topic, partition)
        log = self._logs.get(tp)
        if log is not None:
            return log
        while True:
            online = [d for d in self.log_dirs if d not in self.offline_dirs]
            if not online:
                log = self._offline_log(tp, config)
                self._register(tp, None, log)
                return log
            log_dir = min(online, key=self._partition_counts.__getitem__)
            try:
                log = PartitionLog.open(
                    log_dir / str(tp), config, now_ms=self._clock(),
                    producer_id_expiration_ms=self._producer_id_expiration_ms(), context=self,
                )
            except OSError as e:
                self._take_dir_offline(log_dir, f"creating {tp} failed: {e}")
                continue
            self._register(tp, log_dir, log)
            return log

    def delete_partition(self, topic: str, partition: int) -> None:
        tp = TopicPartition(topic, partition)
        log = self._logs.pop(tp, None)
        if log is None:
            return
        log_dir = self._dir_of.pop(tp)
        self._last_flush_ms.pop(tp, None)
        if log_dir is not None:
            self._partition_counts[log_dir] -= 1
        try:
            log.delete()
        except OSError as e:
            self._take_dir_offline(log_dir, f"deleting {tp} failed: {e}")

    # -- failures ----------------------------------------------------------------------

    def storage_failed(self, log: LocalLog, error: OSError) -> None:
        """LogContext: ``log``'s dir failed. Any thread."""
        self.log_dir_failed(log.directory.parent, error)

    def log_dir_failed(self, log_dir: Path, error: OSError) -> None:
        """Kafka's ``LogDirFailureChannel``: any thread may report; the owner acts."""
        reason = f"{type(error).__name__}: {error}"
        self._call_soon_threadsafe(functools.partial(self._take_dir_offline, log_dir, reason))

    def _take_dir_offline(self, log_dir: Path | None, reason: str) -> None:
        if log_dir is None or log_dir in self.offline_dirs:
            return
        self.offline_dirs[log_dir] = reason
        partitions = self.partitions_in_dir(log_dir)
        for tp in partitions:
            self._logs[tp].take_offline(reason)
        self._file_deletions = [
            entry for entry in self._file_deletions if entry[2].directory.parent != log_dir
        ]
        heapq.heapify(self._file_deletions)
        online = [str(d) for d in self.log_dirs if d not in self.offline_dirs]
        logger.error(
            "log dir %s is offline (%s): its %d partitions %s answer KAFKA_STORAGE_ERROR; "
            "still serving from %s", log_dir, reason, len(partitions),
            [str(tp) for tp in partitions], online or "no log dir",
        )

    # -- DescribeLogDirs ---------------------------------------------------------------

    def partitions_in_dir(self, log_dir: Path) -> list[TopicPartition]:
        log_dir = Path(log_dir)
        return sorted(tp for tp, d in self._dir_of.items() if d == log_dir)

    def dir_size(self, log_dir: Path) -> int:
        """Bytes of record data in ``log_dir`` (the sum of its partitions' log sizes)."""
        return sum(self._logs[tp].size_in_bytes for tp in self.partitions_in_dir(log_dir))

    # -- periodic work -----------------------------------------------------------------

    def _online_logs(self) -> list[tuple[TopicPartition, PartitionLog]]:
        return [(tp, log) for tp, log in self._logs.items() if log.offline_reason is None]

    def compacted_logs(self) -> list[tuple[TopicPartition, PartitionLog]]:
        """The online logs the cleaner compacts (cleanup.policy compact or compact,delete)."""
        return [(tp, log) for tp, log in self._online_logs() if log.config.compact]

    def delete_old_segments(self) -> int:
        """Applies retention to every log (Kafka's ``cleanupLogs``, which the broker runs
        every ``log.retention.check.interval.ms``); returns the segments deleted."""
        now_ms = self._clock()
        deleted = 0
        for _, log in self._online_logs():
            try:
                deleted += log.delete_old_segments(now_ms)
            except KafkaStorageError:
                continue  # the log dir is offline now; the others carry on
        return deleted

    def delete_later(self, log: LocalLog, segments: list[LogSegment]) -> None:
        """LogContext: the files of ``segments`` go after ``file.delete.delay.ms``, so a
        reader that found a segment a moment ago never sees its file vanish."""
        due_ms = self._clock() + log.config.file_delete_delay_ms
        for segment in segments:
            heapq.heappush(self._file_deletions, (due_ms, next(self._sequence), segment))
        if log.config.file_delete_delay_ms == 0:
            self.delete_due_files()

    def delete_due_files(self, *, all_pending: bool = False) -> int:
        """Removes the files of deleted segments whose delay is over; returns how many
        segments' files went."""
        now_ms = self._clock()
        count = 0
        while self._file_deletions and (all_pending or self._file_deletions[0][0] <= now_ms):
            segment = heapq.heappop(self._file_deletions)[2]
            try:
                segment.remove_files()
            except OSError as e:
                self.log_dir_failed(segment.directory.parent, e)
                continue
            count += 1
        return count

    def logs_to_flush(self) -> list[tuple[PartitionLog, int]]:
        """(log, offset to flush to) for every log with unflushed data and no flush for
        ``flush.ms`` (Kafka's ``flushDirtyLogs``) or ``flush.messages`` unflushed messages
        that no produce waited for (acks=0), or with a segment rolled since its last flush
        (Kafka flushes each rolled segment, so that a restart after a crash recovers only
        the active segments). The owner runs ``log.flush_to`` off the event loop."""
        now_ms = self._clock()
        due = []
        for tp, log in self._online_logs():
            log_end_offset = log.log_end_offset
            unflushed = log_end_offset - log.recovery_point
            if unflushed <= 0:
                continue
            if (now_ms - self._last_flush_ms[tp] >= log.config.flush_ms
                    or unflushed >= log.config.flush_messages):
                self._last_flush_ms[tp] = now_ms
                due.append((log, log_end_offset))
            elif log.rolled_segments_unflushed:
                due.append((log, log.segments[-1].base_offset))
        return due

    def _online_dir_logs(self) -> dict[Path, list[tuple[TopicPartition, PartitionLog]]]:
        return {
            log_dir: [(tp, self._logs[tp]) for tp in self.partitions_in_dir(log_dir)]
            for log_dir in self.log_dirs if log_dir not in self.offline_dirs
        }

    def checkpoint_snapshot(self) -> CheckpointSnapshot:
        """The offsets the checkpoint files of each online log dir should hold now."""
        return {
            log_dir: ({tp: log.recovery_point for tp, log in logs},
                      {tp: log.log_start_offset for tp, log in logs})
            for log_dir, logs in self._online_dir_logs().items()
        }

    def write_checkpoints(self, snapshot: CheckpointSnapshot) -> list[Path]:
        """Writes ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint``
        (Kafka does every ``log.flush.offset.checkpoint.interval.ms`` and at shutdown).
        Blocking (fsync) and safe on another thread: the owner runs it in an executor.
        Returns the dirs that failed (reported to ``log_dir_failed``)."""
        failed = []
        for log_dir, (recovery_points, log_start_offsets) in snapshot.items():
            try:
                write_offsets_checkpoint(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT,
                                         recovery_points)
                write_offsets_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT,
                                         log_start_offsets)
            except OSError as e:
                self.log_dir_failed(log_dir, e)
                failed.append(log_dir)
        return failed

    def high_watermark_checkpoint_snapshot(self) -> HighWatermarkSnapshot:
        """The high watermarks ``replication-offset-checkpoint`` of each online log dir
        should hold now."""
        return {log_dir: {tp: log.high_watermark for tp, log in logs}
                for log_dir, logs in self._online_dir_logs().items()}

    def write_high_watermark_checkpoints(self, snapshot: HighWatermarkSnapshot) -> list[Path]:
        """Writes ``replication-offset-checkpoint`` (Kafka does every
        ``replica.high.watermark.checkpoint.interval.ms`` and at shutdown). Blocking (fsync)
        and safe on another thread, as ``write_checkpoints``; returns the dirs that failed
        (reported to ``log_dir_failed``)."""
        failed = []
        for log_dir, high_watermarks in snapshot.items():
            try:
                write_offsets_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, high_watermarks)
            except OSError as e:
                self.log_dir_failed(log_dir, e)
                failed.append(log_dir)
        return failed

    # -- shutdown ----------------------------------------------------------------------

    def _flush_all(self) -> None:
        """fsyncs every online log up to its log end offset."""
        for _, log in self._online_logs():
            try:
                log.flush_to(log.log_end_offset)
            except KafkaStorageError:
                continue

    def close_all(self) -> None:
        """Kafka's clean shutdown: flush every log, close it (its index files, its producer
        state snapshot), remove deleted segments' files, write the checkpoints and the high
        watermarks and then, in each dir that is still online, the clean shutdown marker
        that lets the next start skip recovery."""
        self._flush_all()
        for tp, log in self._online_logs():
            try:
                log.close()
            except OSError as e:
                self._take_dir_offline(self._dir_of[tp], f"closing failed: {e}")
        self.delete_due_files(all_pending=True)
        failed = self.write_checkpoints(self.checkpoint_snapshot())
        failed += self.write_high_watermark_checkpoints(self.high_watermark_checkpoint_snapshot())
        for log_dir in self.log_dirs:
            if log_dir not in self.offline_dirs and log_dir not in failed:
                try:
                    write_clean_shutdown_file(log_dir)
                except OSError as e:
                    logger.error("%s: cannot write the clean shutdown marker: %s", log_dir, e)
        self.files.close_all()
        self._deferred.clear()
        self._logs.clear()
        self._dir_of.clear()
        self._last_flush_ms.clear()
        self._partition_counts = dict.fromkeys(self.log_dirs, 0)
