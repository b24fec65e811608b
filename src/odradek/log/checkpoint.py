"""Offset checkpoint files, Kafka's ``CheckpointFile`` text format, one per log dir::

    0                  version
    2                  number of entries
    orders 0 1200      topic, partition, offset
    orders.dlq 3 0

``log-start-offset-checkpoint`` keeps each partition's log start offset across restarts,
since DeleteRecords can move it into the middle of a segment. A file is replaced
atomically (write a temporary file, fsync, rename), so a crash leaves the old or the new one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"

_VERSION = 0


class CorruptCheckpointError(Exception):
    pass


def read_offsets_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The entries of ``path``; empty if there is no such file."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != _VERSION:
            raise CorruptCheckpointError(f"{path}: unknown version {lines[0]!r}")
        count = int(lines[1])
        entries = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split(" ")
            entries[(topic, int(partition))] = int(offset)
    except (IndexError, ValueError) as e:
        raise CorruptCheckpointError(f"{path}: {e}") from e
    if len(entries) != count:
        raise CorruptCheckpointError(f"{path}: {len(entries)} entries, header says {count}")
    return entries


def write_offsets_checkpoint(path: Path, entries: Mapping[tuple[str, int], int]) -> None:
    lines = [str(_VERSION), str(len(entries))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in entries.items()]
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
