"""``LogManager``: the partition logs in the broker's log dirs (Kafka's ``LogManager``).

Each log dir (``log.dirs``) holds partition directories named ``<topic>-<partition>``, and
one ``log-start-offset-checkpoint`` file (see :mod:`odradek.log.checkpoint`)::

    /var/lib/odradek/data/
        orders-0/00000000000000000000.log ...
        orders-1/...
        log-start-offset-checkpoint

A topic name may itself contain ``-`` and ``.``, so the partition number is what follows
the *last* ``-``. A directory being deleted is renamed ``<topic>-<partition>.<uuid>-delete``
first; a start finishing such an interrupted delete removes it.

This class is not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from odradek.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    CorruptCheckpointError,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from odradek.log.config import LogConfig
from odradek.log.errors import LogDirConflictError
from odradek.log.partition_log import DELETE_DIR_SUFFIX, PartitionLog

logger = logging.getLogger(__name__)

# Kafka's legal topic characters; the partition is the digits after the last "-".
_PARTITION_DIR = re.compile(r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>[0-9]+)")

TopicPartitionKey = tuple[str, int]


def parse_partition_dir(name: str) -> TopicPartitionKey | None:
    """``("orders.v2-eu", 3)`` for ``orders.v2-eu-3``; None for any other name."""
    if name.endswith(DELETE_DIR_SUFFIX):
        return None
    match = _PARTITION_DIR.fullmatch(name)
    if match is None:
        return None
    return match.group("topic"), int(match.group("partition"))


class LogManager:
    def __init__(self, log_dirs: list[Path], *, clock: Callable[[], int]) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self._clock = clock
        self._logs: dict[TopicPartitionKey, PartitionLog] = {}
        self._dir_of: dict[TopicPartitionKey, Path] = {}
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)

    def load_all(
        self, config_for: Callable[[str], LogConfig]
    ) -> dict[TopicPartitionKey, PartitionLog]:
        """Opens (and recovers) every partition found in the log dirs; ``config_for`` maps
        a topic name to its log config."""
        for log_dir in self.log_dirs:
            log_start_offsets = self._read_log_start_offsets(log_dir)
            for child in sorted(log_dir.iterdir()):
                if not child.is_dir():
                    continue
                if child.name.endswith(DELETE_DIR_SUFFIX):
                    logger.info("removing %s, a delete interrupted by a stop", child)
                    shutil.rmtree(child)
                    continue
                key = parse_partition_dir(child.name)
                if key is None:
                    continue
                if key in self._logs:
                    raise LogDirConflictError(
                        f"{key[0]}-{key[1]} is in both {self._dir_of[key]} and {log_dir}"
                    )
                self._logs[key] = PartitionLog.open(
                    child, config_for(key[0]), now_ms=self._clock(),
                    log_start_offset=log_start_offsets.get(key, 0),
                )
                self._dir_of[key] = log_dir
        return dict(self._logs)

    @staticmethod
    def _read_log_start_offsets(log_dir: Path) -> dict[TopicPartitionKey, int]:
        try:
            return read_offsets_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        except CorruptCheckpointError as e:
            # Losing it only makes records hidden by DeleteRecords readable again.
            logger.warning("ignoring %s", e)
            return {}

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """The partition's log, created in the log dir holding the fewest partitions if
        new (Kafka's placement). An existing log keeps its config: see ``update_config``."""
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None:
            log_dir = min(self.log_dirs, key=lambda d: len(self.partitions_in_dir(d)))
            log = PartitionLog.open(log_dir / f"{topic}-{partition}", config, now_ms=self._clock())
            self._logs[key] = log
            self._dir_of[key] = log_dir
        return log

    def delete_partition(self, topic: str, partition: int) -> None:
        key = (topic, partition)
        log = self._logs.pop(key, None)
        if log is not None:
            del self._dir_of[key]
            log.delete()

    # -- DescribeLogDirs ---------------------------------------------------------------

    def partitions_in_dir(self, log_dir: Path) -> list[TopicPartitionKey]:
        log_dir = Path(log_dir)
        return sorted(key for key, d in self._dir_of.items() if d == log_dir)

    def dir_size(self, log_dir: Path) -> int:
        """Bytes of record data in ``log_dir`` (the sum of its partitions' log sizes)."""
        return sum(self._logs[key].size_in_bytes for key in self.partitions_in_dir(log_dir))

    def delete_old_segments(self) -> int:
        """Applies retention to every log (Kafka's ``cleanupLogs``, which the broker runs
        every ``log.retention.check.interval.ms``); returns the segments deleted."""
        now_ms = self._clock()
        return sum(log.delete_old_segments(now_ms) for log in self._logs.values())

    # -- durability and lifecycle ------------------------------------------------------

    def checkpoint_log_start_offsets(self) -> None:
        for log_dir in self.log_dirs:
            write_offsets_checkpoint(
                log_dir / LOG_START_OFFSET_CHECKPOINT,
                {key: self._logs[key].log_start_offset for key in self.partitions_in_dir(log_dir)},
            )

    def flush_all(self) -> None:
        for log in self._logs.values():
            log.flush()
        self.checkpoint_log_start_offsets()

    def close_all(self) -> None:
        self.checkpoint_log_start_offsets()
        for log in self._logs.values():
            log.close()
        self._logs.clear()
        self._dir_of.clear()
