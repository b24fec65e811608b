"""One partition's log on disk, in Kafka's layout and with Kafka's nouns: ``OffsetIndex``,
``TimeIndex``, ``LogSegment``, ``PartitionLog`` and the ``LogManager`` of the log dirs."""

from odradek.log.config import LogConfig
from odradek.log.errors import (
    KafkaStorageError,
    LogDirConflictError,
    LogError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from odradek.log.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from odradek.log.manager import LogManager, parse_partition_dir
from odradek.log.open_files import OpenFiles
from odradek.log.partition_log import FetchDataInfo, LogAppendInfo, PartitionLog
from odradek.log.segment import LogSegment, OffsetAndTimestamp

__all__ = [
    "FetchDataInfo",
    "KafkaStorageError",
    "LogAppendInfo",
    "LogConfig",
    "LogDirConflictError",
    "LogError",
    "LogManager",
    "LogSegment",
    "OffsetAndTimestamp",
    "OffsetIndex",
    "OffsetOutOfRangeError",
    "OffsetPosition",
    "OpenFiles",
    "PartitionLog",
    "RecordBatchTooLargeError",
    "TimeIndex",
    "TimestampOffset",
    "parse_partition_dir",
]
