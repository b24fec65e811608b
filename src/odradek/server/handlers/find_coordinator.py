"""FindCoordinator (key 10): which broker coordinates a group or a transactional id.

A group's coordinator is the leader of its partition of ``__consumer_offsets``, a
transactional id's the leader of its partition of ``__transaction_state`` (both chosen by
``offsets_topic.partition_for``, Kafka's hash). Each topic is created by the first
FindCoordinator that needs it, as Kafka does, with its own partition count, replication
factor (``min(<topic>.replication.factor, live brokers)``) and Kafka's topic configs
(compacted; see ``AutoTopicCreationManager``). The coordinator is described by its endpoint
on the client's listener; a leader without that listener is COORDINATOR_NOT_AVAILABLE, as
from Kafka. From v4 one request asks for a batch of keys (KIP-699).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.offsets_topic import partition_for
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.server.auto_topic_creation import AutoTopicCreationManager
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.metadata import listener_brokers

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
BATCHED_KEYS_MIN_VERSION = 4  # KIP-699


@handles(ApiKey.FIND_COORDINATOR)
async def handle_find_coordinator(ctx: RequestContext, request, metadata: MetadataStore,
                                  auto_topic_creation: AutoTopicCreationManager) -> object:
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    batched = ctx.api_version >= BATCHED_KEYS_MIN_VERSION
    keys = request.coordinator_keys if batched else (request.key,)
    coordinators = [await _find(ctx, metadata, auto_topic_creation, key_type, key)
                    for key in keys]
    if batched:
        return ctx.respond(coordinators=coordinators)
    [found] = coordinators
    return ctx.respond(**{k: v for k, v in found.items() if k != "key"})


async def _find(ctx: RequestContext, metadata: MetadataStore,
                auto_topic_creation: AutoTopicCreationManager, key_type: int, key: str) -> dict:
    if key_type == TRANSACTION_KEY_TYPE:
        topic = await auto_topic_creation.transaction_state_topic()
    elif key_type == GROUP_KEY_TYPE:
        topic = await auto_topic_creation.offsets_topic()
    else:
        return _error(key, ErrorCode.invalid_request, f"Unknown coordinator type {key_type}")
    if topic is None or not topic.partitions:
        return _error(key, ErrorCode.coordinator_not_available)
    leader_id = topic.partitions[partition_for(key, len(topic.partitions))].leader
    endpoint = next((e for b, e in listener_brokers(metadata, ctx.listener_name)
                     if b.node_id == leader_id), None)
    if endpoint is None:
        return _error(key, ErrorCode.coordinator_not_available)
    return {"key": key, "node_id": leader_id, "host": endpoint.host, "port": endpoint.port,
            "error_code": ErrorCode.none, "error_message": None}


def _error(key: str, error: ErrorCode, message: str | None = None) -> dict:
    # Kafka's message for an error without one of its own: the error's description.
    if message is None and error is ErrorCode.coordinator_not_available:
        message = "The coordinator is not available."
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error,
            "error_message": message}
