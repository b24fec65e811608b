"""DescribeAcls (key 29): the ACL bindings a filter matches, grouped by resource pattern.
Needs DESCRIBE on the cluster."""

from __future__ import annotations

from itertools import groupby

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, validate_filter
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.acl_requests import binding_filter, refusal


@handles(ApiKey.DESCRIBE_ACLS)
def handle_describe_acls(ctx: RequestContext, request) -> object:
    refused = refusal(ctx, AclOperation.DESCRIBE)
    if refused is not None:
        code, message = refused
        return ctx.respond(error_code=code, error_message=message, resources=[])
    wanted = binding_filter(request)
    error = validate_filter(wanted)
    if error is not None:
        return ctx.respond(error_code=error.error_code, error_message=error.message,
                           resources=[])
    bindings = ctx.authorizer.acls(wanted)
    resources = [
        {"resource_type": pattern.resource_type, "resource_name": pattern.name,
         "pattern_type": pattern.pattern_type,
         "acls": [{"principal": b.entry.principal, "host": b.entry.host,
                   "operation": b.entry.operation, "permission_type": b.entry.permission_type}
                  for b in group]}
        for pattern, group in groupby(bindings, key=lambda b: b.pattern)]
    return ctx.respond(error_code=ErrorCode.none, error_message=None, resources=resources)
