"""DeleteTopics (key 20): topics named (v1-v5), or named or given by id (v6, KIP-516).

As Kafka 3.9 (KafkaApis.handleDeleteTopicsRequest): with ``delete.topic.enable=false`` every
topic fails (INVALID_REQUEST before v3, TOPIC_DELETION_DISABLED after); an entry with both a
name and an id fails the whole request with INVALID_REQUEST; an id nobody has is
UNKNOWN_TOPIC_ID and a name nobody has UNKNOWN_TOPIC_OR_PARTITION. The metadata store's
event makes the broker delete the logs and every group's committed offsets of the topic.

Authorization comes before whether a named topic exists: DELETE on the topic is needed, else
TOPIC_AUTHORIZATION_FAILED; a topic given by id whose name the client may not DESCRIBE is
answered so without its name (the id is not secret, the name is).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.metadata.store import MetadataStore, UnknownTopicError
from odradek.protocol.api import ApiKey
from odradek.protocol.messages import millis
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.config import BrokerConfig
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.api_error import completion_error

# KIP-599 changed the error of a disabled delete to TOPIC_DELETION_DISABLED from v3 on.
TOPIC_DELETION_DISABLED_MIN_VERSION = 3
# KIP-516: topics by id.
TOPIC_IDS_MIN_VERSION = 6


@handles(ApiKey.DELETE_TOPICS)
async def handle_delete_topics(ctx: RequestContext, request, metadata: MetadataStore,
                               config: BrokerConfig) -> object:
    if ctx.api_version >= TOPIC_IDS_MIN_VERSION:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    if not config.get("delete.topic.enable"):
        disabled = (ErrorCode.topic_deletion_disabled
                    if ctx.api_version >= TOPIC_DELETION_DISABLED_MIN_VERSION
                    else ErrorCode.invalid_request)
        return _respond(ctx, [_result(name, topic_id, disabled) for name, topic_id in wanted])
    if any(name is not None and topic_id is not None for name, topic_id in wanted):
        # Kafka throws "Topic name and topic ID can not both be specified." here, which
        # fails every entry of the request with INVALID_REQUEST and no message.
        return _respond(ctx, [_result(name, topic_id, ErrorCode.invalid_request)
                              for name, topic_id in wanted])
    # Names for ids; None for an id nobody has.
    resolved = [(name if topic_id is None else _name_of(metadata, topic_id), topic_id)
                for name, topic_id in wanted]
    names = {name for name, _ in resolved if name is not None}
    describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    deletable = ctx.authorized_names(AclOperation.DELETE, ResourceType.TOPIC, names)
    outcome: dict[str, ErrorCode] = {}  # a topic named twice is deleted once, answered twice
    results = []
    for name, topic_id in resolved:
        if topic_id is not None and name is None:
            results.append(_result(None, topic_id, ErrorCode.unknown_topic_id))
            continue
        if topic_id is not None and name not in describable:
            results.append(_result(None, topic_id, ErrorCode.topic_authorization_failed))
            continue
        if name not in deletable:
            results.append(_result(name, topic_id, ErrorCode.topic_authorization_failed))
            continue
        if name not in outcome:
            outcome[name] = await _delete(metadata, name, millis(request.timeout))
        results.append(_result(name, topic_id, outcome[name]))
    return _respond(ctx, results)


def _name_of(store: MetadataStore, topic_id) -> str | None:
    topic = store.topic_by_id(topic_id)
    return None if topic is None else topic.name


async def _delete(store: MetadataStore, name: str, timeout_ms: int) -> ErrorCode:
    if store.topic(name) is None:
        return ErrorCode.unknown_topic_or_partition
    try:
        await store.delete_topic(name)
    except UnknownTopicError:
        return ErrorCode.unknown_topic_or_partition
    return completion_error(timeout_ms)


def _result(name: str | None, topic_id, error: ErrorCode) -> dict:
    return {"name": name, "topic_id": topic_id, "error_code": error, "error_message": None}


def _respond(ctx: RequestContext, results: list[dict]) -> object:
    return ctx.respond(responses=results)
