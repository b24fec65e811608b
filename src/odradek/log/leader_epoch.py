"""``LeaderEpochFileCache``: where each leader epoch starts in one partition's log (KIP-101).

Every batch carries the epoch of the leader that appended it (``partition_leader_epoch``);
the cache keeps, per epoch, the first offset written in it, and persists the list as
``leader-epoch-checkpoint`` in the partition directory, in Kafka's checkpoint format
(:mod:`odradek.log.checkpoint`) with ``epoch start_offset`` entries::

    0          version
    3          number of entries
    0 0        epoch 0 starts at offset 0
    2 1200     epoch 1 wrote nothing; epoch 2 starts at 1200
    5 4711

With these entries, OffsetsForLeaderEpoch for epoch 2 answers (2, 4711): epoch 2 ended
where epoch 5 began; for epoch 3 (never written here) it answers (2, 4711) too, the last
epoch at or below 3 and its end; for epoch 5, the latest, the log end offset. A follower
truncates to that offset before it fetches, so a diverging tail it wrote under an older
leader goes (KIP-101, KIP-279).

The file is replaced atomically whenever the entries change: at the first batch of each
epoch and at truncation, both rare. It is not fsynced then, which would stall the event loop
(a new topic's partitions each start an epoch): :meth:`LeaderEpochFileCache.flush` fsyncs
it with the log's records, on the flush thread, as Kafka does since KAFKA-15046. What a
crash loses of it the log restores at open: recovery assigns the epochs of the batches it
recovers, and entries beyond the log end offset are cut. It is absent until the first entry.

This class is not thread-safe: the broker's event loop owns it, except :meth:`flush`.
"""

from __future__ import annotations

import functools
import logging
import os
from bisect import bisect_left, bisect_right
from collections.abc import Set
from pathlib import Path
from typing import NamedTuple

from odradek.log.checkpoint import (
    CorruptCheckpointError,
    fsync_path,
    read_checkpoint_file,
    write_checkpoint_file,
)

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

# OffsetsForLeaderEpoch's answer when the epoch is unknown (Kafka's
# OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET).
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    """The epochs of the partition in ``directory``, oldest first. Open the persisted one
    with :meth:`load`; ``LeaderEpochFileCache(directory)`` is a new, empty one."""

    def __init__(self, directory: Path, entries: list[EpochEntry] | None = None) -> None:
        self.directory = directory
        self._entries: list[EpochEntry] = entries or []
        # The file was replaced since it was last fsynced (read and cleared by flush).
        self._unsynced = False

    @classmethod
    def load(cls, directory: Path, file_names: Set[str] | None = None) -> LeaderEpochFileCache:
        """The cache as its file left it; empty if there is none (``file_names``: the names
        in ``directory``, if the caller listed it already). An unreadable file is ignored
        (logged): OffsetsForLeaderEpoch then answers from what is written next."""
        cache = cls(directory)
        if file_names is not None and LEADER_EPOCH_CHECKPOINT not in file_names:
            return cache
        try:
            path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
            rows = read_checkpoint_file(path, fields=2)
            entries = [EpochEntry(int(epoch), int(start)) for epoch, start in rows]
        except (CorruptCheckpointError, ValueError) as e:
            logger.warning("%s: ignoring the leader epoch checkpoint: %s", directory, e)
            entries = []
        for entry in entries:  # as Kafka does: whatever the file says, kept monotonic
            cache._assign(entry)
        return cache

    @functools.cached_property
    def path(self) -> Path:
        # Built on first use: a restart opens thousands of caches that are never written.
        return self.directory / LEADER_EPOCH_CHECKPOINT

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Records that ``epoch`` starts at ``start_offset``. Nothing changes for the latest
        epoch at or after its start (every batch of an epoch after its first), nor for a
        batch without an epoch (-1: written before KIP-101). An entry that would break the
        order (an epoch or start offset not above the latest's) first removes the entries
        it conflicts with, as Kafka's ``maybeTruncateNonMonotonicEntries`` does."""
        if epoch < 0 or start_offset < 0:
            return
        if self._assign(EpochEntry(epoch, start_offset)):
            self._write()

    def _assign(self, entry: EpochEntry) -> bool:
        latest = self._entries[-1] if self._entries else None
        if latest is not None and entry.epoch == latest.epoch \
                and entry.start_offset >= latest.start_offset:
            return False
        removed = []
        while self._entries and (self._entries[-1].epoch >= entry.epoch
                                 or self._entries[-1].start_offset >= entry.start_offset):
            removed.append(self._entries.pop())
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            # Kafka warns too: entries for data written are being dropped.
            logger.warning("%s: epoch entry %s removes the conflicting entries %s",
                           self.directory, entry, removed)
        self._entries.append(entry)
        return True

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose records hold ``offset``: the latest one starting at or before it;
        UNDEFINED_EPOCH for an offset before every known epoch (Kafka's ``epochForOffset``,
        what ListOffsets answers with an offset)."""
        i = bisect_right([entry.start_offset for entry in self._entries], offset)
        return self._entries[i - 1].epoch if i else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetsForLeaderEpoch answers for ``requested_epoch``:
        the log end offset for the latest epoch; otherwise the largest epoch at or below the
        requested one (the requested one itself if none is) and the start offset of the
        first epoch above it; (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) if the requested
        epoch is undefined or above every known one."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        epochs = [entry.epoch for entry in self._entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor_epoch = epochs[higher - 1] if higher else requested_epoch
        return floor_epoch, self._entries[higher].start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut at ``end_offset``: the epochs starting at or after it go."""
        keep = bisect_left([entry.start_offset for entry in self._entries], end_offset)
        if keep < len(self._entries):
            del self._entries[keep:]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset`` (DeleteRecords, retention): the epochs
        wholly below it go, and the one holding it now starts there (Kafka's rule; an
        epoch starting exactly there stays as it is)."""
        below = bisect_right([entry.start_offset for entry in self._entries], start_offset)
        if below == 0 or self._entries[0] == (self._entries[below - 1].epoch, start_offset):
            return
        holding = EpochEntry(self._entries[below - 1].epoch, start_offset)
        self._entries[:below] = [holding]
        self._write()

    def clear(self) -> None:
        """Forgets every epoch (the log starts afresh)."""
        if self._entries or self.path.exists():
            self._entries.clear()
            self._write()

    def _write(self) -> None:
        write_checkpoint_file(
            self.path, [f"{entry.epoch} {entry.start_offset}" for entry in self._entries],
            sync=False,
        )
        self._unsynced = True

    def flush(self) -> None:
        """fsyncs the file if it changed since the last flush; safe on the flush thread
        (the flag is cleared first, so a write meanwhile is flushed next time). Raises
        ``OSError`` like any flush."""
        if self._unsynced:
            self._unsynced = False
            fsync_path(self.path)

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({str(self.directory)!r}, {self._entries})"
