"""What the handlers ask the authorizer in common (Kafka's ``AuthHelper``).

The rules every handler follows, as Kafka's ``KafkaApis`` does:

* A topic is authorized before anything else is looked at: a request naming a topic it may
  not use gets TOPIC_AUTHORIZATION_FAILED whether or not the topic exists, and a request for
  every topic leaves out those it may not DESCRIBE. Nothing about a topic leaks through a
  refusal, and nothing refused is written.
* An operation on the cluster is authorized on the CLUSTER resource, named "kafka-cluster";
  refused, the whole request fails with CLUSTER_AUTHORIZATION_FAILED
  (``AuthHelper.authorizeClusterOperation``).
* Authorized operations (KIP-430) are answered as a bit field: bit ``code`` set for each
  operation the principal may do, among those the resource type supports
  (``AclEntry.supportedOperations``); ``AUTHORIZED_OPERATIONS_OMITTED`` when the client did
  not ask. The cluster's are 0 without DESCRIBE on it.

With no authorizer configured every question is answered yes (see ``RequestContext``).
Not a handler module: it registers nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from odradek.protocol.topic_partition import TopicPartition
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.server.request_context import RequestContext

# The schema's default of every ``*_authorized_operations`` field: "not requested" (KIP-430).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

# AclEntry.supportedOperations: the operations an ACL on a resource of the type can name.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}

# The messages of Kafka's ``Errors``, which it answers where it fails an entry with the
# error alone (``new ApiError(Errors.TOPIC_AUTHORIZATION_FAILED)``, ``Errors.X.exception``).
AUTHORIZATION_FAILED_MESSAGES = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
}


def authorize_cluster(ctx: RequestContext, operation: AclOperation) -> bool:
    """Whether the principal may do ``operation`` on the cluster."""
    return ctx.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)


def refused_partitions(ctx: RequestContext, operation: AclOperation,
                       partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
    """The partitions whose topic the principal may not do ``operation`` on; none, without
    looking at them, when no authorizer is configured (Produce and Fetch ask on every
    request)."""
    if ctx.authorizer is None:
        return set()
    partitions = list(partitions)
    allowed = ctx.authorized_names(operation, ResourceType.TOPIC, {tp.topic for tp in partitions})
    return {tp for tp in partitions if tp.topic not in allowed}


def cluster_refusal_message(ctx: RequestContext) -> str:
    """The message of a request refused for want of a cluster operation
    (``authorizeClusterOperation``'s ClusterAuthorizationException)."""
    return f"Request {ctx.api_key.name} is not authorized."


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """KIP-430's bit field of what the principal may do on the resource."""
    return sum(1 << operation for operation in SUPPORTED_OPERATIONS[resource_type]
               if ctx.authorize(operation, resource_type, name))


def topic_authorized_operations(ctx: RequestContext, requested: bool, name: str) -> int:
    return (authorized_operations(ctx, ResourceType.TOPIC, name) if requested
            else AUTHORIZED_OPERATIONS_OMITTED)


def cluster_authorized_operations(ctx: RequestContext, requested: bool) -> int:
    """Metadata v8-v10 and DescribeCluster: the cluster's authorized operations, 0 when
    the principal may not DESCRIBE it."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
