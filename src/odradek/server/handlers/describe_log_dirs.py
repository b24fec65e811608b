"""DescribeLogDirs (key 35, KIP-113): each log dir with the size of its partitions.

As Kafka 3.9 (ReplicaManager.describeLogDirs): every log dir is listed, by absolute path,
with the requested partitions it holds (null topics: all of them; a topic none of whose
requested partitions is there is left out), each partition's size in bytes and its offset
lag, which is how far its log end offset is behind the high watermark: 0 for a leader.
From v4 (KIP-827) a dir also carries its file system's total and usable bytes. A dir that
is offline (it failed, see ``LogManager``) or cannot be read answers KAFKA_STORAGE_ERROR
alone. Without DESCRIBE on the cluster the answer is CLUSTER_AUTHORIZATION_FAILED and no
log dir (``KafkaApis.handleDescribeLogDirsRequest``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.log_dirs import LogDirDescription
from odradek.replication.replica_manager import ReplicaManager
from odradek.security.acl import AclOperation
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import authorize_cluster


@handles(ApiKey.DESCRIBE_LOG_DIRS)
def handle_describe_log_dirs(ctx: RequestContext, request,
                             replica_manager: ReplicaManager) -> object:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return ctx.respond(error_code=ErrorCode.cluster_authorization_failed, results=[])
    wanted = None
    if request.topics is not None:
        wanted = {TopicPartition(t.topic, p) for t in request.topics for p in t.partitions}
    return ctx.respond(error_code=ErrorCode.none, results=[
        _result(log_dir) for log_dir in replica_manager.describe_log_dirs(wanted)])


def _result(log_dir: LogDirDescription) -> dict:
    if log_dir.error is not ErrorCode.none:
        return {"error_code": log_dir.error, "log_dir": log_dir.path, "topics": []}
    topics: dict[str, list[dict]] = {}
    for partition in log_dir.partitions:
        topics.setdefault(partition.topic_partition.topic, []).append({
            "partition_index": partition.topic_partition.partition,
            "partition_size": partition.size,
            "offset_lag": partition.offset_lag,
            "is_future_key": False,
        })
    return {
        "error_code": ErrorCode.none,
        "log_dir": log_dir.path,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
        "total_bytes": log_dir.total_bytes,
        "usable_bytes": log_dir.usable_bytes,
    }
