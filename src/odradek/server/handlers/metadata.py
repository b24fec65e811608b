"""Metadata (key 3): brokers, topics, partitions, leaders; auto topic creation."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.offsets_topic import OFFSETS_TOPIC
from odradek.metadata.model import InvalidTopicError, TopicMetadata, validate_topic_name
from odradek.protocol.api import ApiKey
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.find_coordinator import ensure_offsets_topic

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


def _topic_error(name: str, error: ErrorCode) -> dict:
    return {"error_code": error, "name": name, "topic_id": None, "partitions": (),
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


@handles(ApiKey.METADATA)
async def handle_metadata(ctx: RequestContext, request) -> object:
    broker = ctx.broker
    store = broker.metadata
    # v0: an empty list means every topic; v1+: null means every topic, empty means none.
    everything = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if everything:
        topics = [describe_topic(t) for t in store.topics().values()]
    else:
        allow_create = getattr(request, "allow_auto_topic_creation", True)
        topics = []
        for wanted in request.topics:
            name = wanted.name
            topic = store.topic(name) if name is not None else None
            if topic is None and name is not None:
                topics.append(await _auto_create(ctx, name, allow_create))
            elif topic is None:
                topics.append(_topic_error("", ErrorCode.unknown_topic_id))
            else:
                topics.append(describe_topic(topic))
    return ctx.respond(
        throttle_time=0,
        brokers=[
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in store.brokers()
        ],
        cluster_id=store.cluster_id,
        controller_id=store.controller_id,
        topics=topics,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


async def _auto_create(ctx: RequestContext, name: str, allowed: bool) -> dict:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return _topic_error(name, ErrorCode.invalid_topic_exception)
    broker = ctx.broker
    if not (allowed and broker.config.get("auto.create.topics.enable")):
        return _topic_error(name, ErrorCode.unknown_topic_or_partition)
    if name == OFFSETS_TOPIC:
        # Created with its own partition count and configs, as the coordinator needs it.
        return describe_topic(await ensure_offsets_topic(broker))
    topic = await broker.create_topic(
        name,
        broker.config.get("num.partitions"),
        broker.config.get("default.replication.factor"),
        {},
    )
    return describe_topic(topic)
