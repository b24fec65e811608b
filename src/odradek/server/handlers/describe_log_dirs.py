"""DescribeLogDirs (key 35, KIP-113): each log dir with the size of its partitions.

As Kafka 3.9 (ReplicaManager.describeLogDirs): every log dir is listed, by absolute path,
with the requested partitions it holds (null topics: all of them; a topic none of whose
requested partitions is there is left out), each partition's size in bytes and its offset
lag, which is how far its log end offset is behind the high watermark: 0 for a leader.
From v4 (KIP-827) a dir also carries its file system's total and usable bytes. A dir that
is offline (it failed, see ``LogManager``) or cannot be read answers KAFKA_STORAGE_ERROR
alone.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from kio.schema.errors import ErrorCode

from odradek.log import LogManager
from odradek.protocol.api import ApiKey
from odradek.server.handlers import RequestContext, handles

log = logging.getLogger(__name__)


@handles(ApiKey.DESCRIBE_LOG_DIRS)
def handle_describe_log_dirs(ctx: RequestContext, request, log_manager: LogManager) -> object:
    wanted = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    results = [_describe(log_manager, log_dir, wanted) for log_dir in log_manager.log_dirs]
    return ctx.respond(error_code=ErrorCode.none, results=results)


def _describe(log_manager: LogManager, log_dir: Path, wanted: set | None) -> dict:
    path = str(log_dir.absolute())
    offline = {"error_code": ErrorCode.kafka_storage_error, "log_dir": path, "topics": []}
    if log_dir in log_manager.offline_dirs:
        return offline
    try:
        usage = shutil.disk_usage(log_dir)
    except OSError as exc:
        log.warning("Unable to describe replica dirs for %s: %s", path, exc)
        return offline
    topics: dict[str, list[dict]] = {}
    for tp in log_manager.partitions_in_dir(log_dir):
        topic, index = tp.topic, tp.partition
        if wanted is not None and (topic, index) not in wanted:
            continue
        partition_log = log_manager.get(topic, index)
        topics.setdefault(topic, []).append({
            "partition_index": index,
            "partition_size": partition_log.size_in_bytes,
            "offset_lag": max(partition_log.high_watermark - partition_log.log_end_offset, 0),
            "is_future_key": False,
        })
    return {
        "error_code": ErrorCode.none,
        "log_dir": path,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
        "total_bytes": usage.total,
        "usable_bytes": usage.free,
    }
