"""``OpenFiles``: the open ``.log`` descriptors of every segment of a broker, bounded.

Kafka keeps each segment's three files open for the segment's lifetime and asks operators
to raise the descriptor limit; 10,000 partitions would hold 30,000 descriptors that way, past
a typical ``ulimit -n``. Here index files are never kept open (their entries are in memory,
see :mod:`odradek.log.index`), and a segment's ``.log`` is opened on its first read or append
and closed again when more than ``capacity`` are open and it is the least recently used.
A busy partition keeps its active segment open; an idle one costs no descriptor.

This class is not thread-safe: the broker's event loop owns it. The flush thread never
uses these descriptors (it opens its own, see ``checkpoint.fsync_path``), so evicting one
while an fsync runs is safe.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path

# Leaves room under a default `ulimit -n` of 1024..20000 for client connections and the
# rest of the process, while keeping the active segment of 1,000 busy partitions open.
DEFAULT_MAX_OPEN_SEGMENT_FILES = 1000


class OpenFiles:
    def __init__(self, capacity: int = DEFAULT_MAX_OPEN_SEGMENT_FILES) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1: {capacity}")
        self.capacity = capacity
        self._fds: OrderedDict[Path, int] = OrderedDict()

    def fd(self, path: Path, *, create: bool = False) -> int:
        """A descriptor of ``path`` opened for reading and appending; the file must exist
        unless ``create``. Raises ``OSError`` if it cannot be opened (a failed log dir)."""
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return fd
        flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0)
        fd = os.open(path, flags, 0o644)
        self._fds[path] = fd
        if len(self._fds) > self.capacity:
            _, evicted = self._fds.popitem(last=False)
            os.close(evicted)
        return fd

    def close(self, path: Path) -> None:
        """Closes ``path``'s descriptor if it is open (before its file is renamed, removed or
        truncated by path, and when its segment is closed)."""
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def close_all(self) -> None:
        while self._fds:
            os.close(self._fds.popitem()[1])

    def __len__(self) -> int:
        return len(self._fds)
