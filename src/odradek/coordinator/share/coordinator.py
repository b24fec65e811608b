"""``ShareCoordinator``: the durable state of share-partitions, kept in the internal topic
``__share_group_state`` (Kafka's share coordinator).

Each share-partition — one share group's view of one topic partition — has a key (group, topic
id, partition) and lives in partition ``abs(hash("group:topicId:partition")) % count`` of the
topic. Its state (the share-partition start offset and the delivery state and count of every
in-flight record past it) is written as a ShareSnapshot record each time it changes, appended
through the replica manager with acks=-1 like ``__consumer_offsets``, so a write the
coordinator confirms is on every in-sync replica; the topic is compacted, so the last snapshot
of each key is the state. A partition of the topic is loaded when this broker becomes its
leader (snapshots, and the update records Kafka also writes, combined in order) and dropped
when it stops leading; a key of a partition not loaded here is NOT_COORDINATOR.

Sans-I/O around its store (``ReplicaTopicStore`` in the broker), not thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.metadata_manager import OffsetsStore, group_store_error
from odradek.coordinator.share.state_records import (
    RecordType,
    ShareSnapshot,
    ShareState,
    ShareStateKey,
    ShareStateRecordError,
    ShareUpdate,
    apply_update,
    decode_key,
    decode_value,
    encode_key,
    encode_snapshot,
    partition_for,
)

log = logging.getLogger(__name__)

SHARE_STATE_TOPIC = "__share_group_state"


def share_state_topic_configs(config: Callable[[str], Any], *, replication_factor: int
                              ) -> dict[str, str]:
    return {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(config("share.coordinator.state.topic.segment.bytes")),
        "min.insync.replicas": str(min(config("share.coordinator.state.topic.min.isr"),
                                       replication_factor)),
    }


class ShareCoordinator:
    def __init__(self, store: OffsetsStore, clock: Callable[[], int]) -> None:
        self._store = store
        self._clock = clock
        self._partition_count: int | None = None
        self._loaded: set[int] = set()
        self.states: dict[ShareStateKey, ShareSnapshot] = {}

    # -- ownership -----------------------------------------------------------------------

    def partition_for(self, key: ShareStateKey) -> int | None:
        count = self._partition_count or self._store.partition_count()
        return None if count is None else partition_for(key, count)

    def is_coordinator_for(self, key: ShareStateKey) -> bool:
        return self.partition_for(key) in self._loaded

    def startup(self) -> None:
        for partition in self._store.hosted_partitions():
            self.on_elected(partition)

    def on_elected(self, partition: int) -> None:
        count = self._store.partition_count()
        if count is None or partition in self._loaded:
            return
        self._partition_count = count
        snapshots: dict[ShareStateKey, ShareSnapshot] = {}
        for stored in self._store.read(partition):
            if not isinstance(stored, tuple):
                continue  # nothing is written in transactions here
            key_bytes, value = stored
            try:
                record_type, key = decode_key(key_bytes)
                if value is None:
                    snapshots.pop(key, None)
                    continue
                decoded = decode_value(record_type, value)
            except ShareStateRecordError as e:
                log.warning("%s-%d: skipping a record: %s", SHARE_STATE_TOPIC, partition, e)
                continue
            if record_type is RecordType.SNAPSHOT:
                snapshots[key] = decoded
            elif key in snapshots:
                assert isinstance(decoded, ShareUpdate)
                snapshots[key] = apply_update(snapshots[key], decoded)
        self.states.update(snapshots)
        self._loaded.add(partition)
        log.info("loaded %s-%d (%d share-partitions)", SHARE_STATE_TOPIC, partition,
                 len(snapshots))

    def on_resigned(self, partition: int) -> None:
        if partition not in self._loaded:
            return
        self._loaded.discard(partition)
        for key in [k for k in self.states if self.partition_for(k) == partition]:
            del self.states[key]

    def shutdown(self) -> None:
        for partition in list(self._loaded):
            self.on_resigned(partition)
        self._partition_count = None

    # -- state ---------------------------------------------------------------------------

    def read(self, key: ShareStateKey) -> tuple[ErrorCode, ShareState | None]:
        """ReadShareGroupState: the state, None if the share-partition has none yet."""
        if not self.is_coordinator_for(key):
            return ErrorCode.not_coordinator, None
        snapshot = self.states.get(key)
        return ErrorCode.none, None if snapshot is None else snapshot.state

    def write(self, key: ShareStateKey, state: ShareState, leader_epoch: int,
              callback: Callable[[ErrorCode], None]) -> None:
        """WriteShareGroupState: the whole state as a snapshot; ``callback`` gets the error
        once it is written (the state is this coordinator's from then on). A write from an
        older leader epoch of the partition than the last one is FENCED_LEADER_EPOCH; -1
        (an admin's reset) is not checked."""
        partition = self.partition_for(key)
        if partition not in self._loaded:
            callback(ErrorCode.not_coordinator)
            return
        previous = self.states.get(key)
        if previous is not None and 0 <= leader_epoch < previous.leader_epoch:
            # A leader of the partition that was replaced, writing late (Kafka's check).
            callback(ErrorCode.fenced_leader_epoch)
            return
        snapshot = ShareSnapshot(
            snapshot_epoch=(previous.snapshot_epoch + 1) % 65536 if previous else 0,
            leader_epoch=leader_epoch, state=state)

        def written(error: ErrorCode) -> None:
            # Not if this broker stopped leading the partition meanwhile: the next leader
            # loads it from the topic, and so does this broker if it leads it again.
            if error is ErrorCode.none and partition in self._loaded:
                self.states[key] = snapshot
            callback(group_store_error(error))

        self._store.append(partition, [(encode_key(RecordType.SNAPSHOT, key),
                                        encode_snapshot(snapshot))], written)

    def delete(self, keys: Iterable[ShareStateKey], callback: Callable[[ErrorCode], None]
               ) -> None:
        """DeleteShareGroupState: tombstones for the keys (one partition's at a time)."""
        by_partition: dict[int, list[ShareStateKey]] = {}
        for key in keys:
            partition = self.partition_for(key)
            if partition not in self._loaded:
                callback(ErrorCode.not_coordinator)
                return
            by_partition.setdefault(partition, []).append(key)
        if not by_partition:
            callback(ErrorCode.none)
            return
        remaining = [len(by_partition)]
        errors: list[ErrorCode] = []

        def written(partition_keys: list[ShareStateKey], error: ErrorCode) -> None:
            if error is ErrorCode.none:
                for key in partition_keys:
                    self.states.pop(key, None)
            else:
                errors.append(group_store_error(error))
            remaining[0] -= 1
            if remaining[0] == 0:
                callback(errors[0] if errors else ErrorCode.none)

        for partition, partition_keys in by_partition.items():
            self._store.append(
                partition, [(encode_key(RecordType.SNAPSHOT, key), None)
                            for key in partition_keys],
                lambda error, ks=partition_keys: written(ks, error))

    def keys_of_group(self, group_id: str) -> list[ShareStateKey]:
        return [key for key in self.states if key.group_id == group_id]

    def groups(self) -> set[str]:
        return {key.group_id for key in self.states}
