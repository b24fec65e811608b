"""The checker of the cluster tests: every replica's log read from its files, compared.

After a test's faults end, what each broker holds of a partition is read straight from its
segment files (``<data>/<topic>-<partition>/*.log``): batches as written, whatever the
broker thinks of them. The checks are the documents' promise for replication and
Jepsen's for a log:

* every acknowledged value is in the log (no loss) and appears once (no duplicates) in
  every producer epoch;
* every replica holds the same batches, byte for byte, up to the high watermark, so the
  per-partition order is the same on all of them;
* nothing the producer never sent is there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from odradek.protocol.records import iter_valid_batches


@dataclass
class ReplicaLog:
    """One replica of one partition: its batches (offset, bytes) and values in order."""

    node_id: int
    batches: list[tuple[int, bytes]] = field(default_factory=list)
    values: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, value)
    # Offset -> its batch as a person reads it: where a duplicate came from.
    origins: dict[int, str] = field(default_factory=dict)
    # Offset -> the (producer id, producer epoch) of its batch.
    producers: dict[int, tuple[int, int]] = field(default_factory=dict)

    def batches_below(self, offset: int) -> list[tuple[int, bytes]]:
        return [(base, data) for base, data in self.batches if base < offset]


def read_replica(node_id: int, partition_dir: Path) -> ReplicaLog:
    replica = ReplicaLog(node_id)
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        for batch in iter_valid_batches(data):
            replica.batches.append((batch.base_offset, bytes(batch.buffer)))
            if batch.is_control_batch:
                continue
            origin = (f"batch {batch.base_offset}..{batch.last_offset} of leader epoch "
                      f"{batch.partition_leader_epoch}, producer {batch.producer_id} epoch "
                      f"{batch.producer_epoch} sequence {batch.base_sequence}")
            for record in batch.records():
                replica.values.append((record.offset, record.value))
                replica.origins[record.offset] = origin
                replica.producers[record.offset] = (batch.producer_id, batch.producer_epoch)
    return replica


def read_replicas(data_dirs: dict[int, Path], topic: str, partition: int) -> list[ReplicaLog]:
    """The replicas of a partition on every broker that has a directory for it."""
    return [read_replica(node_id, data_dir / f"{topic}-{partition}")
            for node_id, data_dir in sorted(data_dirs.items())
            if (data_dir / f"{topic}-{partition}").is_dir()]


@dataclass
class CheckResult:
    acknowledged: int = 0
    lost: list[bytes] = field(default_factory=list)
    duplicated: list[bytes] = field(default_factory=list)
    # For the first duplicated value of a partition: the batches holding each copy.
    duplicate_origins: list[str] = field(default_factory=list)
    # Values written again by the producer under a new epoch (see check_partition).
    resent_after_epoch_bump: list[bytes] = field(default_factory=list)
    unexpected: list[bytes] = field(default_factory=list)
    diverged: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.unexpected or self.diverged)

    def __str__(self) -> str:
        return (f"acknowledged {self.acknowledged}, lost {len(self.lost)}, duplicated "
                f"{len(self.duplicated)}, unexpected {len(self.unexpected)}, diverged "
                f"{len(self.diverged)}: {self.diverged[:3]} lost={self.lost[:5]} "
                f"duplicated={self.duplicated[:5]} {self.duplicate_origins[:4]}; resent after "
                f"an epoch bump {len(self.resent_after_epoch_bump)}")


def check_partition(replicas: list[ReplicaLog], high_watermark: int, acknowledged: set[bytes],
                    attempted: set[bytes], result: CheckResult) -> None:
    """Checks one partition: ``high_watermark`` is the leader's, ``acknowledged`` the values
    the producers were told are written to it, ``attempted`` every value sent to it."""
    if not replicas:
        result.lost.extend(sorted(acknowledged))
        return
    reference = replicas[0].batches_below(high_watermark)
    for replica in replicas[1:]:
        below = replica.batches_below(high_watermark)
        if below != reference:
            first = next((i for i, (a, b) in enumerate(zip(below, reference)) if a != b),
                         min(len(below), len(reference)))
            result.diverged.append(
                f"replica {replica.node_id} differs from replica {replicas[0].node_id} at "
                f"batch {first} below the high watermark {high_watermark}")
    # The committed log: what every replica agrees on, below the high watermark.
    committed = [value for offset, value in replicas[0].values if offset < high_watermark]
    counts = Counter(committed)
    result.acknowledged += len(acknowledged)
    result.lost.extend(sorted(value for value in acknowledged if value not in counts))
    # A value twice within one producer epoch is the broker failing to deduplicate a retry.
    # Across epochs it is the client: librdkafka bumps the epoch of the whole producer when a
    # partition answers OUT_OF_ORDER_SEQUENCE_NUMBER for a request behind a failed one, and
    # sends again, under new sequence numbers, records of other partitions that may already
    # be written (librdkafka issue #4953; no broker can tell those apart).
    producers = replicas[0].producers
    copies: dict[bytes, set[tuple[int, int]]] = {}
    for offset, value in replicas[0].values:
        if offset < high_watermark and counts[value] > 1:
            copies.setdefault(value, set()).add(producers[offset])
    duplicated = sorted(value for value, seen in copies.items() if len(seen) == 1)
    result.resent_after_epoch_bump.extend(sorted(
        value for value, seen in copies.items() if len(seen) > 1))
    result.duplicated.extend(duplicated)
    if duplicated:
        result.duplicate_origins.extend(
            f"{duplicated[0]!r} at {offset}: {replicas[0].origins[offset]}"
            for offset, value in replicas[0].values
            if value == duplicated[0] and offset < high_watermark)
    result.unexpected.extend(sorted(value for value in counts if value not in attempted))
