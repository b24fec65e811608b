"""One partition's log on disk, in Kafka's layout and with Kafka's nouns: ``OffsetIndex``,
``TimeIndex``, ``TransactionIndex``, ``LogSegment``, ``LeaderEpochFileCache``,
``PartitionLog`` and the ``LogManager`` of the log dirs."""

from odradek.log.append import LogAppendInfo
from odradek.log.config import LogConfig
from odradek.log.errors import (
    KafkaStorageError,
    LogDirConflictError,
    LogError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from odradek.log.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from odradek.log.leader_epoch import LeaderEpochFileCache
from odradek.log.manager import LogManager, parse_partition_dir
from odradek.log.open_files import OpenFiles
from odradek.log.partition_log import FetchDataInfo, PartitionLog
from odradek.log.segment import LogSegment, OffsetAndTimestamp
from odradek.log.transaction_index import AbortedTxn, TransactionIndex

__all__ = [
    "AbortedTxn",
    "FetchDataInfo",
    "KafkaStorageError",
    "LeaderEpochFileCache",
    "LogAppendInfo",
    "LogConfig",
    "LogDirConflictError",
    "LogError",
    "LogManager",
    "LogSegment",
    "OffsetAndTimestamp",
    "OffsetIndex",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "OffsetPosition",
    "OpenFiles",
    "PartitionLog",
    "RecordBatchTooLargeError",
    "TimeIndex",
    "TimestampOffset",
    "TransactionIndex",
    "UnexpectedAppendOffsetError",
    "parse_partition_dir",
]
