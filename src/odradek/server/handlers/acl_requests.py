"""What the ACL APIs share: ACL requests refused where no authorizer is configured, and the
translation between kio's fields and the ACL model (``security.acl``)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from odradek.security.acl import (
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)
from odradek.server.handlers.authorization import authorize_cluster
from odradek.server.request_context import RequestContext

SECURITY_DISABLED_MESSAGE = "No Authorizer is configured on the broker"


def refusal(ctx: RequestContext, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """Why the request may not go on: no authorizer (SECURITY_DISABLED), or no ``operation``
    on the cluster (CLUSTER_AUTHORIZATION_FAILED); None when it may."""
    if ctx.authorizer is None:
        return ErrorCode.security_disabled, SECURITY_DISABLED_MESSAGE
    if not authorize_cluster(ctx, operation):
        return ErrorCode.cluster_authorization_failed, None
    return None


def binding_filter(request: Any) -> AclBindingFilter:
    """The filter of a DescribeAcls request or of one DeleteAcls filter."""
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType(request.resource_type_filter),
                              request.resource_name_filter,
                              PatternType(request.pattern_type_filter)),
        AccessControlEntryFilter(request.principal_filter, request.host_filter,
                                 AclOperation(request.operation),
                                 AclPermissionType(request.permission_type)))


def binding_fields(binding: AclBinding) -> dict[str, Any]:
    """A binding in the fields of DeleteAcls' matching ACLs."""
    pattern, entry = binding.pattern, binding.entry
    return {"resource_type": pattern.resource_type, "resource_name": pattern.name,
            "pattern_type": pattern.pattern_type, "principal": entry.principal,
            "host": entry.host, "operation": entry.operation,
            "permission_type": entry.permission_type}
