"""DescribeLogDirs' view of the log dirs (Kafka's ``ReplicaManager.describeLogDirs``).

Every log dir is listed, by absolute path, with the partitions it holds, each with its size
in bytes and its offset lag (how far its log end offset is behind the high watermark: 0 for
a leader), and, from DescribeLogDirs v4 (KIP-827), its file system's total and usable
bytes. A dir that is offline, or whose disk cannot be measured, answers KAFKA_STORAGE_ERROR
alone.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from odradek.log import LogManager
from odradek.protocol.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LogDirPartition:
    topic_partition: TopicPartition
    size: int
    offset_lag: int


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log dir for DescribeLogDirs; ``error`` is KAFKA_STORAGE_ERROR when offline."""

    path: str
    error: ErrorCode
    partitions: list[LogDirPartition] = field(default_factory=list)
    total_bytes: int = -1
    usable_bytes: int = -1


def describe_log_dirs(log_manager: LogManager, wanted: set[TopicPartition] | None
                      ) -> list[LogDirDescription]:
    """Each log dir with its partitions' sizes; ``wanted`` None: all of them."""
    descriptions = []
    for log_dir in log_manager.log_dirs:
        path = str(log_dir.absolute())
        try:
            if log_dir in log_manager.offline_dirs:
                raise OSError(log_manager.offline_dirs[log_dir])
            usage = shutil.disk_usage(log_dir)
        except OSError as exc:
            logger.warning("Unable to describe replica dirs for %s: %s", path, exc)
            descriptions.append(LogDirDescription(path, ErrorCode.kafka_storage_error))
            continue
        partitions = []
        for tp in log_manager.partitions_in_dir(log_dir):
            if wanted is not None and tp not in wanted:
                continue
            log = log_manager.get(tp.topic, tp.partition)
            # Kafka's getLogEndOffsetLag: only a lagging follower's log end is behind.
            partitions.append(LogDirPartition(
                tp, log.size_in_bytes, max(log.high_watermark - log.log_end_offset, 0)))
        descriptions.append(LogDirDescription(path, ErrorCode.none, partitions,
                                              usage.total, usage.free))
    return descriptions
