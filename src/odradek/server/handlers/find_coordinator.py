"""FindCoordinator (key 10): which broker coordinates a group or a transactional id.

A group's coordinator is the leader of its partition of ``__consumer_offsets``, a
transactional id's the leader of its partition of ``__transaction_state`` (both chosen by
``offsets_topic.partition_for``, Kafka's hash). Each topic is created by the first
FindCoordinator that needs it, as Kafka does, with its own partition count, replication
factor (``min(<topic>.replication.factor, live brokers)``) and Kafka's topic configs
(compacted; see ``AutoTopicCreationManager``). The coordinator is described by its endpoint
on the client's listener; a leader without that listener is COORDINATOR_NOT_AVAILABLE, as
from Kafka. From v4 one request asks for a batch of keys (KIP-699).

A key is looked up only if the principal may DESCRIBE what it names: the group
(GROUP_AUTHORIZATION_FAILED otherwise) or the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED). A refused key creates no topic and learns no
coordinator; in a batch each key is authorized on its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.offsets_topic import partition_for
from odradek.metadata.model import TopicMetadata
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.auto_topic_creation import AutoTopicCreationManager
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import AUTHORIZATION_FAILED_MESSAGES
from odradek.server.handlers.metadata import listener_brokers

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
BATCHED_KEYS_MIN_VERSION = 4  # KIP-699
# Kafka's message for an error without one of its own: the error's description.
ERROR_MESSAGES = AUTHORIZATION_FAILED_MESSAGES | {
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
}


@dataclass(frozen=True, slots=True)
class KeyType:
    """What a key names, the error refusing a principal that may not DESCRIBE it, and the
    topic whose partition leaders coordinate such keys."""

    resource_type: ResourceType
    refusal: ErrorCode
    coordinator_topic: Callable[[AutoTopicCreationManager], Awaitable[TopicMetadata | None]]


KEY_TYPES = {
    GROUP_KEY_TYPE: KeyType(ResourceType.GROUP, ErrorCode.group_authorization_failed,
                            AutoTopicCreationManager.offsets_topic),
    TRANSACTION_KEY_TYPE: KeyType(ResourceType.TRANSACTIONAL_ID,
                                  ErrorCode.transactional_id_authorization_failed,
                                  AutoTopicCreationManager.transaction_state_topic),
}


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
    kind = KEY_TYPES.get(key_type)
    if kind is None:
        return _error(key, ErrorCode.invalid_request, f"Unknown coordinator type {key_type}")
    if not ctx.authorize(AclOperation.DESCRIBE, kind.resource_type, key):
        return _error(key, kind.refusal)
    topic = await kind.coordinator_topic(auto_topic_creation)
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
    if message is None:
        message = ERROR_MESSAGES.get(error)
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error,
            "error_message": message}
