"""DescribeUserScramCredentials (key 50, KIP-554): which SCRAM mechanisms each user has a
credential for, and with how many iterations; never the credential itself. No users named:
every user with a credential. Needs DESCRIBE on the cluster: CLUSTER_AUTHORIZATION_FAILED
otherwise, on the request and on one result per user asked about, which names no user, as
Kafka's ``DescribeUserScramCredentialsRequest.getErrorResponse`` answers."""

from __future__ import annotations

from collections import Counter

from kio.schema.errors import ErrorCode

from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import (
    AUTHORIZATION_FAILED_MESSAGES,
    authorize_cluster,
)
from odradek.server.user_credentials import scram_users


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
def handle_describe_user_scram_credentials(ctx: RequestContext, request,
                                           metadata: MetadataStore) -> object:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        error = ErrorCode.cluster_authorization_failed
        message = AUTHORIZATION_FAILED_MESSAGES[error]
        return ctx.respond(error_code=error, error_message=message, results=[
            {"user": "", "error_code": error, "error_message": message, "credential_infos": []}
            for _ in request.users or ()])
    users = scram_users(metadata)
    asked = [user.name for user in request.users or ()] or sorted(users)
    counts = Counter(asked)
    results = []
    for name in dict.fromkeys(asked):
        if counts[name] > 1:
            error, message = (ErrorCode.duplicate_resource, "Cannot describe SCRAM credentials "
                              "for the same user twice in a single request")
        elif name not in users:
            error, message = (ErrorCode.resource_not_found,
                              "Attempt to describe a user credential that does not exist")
        else:
            error, message = ErrorCode.none, None
        results.append({"user": name, "error_code": error, "error_message": message,
                        "credential_infos": [
                            {"mechanism": mechanism, "iterations": iterations}
                            for mechanism, iterations in sorted(users.get(name, {}).items())
                        ] if error is ErrorCode.none else []})
    return ctx.respond(error_code=ErrorCode.none, error_message=None, results=results)
