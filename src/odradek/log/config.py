"""``LogConfig``: the topic-level settings one partition's log obeys.

Field names are Kafka's topic configs with ``.`` replaced by ``_`` (``segment.bytes`` ->
``segment_bytes``) and the defaults are Kafka's, so Kafka's documentation of each config
describes ours. The broker parses topic configs into this object; a topic config change is
applied with :meth:`odradek.log.PartitionLog.update_config`.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kafka's Long.MAX_VALUE default for flush.messages / flush.ms: "never force an fsync",
# durability comes from replication (seeds: an acknowledged write is in the page cache of
# every in-sync replica).
NEVER = 2**63 - 1

# Kafka's lower bound for segment.bytes (LegacyRecord.RECORD_OVERHEAD_V0). Tests use segments
# this small to make rolls happen; a real topic would never.
MIN_SEGMENT_BYTES = 14

# Offset and time index entries are 8 and 12 bytes: an index must hold at least one of each.
MIN_SEGMENT_INDEX_BYTES = 12

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact", "compact,delete", "delete,compact")


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824  # 1 GiB
    segment_ms: int = 604800000  # 7 days
    segment_index_bytes: int = 10485760  # 10 MiB
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000  # 7 days; -1 = unlimited
    retention_bytes: int = -1  # unlimited
    message_timestamp_type: str = "CreateTime"
    flush_messages: int = NEVER
    flush_ms: int = NEVER
    cleanup_policy: str = "delete"
    # How long a deleted segment's files stay renamed to "*.deleted" before they are removed.
    file_delete_delay_ms: int = 60000  # 1 minute
    # Compaction (cleanup.policy=compact), see odradek.log.cleaner.
    delete_retention_ms: int = 86400000  # 1 day: how long tombstones outlive cleaning
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = NEVER
    min_cleanable_dirty_ratio: float = 0.5

    def __post_init__(self) -> None:
        if self.segment_bytes < MIN_SEGMENT_BYTES:
            raise ValueError(f"segment_bytes must be >= {MIN_SEGMENT_BYTES}: {self.segment_bytes}")
        # File positions in the offset index are int32 (Kafka's segment.bytes is an int too).
        if self.segment_bytes > 2**31 - 1:
            raise ValueError(f"segment_bytes must fit in an int32: {self.segment_bytes}")
        if self.segment_ms < 1:
            raise ValueError(f"segment_ms must be >= 1: {self.segment_ms}")
        if self.segment_index_bytes < MIN_SEGMENT_INDEX_BYTES:
            raise ValueError(
                f"segment_index_bytes must be >= {MIN_SEGMENT_INDEX_BYTES}: "
                f"{self.segment_index_bytes}"
            )
        if self.index_interval_bytes < 0:
            raise ValueError(f"index_interval_bytes must be >= 0: {self.index_interval_bytes}")
        if self.flush_messages < 1:
            raise ValueError(f"flush_messages must be >= 1: {self.flush_messages}")
        if self.flush_ms < 0:
            raise ValueError(f"flush_ms must be >= 0: {self.flush_ms}")
        if self.file_delete_delay_ms < 0:
            raise ValueError(f"file_delete_delay_ms must be >= 0: {self.file_delete_delay_ms}")
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ValueError(
                f"min_cleanable_dirty_ratio must be in [0, 1]: {self.min_cleanable_dirty_ratio}"
            )
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(f"message_timestamp_type must be one of {TIMESTAMP_TYPES}")
        if self.cleanup_policy not in CLEANUP_POLICIES:
            raise ValueError(f"cleanup_policy must be one of {CLEANUP_POLICIES}")

    @property
    def compact(self) -> bool:
        """True when the cleaner compacts this log (``compact`` or ``compact,delete``)."""
        return "compact" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        """True when the broker, not the producer, sets record timestamps."""
        return self.message_timestamp_type == "LogAppendTime"
