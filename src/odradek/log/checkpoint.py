"""Offset checkpoint files, Kafka's ``CheckpointFile`` text format, one per log dir::

    0                  version
    2                  number of entries
    orders 0 1200      topic, partition, offset
    orders.dlq 3 0

``log-start-offset-checkpoint`` keeps each partition's log start offset across restarts,
since DeleteRecords can move it into the middle of a segment. ``recovery-point-offset-checkpoint``
keeps each partition's recovery point: everything below it was fsynced, so a restart after a
crash only recovers the segments at or above it. A file is replaced atomically (write a
temporary file, fsync, rename), so a crash leaves the old or the new one.

``.kafka_cleanshutdown`` (empty) is written in each log dir as the last step of a clean
shutdown: at startup it says that every file in the dir was closed cleanly, so nothing needs
recovering. It is removed once the logs are loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

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


def write_clean_shutdown_file(log_dir: Path) -> None:
    """The marker, made durable with its directory entry: a crash right after a clean
    shutdown must not be mistaken for an unclean one, nor the reverse."""
    path = log_dir / CLEAN_SHUTDOWN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_path(log_dir)


def fsync_path(path: Path) -> None:
    """fsyncs the file or directory at ``path`` through a descriptor of its own, so any
    thread may call it whatever the event loop does with its descriptors (Linux flushes the
    file's dirty pages whichever descriptor wrote them)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
