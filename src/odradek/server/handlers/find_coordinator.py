"""FindCoordinator (key 10): which broker coordinates a group.

A group's coordinator is the leader of its partition of ``__consumer_offsets``
(``offsets_topic.partition_for``). The topic is created by the first FindCoordinator that
needs it, as Kafka does, with ``offsets.topic.num.partitions`` partitions, replication
factor ``min(offsets.topic.replication.factor, live brokers)`` and Kafka's topic configs
(compacted). From v4 one request asks for a batch of keys (KIP-699). Transaction
coordinators (key type 1) are not served yet: COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.offsets_topic import (
    OFFSETS_TOPIC,
    offsets_topic_configs,
    partition_for,
)
from odradek.metadata.model import TopicMetadata
from odradek.metadata.store import TopicExistsError
from odradek.protocol.api import ApiKey
from odradek.server.handlers import RequestContext, handles

if TYPE_CHECKING:
    from odradek.server.broker import Broker

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
BATCHED_KEYS_MIN_VERSION = 4  # KIP-699


@handles(ApiKey.FIND_COORDINATOR)
async def handle_find_coordinator(ctx: RequestContext, request) -> object:
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    batched = ctx.api_version >= BATCHED_KEYS_MIN_VERSION
    keys = request.coordinator_keys if batched else (request.key,)
    coordinators = [await _find(ctx, key_type, key) for key in keys]
    if batched:
        return ctx.respond(throttle_time=0, coordinators=coordinators)
    [found] = coordinators
    return ctx.respond(throttle_time=0, **{k: v for k, v in found.items() if k != "key"})


async def _find(ctx: RequestContext, key_type: int, key: str) -> dict:
    if key_type == TRANSACTION_KEY_TYPE:
        return _error(key, ErrorCode.coordinator_not_available)
    if key_type != GROUP_KEY_TYPE:
        return _error(key, ErrorCode.invalid_request, f"Unknown coordinator type {key_type}")
    topic = await ensure_offsets_topic(ctx.broker)
    leader_id = topic.partitions[partition_for(key, len(topic.partitions))].leader
    leader = next((b for b in ctx.broker.metadata.brokers() if b.node_id == leader_id), None)
    if leader is None:
        return _error(key, ErrorCode.coordinator_not_available)
    return {"key": key, "node_id": leader.node_id, "host": leader.host, "port": leader.port,
            "error_code": ErrorCode.none, "error_message": None}


async def ensure_offsets_topic(broker: Broker) -> TopicMetadata:
    """``__consumer_offsets``, created with its own configs the first time it is needed."""
    store = broker.metadata
    topic = store.topic(OFFSETS_TOPIC)
    if topic is None:
        get = broker.config.get
        try:
            topic = await broker.create_topic(
                OFFSETS_TOPIC, get("offsets.topic.num.partitions"),
                min(get("offsets.topic.replication.factor"), len(store.brokers())),
                offsets_topic_configs(get))
        except TopicExistsError:  # created by a request that got here first
            topic = store.topic(OFFSETS_TOPIC)
    broker.group_coordinator.manager.load()  # the partitions this broker now leads
    return topic


def _error(key: str, error: ErrorCode, message: str | None = None) -> dict:
    # Kafka's message for an error without one of its own: the error's description.
    if message is None and error is ErrorCode.coordinator_not_available:
        message = "The coordinator is not available."
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error,
            "error_message": message}
