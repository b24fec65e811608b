"""DescribeCluster (key 60, KIP-700): cluster id, controller and the live brokers.

v1 (KIP-919) names the kind of endpoint the client wants; a broker answers for BROKER
endpoints only, with Kafka's errors and messages (AuthHelper.computeDescribeClusterResponse).
Brokers are described by their endpoints on the client's listener, as in Metadata. A
controller id that is not among the brokers listed is sent as -1, as Kafka does, so that a
client never looks for a node it cannot reach.

Anyone may describe the cluster, as in Kafka; only its authorized operations (KIP-430) are
authorized: when asked for, they are 0 without DESCRIBE on the cluster.
"""

from __future__ import annotations

import enum

from kio.schema.errors import ErrorCode

from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    cluster_authorized_operations,
)
from odradek.server.handlers.metadata import listener_brokers

NO_CONTROLLER = -1


class EndpointType(enum.IntEnum):
    UNKNOWN = 0
    BROKER = 1
    CONTROLLER = 2


@handles(ApiKey.DESCRIBE_CLUSTER)
def handle_describe_cluster(ctx: RequestContext, request, metadata: MetadataStore) -> object:
    wanted = getattr(request, "endpoint_type", EndpointType.BROKER)
    # v0 predates these error codes: INVALID_REQUEST stands for both.
    v0 = ctx.api_version == 0
    if wanted not in (EndpointType.BROKER, EndpointType.CONTROLLER):
        error = ErrorCode.invalid_request if v0 else ErrorCode.unsupported_endpoint_type
        return _error(ctx, error, f"Unsupported endpoint type {wanted}")
    if wanted != EndpointType.BROKER:
        error = ErrorCode.invalid_request if v0 else ErrorCode.mismatched_endpoint_type
        return _error(ctx, error, "The request was sent to an endpoint of type BROKER, but we "
                                  f"wanted an endpoint of type {EndpointType(wanted).name}")
    brokers = listener_brokers(metadata, ctx.listener_name)
    controller = metadata.controller_id
    if controller not in {b.node_id for b, _ in brokers}:
        controller = NO_CONTROLLER
    return ctx.respond(
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=EndpointType.BROKER,
        cluster_id=metadata.cluster_id,
        controller_id=controller,
        brokers=[{"broker_id": b.node_id, "host": e.host, "port": e.port, "rack": b.rack}
                 for b, e in brokers],
        cluster_authorized_operations=cluster_authorized_operations(
            ctx, request.include_cluster_authorized_operations),
    )


def _error(ctx: RequestContext, error: ErrorCode, message: str) -> object:
    return ctx.respond(error_code=error, error_message=message,
                       endpoint_type=EndpointType.BROKER, cluster_id="",
                       controller_id=NO_CONTROLLER, brokers=[],
                       cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
