"""DescribeClientQuotas (key 48, KIP-546): the quotas of the user and client-id entities a
filter matches. Needs DESCRIBE_CONFIGS on the cluster."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import authorize_cluster
from odradek.server.handlers.api_error import ApiError
from odradek.server.quota_admin import describe_client_quotas
from odradek.server.quotas import ClientQuotas


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS)
def handle_describe_client_quotas(ctx: RequestContext, request) -> object:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return ctx.respond(error_code=ErrorCode.cluster_authorization_failed,
                           error_message=None, entries=None)
    quotas: ClientQuotas = ctx.quotas
    try:
        found = describe_client_quotas(quotas.entities, request.components, request.strict)
    except ApiError as error:
        return ctx.respond(error_code=error.error_code, error_message=error.message,
                           entries=None)
    return ctx.respond(error_code=ErrorCode.none, error_message=None, entries=[
        {"entity": [{"entity_type": entity_type, "entity_name": name}
                    for entity_type, name in entity.entries().items()],
         "values": [{"key": key, "value": value} for key, value in sorted(values.items())]}
        for entity, values in found.items()])
