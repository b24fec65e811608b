"""AlterClientQuotas (key 49, KIP-546): sets and removes the quotas of user and client-id
entities, each entity answered on its own; ``validate_only`` checks without writing. Needs
ALTER_CONFIGS on the cluster. The quotas are written to the metadata store, from where every
broker applies them."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation
from odradek.server.client_quota_configs import store_quotas
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import authorize_cluster
from odradek.server.quota_admin import alter_client_quotas


@handles(ApiKey.ALTER_CLIENT_QUOTAS)
async def handle_alter_client_quotas(ctx: RequestContext, request,
                                     metadata: MetadataStore) -> object:
    def entity_fields(named) -> list[dict]:
        return [{"entity_type": entity_type, "entity_name": name}
                for entity_type, name in named.items()]

    if not authorize_cluster(ctx, AclOperation.ALTER_CONFIGS):
        return ctx.respond(entries=[
            {"error_code": ErrorCode.cluster_authorization_failed, "error_message": None,
             "entity": [{"entity_type": part.entity_type, "entity_name": part.entity_name}
                        for part in entry.entity]}
            for entry in request.entries])
    alterations = alter_client_quotas(ctx.quotas.entities, request.entries)
    if not request.validate_only:
        for entity, values in alterations.changed.items():
            await store_quotas(metadata, entity, values)
    return ctx.respond(entries=[
        {"error_code": result.error_code, "error_message": result.error_message,
         "entity": entity_fields(result.entity)}
        for result in alterations.results])
