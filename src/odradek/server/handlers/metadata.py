"""Metadata (key 3): brokers, topics, partitions, leaders; auto topic creation.

Brokers are described by their endpoints on the listener the client connected to, as Kafka
answers each listener with its own endpoints: clients of an internal listener are sent on to
internal addresses, clients of an external one to external addresses.

Authorization, as Kafka's ``KafkaApis.handleTopicMetadataRequest``: a topic the client may
not DESCRIBE is left out when every topic is asked for, and answered
TOPIC_AUTHORIZATION_FAILED when named, whether or not it exists. A named topic that does not
exist is auto-created only with CREATE on the cluster or on the topic, else it too is
TOPIC_AUTHORIZATION_FAILED. From v10 a topic may be asked for by id (KIP-516; consumers of
the KIP-848 protocol learn their assignment as topic ids): an unknown id is UNKNOWN_TOPIC_ID,
one the client may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED without its name. Authorized
operations (KIP-430) are filled in when asked for:
each described topic's from v8, the cluster's in v8-v10 (later clients ask DescribeCluster).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from odradek.metadata.model import (
    INTERNAL_TOPICS,
    BrokerInfo,
    Endpoint,
    InvalidTopicError,
    TopicMetadata,
    validate_topic_name,
)
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.auto_topic_creation import AutoTopicCreationManager
from odradek.server.config import BrokerConfig
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    authorize_cluster,
    cluster_authorized_operations,
    topic_authorized_operations,
)

# A topic's authorized operations by its name: the bit field, or "not requested".
TopicOperations = Callable[[str], int]


def describe_topic(topic: TopicMetadata,
                   authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED) -> dict:
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
        "topic_authorized_operations": authorized_operations,
    }


def listener_brokers(store: MetadataStore, listener_name: str) -> list[tuple[BrokerInfo, Endpoint]]:
    """The live brokers with their endpoint on ``listener_name`` (Kafka's
    ``MetadataCache.getAliveBrokerNodes(listenerName)``): a broker without it is left out."""
    return [(broker, endpoint) for broker in store.brokers()
            if (endpoint := broker.endpoint(listener_name)) is not None]


def _topic_error(name: str, error: ErrorCode, *, is_internal: bool = False,
                 authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED) -> dict:
    return {"error_code": error, "name": name, "topic_id": None, "partitions": (),
            "is_internal": is_internal, "topic_authorized_operations": authorized_operations}


@handles(ApiKey.METADATA)
async def handle_metadata(ctx: RequestContext, request, metadata: MetadataStore,
                          config: BrokerConfig,
                          auto_topic_creation: AutoTopicCreationManager) -> object:
    operations = functools.partial(
        topic_authorized_operations, ctx,
        getattr(request, "include_topic_authorized_operations", False))
    # v0: an empty list means every topic; v1+: null means every topic, empty means none.
    everything = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if everything:
        existing = metadata.topics()
        describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, existing)
        topics = [describe_topic(t, operations(t.name)) for t in existing.values()
                  if t.name in describable]
    else:
        topics = await _named_topics(ctx, request, metadata, config, auto_topic_creation,
                                     operations)
    return ctx.respond(
        brokers=[
            {"node_id": b.node_id, "host": e.host, "port": e.port, "rack": b.rack}
            for b, e in listener_brokers(metadata, ctx.listener_name)
        ],
        cluster_id=metadata.cluster_id,
        controller_id=metadata.controller_id,
        topics=topics,
        cluster_authorized_operations=cluster_authorized_operations(
            ctx, getattr(request, "include_cluster_authorized_operations", False)),
    )


async def _named_topics(ctx: RequestContext, request, metadata: MetadataStore,
                        config: BrokerConfig, auto_topic_creation: AutoTopicCreationManager,
                        operations: TopicOperations) -> list[dict]:
    by_id = {wanted.topic_id: metadata.topic_by_id(wanted.topic_id)
             for wanted in request.topics
             if wanted.name is None and getattr(wanted, "topic_id", None) is not None}
    names = {wanted.name for wanted in request.topics if wanted.name is not None}
    names |= {topic.name for topic in by_id.values() if topic is not None}
    describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    allow_create = (getattr(request, "allow_auto_topic_creation", True)
                    and config.get("auto.create.topics.enable"))
    creatable = (_creatable(ctx, [n for n in describable if metadata.topic(n) is None])
                 if allow_create else set())
    topics = []
    for wanted in request.topics:
        name = wanted.name
        if name is None:  # asked for by id (v10+), as KIP-848 consumers do
            topic = by_id.get(getattr(wanted, "topic_id", None))
            if topic is None:
                topics.append(_topic_error("", ErrorCode.unknown_topic_id))
            elif topic.name not in describable:
                topics.append(_topic_error("", ErrorCode.topic_authorization_failed))
            else:
                topics.append(describe_topic(topic, operations(topic.name)))
        elif name not in describable:
            topics.append(_topic_error(name, ErrorCode.topic_authorization_failed))
        elif (topic := metadata.topic(name)) is not None:
            topics.append(describe_topic(topic, operations(name)))
        elif allow_create and name not in creatable:
            topics.append(_topic_error(name, ErrorCode.topic_authorization_failed,
                                       is_internal=name in INTERNAL_TOPICS))
        else:
            topics.append(await _auto_create(auto_topic_creation, name, allow_create,
                                             operations(name)))
    return topics


def _creatable(ctx: RequestContext, missing: list[str]) -> set[str]:
    """Those of the missing topics the client may have created: all of them with CREATE on
    the cluster, else those it may CREATE."""
    if not missing:
        return set()
    if authorize_cluster(ctx, AclOperation.CREATE):
        return set(missing)
    return ctx.authorized_names(AclOperation.CREATE, ResourceType.TOPIC, missing)


async def _auto_create(auto_topic_creation: AutoTopicCreationManager, name: str,
                       allowed: bool, authorized_operations: int) -> dict:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return _topic_error(name, ErrorCode.invalid_topic_exception,
                            authorized_operations=authorized_operations)
    if not allowed:
        return _topic_error(name, ErrorCode.unknown_topic_or_partition,
                            authorized_operations=authorized_operations)
    topic = await auto_topic_creation.create_topic(name)
    if topic is None:  # created elsewhere and not visible here yet, or __consumer_offsets
        # before enough brokers are up to create it: the client asks again
        return _topic_error(name, ErrorCode.leader_not_available,
                            authorized_operations=authorized_operations)
    return describe_topic(topic, authorized_operations)
