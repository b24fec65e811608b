"""``partition.metadata``: the id of the topic a partition's log belongs to (Kafka's
``PartitionMetadataFile``, KIP-516).

A topic deleted and created again under the same name while a broker was away leaves that
broker a log by the right name for the wrong topic: its records and leader epochs would pass
for the new topic's, and truncation by epoch could keep them. The file lets the broker
tell: a log whose file names another topic id is deleted and started afresh. Kafka's
format::

    version: 0
    topic_id: <the id, base64url without padding>
"""

from __future__ import annotations

import base64
import functools
import os
import uuid
from pathlib import Path

from odradek.log.checkpoint import read_file

PARTITION_METADATA_FILE = "partition.metadata"


def read_topic_id(directory: Path) -> uuid.UUID | None:
    """The topic id the log in ``directory`` was created for; None without the file (a log
    from before it, or an unreadable file: the caller writes it)."""
    try:
        text = read_file(os.path.join(directory, PARTITION_METADATA_FILE)).decode()
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        field, _, value = line.partition(": ")
        if field == "topic_id":
            return _decode_topic_id(value)
    return None


@functools.lru_cache(maxsize=1024)
def _decode_topic_id(encoded: str) -> uuid.UUID | None:
    # Cached: every partition of a topic holds the same id, and a restart reads them all.
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    except ValueError:
        return None


def write_topic_id(directory: Path, topic_id: uuid.UUID) -> None:
    encoded = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
    path = directory / PARTITION_METADATA_FILE
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w") as f:
        f.write(f"version: 0\ntopic_id: {encoded}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
