"""Fetch (key 1): a translation between the request and ``ReplicaManager.fetch_messages``.

The replica manager answers at once when the fetch has ``min_bytes`` of data, when
``max_wait`` is zero or when a partition has an error; otherwise the fetch waits in its
purgatory until enough data is below the high watermark (for a consumer) or until
``max_wait`` passes (Kafka's DelayedFetch). Sizes: ``partition_max_bytes`` per partition and
``max_bytes`` for the response, but the first non-empty partition always returns at least
one whole batch, however large, so that a consumer can never be stuck behind a batch bigger
than its limits (KIP-74).

Fetch sessions (KIP-227) are refused the way the protocol allows: every response carries
session id 0, which tells the client no session was created and it keeps sending full
fetch requests; an incremental fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND.

Authorization, as Kafka's ``KafkaApis.handleFetchRequest``: a consumer needs READ on each
partition's topic, else the partition is answered TOPIC_AUTHORIZATION_FAILED (before
whether it exists is looked at); a follower (replica id >= 0) needs CLUSTER_ACTION on the
cluster, else every partition is answered TOPIC_AUTHORIZATION_FAILED, as Kafka answers it.
A refused partition is not read: the rest of the fetch is served, and waits, as if it had
not been asked for.
"""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.protocol.messages import millis
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.delayed_fetch import (
    CONSUMER_REPLICA_ID,
    FetchParams,
    IsolationLevel,
    LogReadResult,
    PartitionFetchInfo,
)
from odradek.replication.replica_manager import ReplicaManager
from odradek.security.acl import AclOperation
from odradek.server.completion import Completion
from odradek.server.config import SecurityProtocol
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import authorize_cluster, refused_partitions

# The listeners whose bytes go to the socket as they are.
PLAIN_PROTOCOLS = frozenset({SecurityProtocol.PLAINTEXT, SecurityProtocol.SASL_PLAINTEXT})


@handles(ApiKey.FETCH)
def handle_fetch(ctx: RequestContext, request, replica_manager: ReplicaManager) -> object:
    if getattr(request, "session_id", 0) != 0:
        return ctx.respond(error_code=ErrorCode.fetch_session_id_not_found, session_id=0,
                           responses=())
    params = _params(request, ctx)
    refused = _refused(ctx, params)
    completion: Completion[dict[TopicPartition, LogReadResult]] = Completion()
    if not refused:
        replica_manager.fetch_messages(params, completion)
        return completion.then(lambda results: _response(ctx, request, results))
    replica_manager.fetch_messages(dataclasses.replace(params, partitions={
        tp: info for tp, info in params.partitions.items() if tp not in refused}), completion)
    # Every partition's answer in request order again, as _response reads them.
    return completion.then(lambda results: _response(ctx, request, {
        tp: refused[tp] if tp in refused else results[tp] for tp in params.partitions}))


def _refused(ctx: RequestContext, params: FetchParams) -> dict[TopicPartition, LogReadResult]:
    """The partitions the fetcher may not read, each with its answer."""
    if params.is_from_follower:
        if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
            return {}
        refused = params.partitions
    else:
        refused = refused_partitions(ctx, AclOperation.READ, params.partitions)
    return {tp: LogReadResult(error=ErrorCode.topic_authorization_failed) for tp in refused}


def _params(request, ctx: RequestContext) -> FetchParams:
    return FetchParams(
        replica_id=getattr(request, "replica_id", CONSUMER_REPLICA_ID),
        max_wait_ms=millis(request.max_wait),
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        isolation_level=IsolationLevel(getattr(request, "isolation_level", 0)),
        # The documents' zero copy: large reads go from the page cache to the socket with
        # sendfile, except through TLS, which encrypts in memory.
        zero_copy=ctx.connection.security_protocol in PLAIN_PROTOCOLS,
        partitions={
            TopicPartition(topic.topic, wanted.partition): PartitionFetchInfo(
                fetch_offset=wanted.fetch_offset,
                partition_max_bytes=wanted.partition_max_bytes,
                current_leader_epoch=getattr(wanted, "current_leader_epoch", -1),
                log_start_offset=getattr(wanted, "log_start_offset", -1),
            )
            for topic in request.topics for wanted in topic.partitions
        },
    )


def _response(ctx: RequestContext, request, results: dict[TopicPartition, LogReadResult]
              ) -> object:
    # The results are in request order, one per partition named: read them in turn, unless
    # the request named a partition twice (then each takes its partition's result).
    named = sum(len(topic.partitions) for topic in request.topics)
    in_order = iter(results.values()) if named == len(results) else None
    return ctx.respond(error_code=ErrorCode.none, session_id=0, responses=[
        {"topic": topic.topic,
         "partitions": [_partition_response(
             wanted.partition,
             next(in_order) if in_order is not None
             else results[TopicPartition(topic.topic, wanted.partition)])
             for wanted in topic.partitions]}
        for topic in request.topics])


def _partition_response(index: int, result: LogReadResult) -> dict:
    # With an error the records are empty, never null: Kafka sends MemoryRecords.EMPTY, and
    # librdkafka fails to parse the whole response on a null (negative) MessageSetSize.
    return {
        "partition_index": index,
        "error_code": result.error,
        "high_watermark": result.high_watermark,
        "last_stable_offset": result.last_stable_offset,
        "log_start_offset": result.log_start_offset,
        "aborted_transactions": None if result.aborted_transactions is None else [
            {"producer_id": producer_id, "first_offset": first_offset}
            for producer_id, first_offset in result.aborted_transactions],
        "preferred_read_replica": -1,
        "records": result.records,
    }
