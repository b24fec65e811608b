"""Metadata (key 3): brokers, topics, partitions, leaders; auto topic creation.

Brokers are described by their endpoints on the listener the client connected to, as Kafka
answers each listener with its own endpoints: clients of an internal listener are sent on to
internal addresses, clients of an external one to external addresses.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.metadata.model import (
    BrokerInfo,
    Endpoint,
    InvalidTopicError,
    TopicMetadata,
    validate_topic_name,
)
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.server.auto_topic_creation import AutoTopicCreationManager
from odradek.server.config import BrokerConfig
from odradek.server.handlers import RequestContext, handles

# Metadata v8-v10 carried authorized operations; -2^31 means "not requested" (KIP-430).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def describe_topic(topic: TopicMetadata) -> dict:
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": [
            {
                "error_code": ErrorCode.none,
                "partition_index": p.partition,
                "leader_id": p.leader,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": p.replicas,
                "isr_nodes": p.isr,
                "offline_replicas": (),
            }
            for p in topic.partitions
        ],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def listener_brokers(store: MetadataStore, listener_name: str) -> list[tuple[BrokerInfo, Endpoint]]:
    """The live brokers with their endpoint on ``listener_name`` (Kafka's
    ``MetadataCache.getAliveBrokerNodes(listenerName)``): a broker without it is left out."""
    return [(broker, endpoint) for broker in store.brokers()
            if (endpoint := broker.endpoint(listener_name)) is not None]


def _topic_error(name: str, error: ErrorCode) -> dict:
    return {"error_code": error, "name": name, "topic_id": None, "partitions": (),
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


@handles(ApiKey.METADATA)
async def handle_metadata(ctx: RequestContext, request, metadata: MetadataStore,
                          config: BrokerConfig,
                          auto_topic_creation: AutoTopicCreationManager) -> object:
    # v0: an empty list means every topic; v1+: null means every topic, empty means none.
    everything = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if everything:
        topics = [describe_topic(t) for t in metadata.topics().values()]
    else:
        allow_create = (getattr(request, "allow_auto_topic_creation", True)
                        and config.get("auto.create.topics.enable"))
        topics = []
        for wanted in request.topics:
            name = wanted.name
            topic = metadata.topic(name) if name is not None else None
            if topic is None and name is not None:
                topics.append(await _auto_create(auto_topic_creation, name, allow_create))
            elif topic is None:
                topics.append(_topic_error("", ErrorCode.unknown_topic_id))
            else:
                topics.append(describe_topic(topic))
    return ctx.respond(
        brokers=[
            {"node_id": b.node_id, "host": e.host, "port": e.port, "rack": b.rack}
            for b, e in listener_brokers(metadata, ctx.listener_name)
        ],
        cluster_id=metadata.cluster_id,
        controller_id=metadata.controller_id,
        topics=topics,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


async def _auto_create(auto_topic_creation: AutoTopicCreationManager, name: str,
                       allowed: bool) -> dict:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return _topic_error(name, ErrorCode.invalid_topic_exception)
    if not allowed:
        return _topic_error(name, ErrorCode.unknown_topic_or_partition)
    topic = await auto_topic_creation.create_topic(name)
    if topic is None:  # created elsewhere and not visible here yet, or __consumer_offsets
        # before enough brokers are up to create it: the client asks again
        return _topic_error(name, ErrorCode.leader_not_available)
    return describe_topic(topic)
