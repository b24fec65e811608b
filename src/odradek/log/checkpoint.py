"""Checkpoint files, Kafka's ``CheckpointFile`` text format: a version line, a count line,
then one entry per line, its fields separated by spaces. The offset checkpoints of a log dir
hold ``topic partition offset`` entries::

    0                  version
    2                  number of entries
    orders 0 1200      topic, partition, offset
    orders.dlq 3 0

``log-start-offset-checkpoint`` keeps each partition's log start offset across restarts,
since DeleteRecords can move it into the middle of a segment. ``recovery-point-offset-checkpoint``
keeps each partition's recovery point: everything below it was fsynced, so a restart after a
crash only recovers the segments at or above it. ``replication-offset-checkpoint`` keeps each
partition's high watermark, so that a restart does not expose records no replica set had
confirmed. The same format, with ``epoch start_offset`` entries, is a partition's
``leader-epoch-checkpoint`` (:mod:`odradek.log.leader_epoch`). A file is replaced atomically
(write a temporary file, fsync, rename), so a crash leaves the old or the new one.

``.kafka_cleanshutdown`` (empty) is written in each log dir as the last step of a clean
shutdown: at startup it says that every file in the dir was closed cleanly, so nothing needs
recovering. It is removed once the logs are loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from odradek.protocol.topic_partition import TopicPartition

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

_VERSION = 0

# Whole files are read this much at a time: the small files of a partition (checkpoints,
# producer state snapshots, partition.metadata) take one read.
_READ_CHUNK = 64 * 1024


class CorruptCheckpointError(Exception):
    pass


def read_checkpoint_file(path: str | Path, fields: int) -> list[list[str]]:
    """The entries of ``path``, each split into its ``fields`` fields; empty if there is no
    such file. Raises ``CorruptCheckpointError`` for a file not in the format."""
    try:
        lines = read_file(path).decode().splitlines()
    except FileNotFoundError:
        return []
    try:
        if int(lines[0]) != _VERSION:
            raise CorruptCheckpointError(f"{path}: unknown version {lines[0]!r}")
        count = int(lines[1])
    except (IndexError, ValueError) as e:
        raise CorruptCheckpointError(f"{path}: {e}") from e
    entries = [line.split(" ") for line in lines[2 : 2 + count]]
    if len(entries) != count or any(len(entry) != fields for entry in entries):
        raise CorruptCheckpointError(
            f"{path}: header says {count} entries of {fields} fields, found {entries}"
        )
    return entries


def write_checkpoint_file(path: Path, entries: Sequence[str], *, sync: bool = True) -> None:
    """Replaces ``path`` atomically with ``entries`` (one line each), fsynced unless
    ``sync`` is false (the caller then fsyncs it later, off the event loop)."""
    lines = [str(_VERSION), str(len(entries)), *entries]
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w") as f:
        f.write("\n".join(lines) + "\n")
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(temporary, path)


def read_offsets_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The entries of an offset checkpoint; empty if there is no such file."""
    try:
        return {
            TopicPartition(topic, int(partition)): int(offset)
            for topic, partition, offset in read_checkpoint_file(path, fields=3)
        }
    except ValueError as e:
        raise CorruptCheckpointError(f"{path}: {e}") from e


def write_offsets_checkpoint(path: Path, entries: Mapping[TopicPartition, int]) -> None:
    write_checkpoint_file(
        path, [f"{tp.topic} {tp.partition} {offset}" for tp, offset in entries.items()]
    )


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


def read_file(path: str | Path) -> bytes:
    """The bytes of the file at ``path``, read with plain system calls: at startup every
    partition reads a few small files, and ``Path.read_bytes`` costs three times as much
    in Python's I/O layers as the reads themselves. For the same reason the loaders pass
    ``os.path.join(directory, name)``: building a ``Path`` costs as much as the read."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, _READ_CHUNK):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def fsync_path(path: Path) -> None:
    """fsyncs the file or directory at ``path`` through a descriptor of its own, so any
    thread may call it whatever the event loop does with its descriptors (Linux flushes the
    file's dirty pages whichever descriptor wrote them)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
