"""CreateAcls (key 30, KIP-11, KIP-290 for PREFIXED): adds ACL bindings, each answered on its
own. Needs ALTER on the cluster; the ACLs are written to the metadata store and reach every
broker's authorizer from there."""

from __future__ import annotations

from collections import defaultdict

from kio.schema.errors import ErrorCode

from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_new_acl,
)
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.acl_requests import refusal


@handles(ApiKey.CREATE_ACLS)
async def handle_create_acls(ctx: RequestContext, request, metadata: MetadataStore) -> object:
    refused = refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        code, message = refused
        return ctx.respond(results=[{"error_code": code, "error_message": message}
                                    for _ in request.creations])
    results: list[dict] = []
    additions: dict[ResourcePattern, set[AccessControlEntry]] = defaultdict(set)
    for creation in request.creations:
        binding = AclBinding(
            ResourcePattern(ResourceType(creation.resource_type), creation.resource_name,
                            PatternType(creation.resource_pattern_type)),
            AccessControlEntry(creation.principal, creation.host,
                               AclOperation(creation.operation),
                               AclPermissionType(creation.permission_type)))
        error = validate_new_acl(binding)
        if error is not None:
            results.append({"error_code": error.error_code, "error_message": error.message})
            continue
        additions[binding.pattern].add(binding.entry)
        results.append({"error_code": ErrorCode.none, "error_message": None})
    for pattern, entries in additions.items():
        await metadata.alter_acls(pattern, add=frozenset(entries))
    return ctx.respond(results=results)
