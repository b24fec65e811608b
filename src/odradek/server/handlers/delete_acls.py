"""DeleteAcls (key 31): removes every ACL binding each filter matches and answers, per
filter, with the bindings it removed. Needs ALTER on the cluster."""

from __future__ import annotations

from collections import defaultdict

from kio.schema.errors import ErrorCode

from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.security.acl import AccessControlEntry, AclOperation, ResourcePattern, validate_filter
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.acl_requests import binding_fields, binding_filter, refusal


@handles(ApiKey.DELETE_ACLS)
async def handle_delete_acls(ctx: RequestContext, request, metadata: MetadataStore) -> object:
    refused = refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        code, message = refused
        return ctx.respond(filter_results=[
            {"error_code": code, "error_message": message, "matching_acls": []}
            for _ in request.filters])
    results: list[dict] = []
    removals: dict[ResourcePattern, set[AccessControlEntry]] = defaultdict(set)
    for wanted_fields in request.filters:
        wanted = binding_filter(wanted_fields)
        error = validate_filter(wanted)
        if error is not None:
            results.append({"error_code": error.error_code, "error_message": error.message,
                            "matching_acls": []})
            continue
        matching = ctx.authorizer.acls(wanted)
        for binding in matching:
            removals[binding.pattern].add(binding.entry)
        results.append({"error_code": ErrorCode.none, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.none, "error_message": None, **binding_fields(binding)}
            for binding in matching]})
    for pattern, entries in removals.items():
        await metadata.alter_acls(pattern, remove=frozenset(entries))
    return ctx.respond(filter_results=results)
