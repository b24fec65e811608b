"""``TransactionIndex``: the aborted transactions whose abort markers are in one segment
(Kafka's ``.txnindex``, KIP-98).

A READ_COMMITTED fetch answers with the aborted transactions overlapping the records it
returns, so that the consumer drops their records; the index finds them without reading
the log. Each entry is one aborted transaction: the producer, its first and last offsets
in the log (the last one is the abort marker's), and the last stable offset when the marker
was written. A transaction may start in an earlier segment; its entry is in the segment
holding its marker, so entries are in the order of their last offsets.

The file is created by the first entry: a segment without aborted transactions has none
(Kafka creates it lazily too). Entries are kept in memory, like the other indexes'
(:mod:`odradek.log.index`), and each is written to the file when appended; no descriptor
stays open, so closing the segment leaves nothing to close here.

Example: producer 7 aborts a transaction spanning offsets 100..140 while the last stable
offset is 95; the marker is at 140 in segment 120. ``00000000000000000120.txnindex`` gets
the entry (0, 7, 100, 140, 95), and ``collect_aborted(130, 200)`` finds it.

This class is not thread-safe: the broker's event loop owns it (the flush thread only
fsyncs its file, through a descriptor of its own).
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from odradek.log.checkpoint import read_file

logger = logging.getLogger(__name__)

# .txnindex entry (Kafka's AbortedTxn), 34 bytes, big-endian:
#   version            int16  0
#   producer_id        int64  the producer whose transaction was aborted
#   first_offset       int64  the transaction's first offset in the log
#   last_offset        int64  its last offset: that of the abort marker
#   last_stable_offset int64  the partition's last stable offset when the marker was written
# Example: (0, 7, 100, 140, 95) is 00 00 | 00..07 | 00..64 | 00..8c | 00..5f.
ABORTED_TXN = struct.Struct(">hqqqq")
ABORTED_TXN_VERSION = 0


class CorruptTransactionIndexError(Exception):
    """An entry appended out of order: its last offset does not follow the last one's."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions of the segment at ``base_offset``, oldest first."""

    def __init__(self, path: Path, base_offset: int, *, exists: bool = True) -> None:
        """``exists``: False when the caller knows there is no file, so none is read."""
        self.path = path
        self._entries = self._read(path, base_offset) if exists else []

    @staticmethod
    def _read(path: Path, base_offset: int) -> list[AbortedTxn]:
        try:
            data = read_file(path)
        except FileNotFoundError:
            return []
        whole = len(data) - len(data) % ABORTED_TXN.size
        if whole != len(data):
            # A crash while an entry was written: the torn entry was never acknowledged.
            logger.warning("%s: dropping %d bytes of a torn entry", path, len(data) - whole)
            with open(path, "r+b") as f:
                f.truncate(whole)
        entries = []
        for version, *fields in ABORTED_TXN.iter_unpack(data[:whole]):
            txn = AbortedTxn(*fields)
            # Kafka's sanityCheck: a marker before the segment cannot be this segment's.
            if version != ABORTED_TXN_VERSION or txn.last_offset < base_offset \
                    or (entries and txn.last_offset <= entries[-1].last_offset):
                # Opening the log writes again the entries of the abort markers it replays
                # (those after the newest producer state snapshot); older ones are lost.
                logger.warning("%s: entry (%d, %s) cannot be right; starting the index "
                               "afresh", path, version, txn)
                path.unlink()
                return []
            entries.append(txn)
        return entries

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, txn: AbortedTxn) -> None:
        """Adds an entry, creating the file for the first; last offsets must increase."""
        if self._entries and txn.last_offset <= self._entries[-1].last_offset:
            raise CorruptTransactionIndexError(
                f"{self.path}: last offset {txn.last_offset} does not follow "
                f"{self._entries[-1].last_offset}"
            )
        with open(self.path, "ab") as f:
            f.write(ABORTED_TXN.pack(ABORTED_TXN_VERSION, txn.producer_id, txn.first_offset,
                                     txn.last_offset, txn.last_stable_offset))
        self._entries.append(txn)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int
                        ) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping [``fetch_offset``, ``upper_bound_offset``),
        and whether the search is complete: False means later segments may hold more (no
        entry here was written at or beyond the upper bound), as Kafka's
        ``TxnIndexSearchResult.isComplete``."""
        found = []
        for txn in self._entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drops the entries whose abort marker is at or beyond ``offset``."""
        keep = next((i for i, txn in enumerate(self._entries) if txn.last_offset >= offset),
                    len(self._entries))
        if keep < len(self._entries):
            del self._entries[keep:]
            os.truncate(self.path, keep * ABORTED_TXN.size)

    def rename(self, path: Path) -> None:
        """Follows its segment's files (``.deleted``, ``.cleaned``, ``.swap``), if it has one."""
        if self.path.exists():
            os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"TransactionIndex({str(self.path)!r}, entries={len(self._entries)})"
