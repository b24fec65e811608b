"""Fetch (key 1): committed batches as stored, with Kafka's long poll and size limits.

A fetch is answered at once when it has ``min_bytes`` of data, when ``max_wait`` is zero
or when a partition has an error; otherwise it waits until an append to one of its
partitions brings enough data, or until ``max_wait`` passes (Kafka's DelayedFetch). Sizes:
``partition_max_bytes`` per partition and ``max_bytes`` for the response, but the first
non-empty partition always returns at least one whole batch, however large, so that a
consumer can never be stuck behind a batch bigger than its limits (KIP-74).

Fetch sessions (KIP-227) are refused the way the protocol allows: every response carries
session id 0, which tells the client no session was created and it keeps sending full
fetch requests; an incremental fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from odradek.log import LogError, OffsetOutOfRangeError
from odradek.protocol.api import ApiKey
from odradek.protocol.messages import millis
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.partition import PartitionError
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.handlers import RequestContext, handles

# KIP-227: session epoch -1 is a sessionless full fetch; 0 asks for a new session.
FINAL_EPOCH = -1


@handles(ApiKey.FETCH)
def handle_fetch(ctx: RequestContext, request, replica_manager: ReplicaManager) -> object:
    if getattr(request, "session_id", 0) != 0:
        return ctx.respond(error_code=ErrorCode.fetch_session_id_not_found, session_id=0,
                           responses=())
    responses, total_bytes, has_error = _read(replica_manager, request)
    max_wait_ms = millis(request.max_wait)
    if total_bytes >= request.min_bytes or max_wait_ms <= 0 or has_error:
        return _respond(ctx, responses)
    # Watch now, before returning: the coroutine below starts only at a later turn of the
    # event loop, and an append in between would otherwise go unseen (a lost wakeup).
    watched = [TopicPartition(t.topic, p.partition) for t in request.topics for p in t.partitions]
    appended = replica_manager.wait_for_appends(watched)
    return _long_poll(ctx, replica_manager, request, max_wait_ms, watched, appended)


async def _long_poll(ctx: RequestContext, replica_manager: ReplicaManager, request,
                     max_wait_ms: int, watched: list[TopicPartition],
                     appended: asyncio.Future[None]) -> object:
    """Waits for appends, then reads again, until ``min_bytes`` or the deadline; each round
    watches again before it reads, so no append is missed between rounds either."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_ms / 1000
    try:
        while True:
            await asyncio.wait([appended], timeout=max(0.0, deadline - loop.time()))
            replica_manager.stop_waiting(watched, appended)
            appended = replica_manager.wait_for_appends(watched)
            responses, total_bytes, has_error = _read(replica_manager, request)
            if total_bytes >= request.min_bytes or has_error or loop.time() >= deadline:
                return _respond(ctx, responses)
    finally:
        replica_manager.stop_waiting(watched, appended)


def _respond(ctx: RequestContext, responses: list[dict]) -> object:
    return ctx.respond(error_code=ErrorCode.none, session_id=0, responses=responses)


def _read(replica_manager: ReplicaManager, request) -> tuple[list[dict], int, bool]:
    remaining = request.max_bytes
    total_bytes = 0
    has_error = False
    responses = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            try:
                partition = replica_manager.leader_partition(
                    TopicPartition(topic.topic, wanted.partition),
                    getattr(wanted, "current_leader_epoch", -1))
            except PartitionError as e:
                partitions.append(_error(wanted.partition, e.error_code))
                has_error = True
                continue
            try:
                info = partition.read_records(
                    wanted.fetch_offset,
                    max(0, min(wanted.partition_max_bytes, remaining)),
                    min_one_batch=total_bytes == 0,
                )
            except OffsetOutOfRangeError:
                partitions.append(_error(wanted.partition, ErrorCode.offset_out_of_range,
                                         partition))
                has_error = True
                continue
            except LogError as e:  # KAFKA_STORAGE_ERROR: the partition's log dir failed
                partitions.append(_error(wanted.partition, e.error_code))
                has_error = True
                continue
            size = len(info.records)
            total_bytes += size
            remaining -= size
            partitions.append({
                "partition_index": wanted.partition,
                "error_code": ErrorCode.none,
                "high_watermark": partition.high_watermark,
                "last_stable_offset": partition.high_watermark,
                "log_start_offset": partition.log_start_offset,
                "aborted_transactions": None,
                "preferred_read_replica": -1,
                "records": info.records,
            })
        responses.append({"topic": topic.topic, "partitions": partitions})
    return responses, total_bytes, has_error


def _error(index: int, error: ErrorCode, partition=None) -> dict:
    # Empty records, never null: Kafka sends MemoryRecords.EMPTY with an error, and
    # librdkafka fails to parse the whole response on a null (negative) MessageSetSize.
    return {
        "partition_index": index,
        "error_code": error,
        "high_watermark": partition.high_watermark if partition else -1,
        "last_stable_offset": partition.high_watermark if partition else -1,
        "log_start_offset": partition.log_start_offset if partition else -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }
