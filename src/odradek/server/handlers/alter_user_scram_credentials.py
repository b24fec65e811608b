"""AlterUserScramCredentials (key 51, KIP-554): adds, replaces and removes users' SCRAM
credentials. The client sends the salt and the salted password, never the password; the
broker keeps the salt and the keys derived from the salted password (``security.scram``).

A user named twice in one request (in deletions and upsertions alike) fails whole with
DUPLICATE_RESOURCE; each user's changes are checked as Kafka's ScramControlManager checks
them, and a user's valid changes are written together. Needs ALTER on the cluster:
CLUSTER_AUTHORIZATION_FAILED otherwise for every user named, and nothing is changed."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation
from odradek.security.scram import (
    CredentialError,
    ScramCredential,
    ScramMechanism,
    deletion_error,
    upsertion_error,
)
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import (
    AUTHORIZATION_FAILED_MESSAGES,
    authorize_cluster,
)
from odradek.server.user_credentials import alter_scram_credentials, scram_users

_DUPLICATE = CredentialError(ErrorCode.duplicate_resource,
                             "A user credential cannot be altered twice in the same request")


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
async def handle_alter_user_scram_credentials(ctx: RequestContext, request,
                                              metadata: MetadataStore) -> object:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        error = ErrorCode.cluster_authorization_failed
        named = {change.name for change in (*request.deletions, *request.upsertions)}
        return ctx.respond(results=[
            {"user": user, "error_code": error,
             "error_message": AUTHORIZATION_FAILED_MESSAGES[error]} for user in sorted(named)])
    existing = scram_users(metadata)
    errors: dict[str, CredentialError] = {}
    changes: dict[str, dict[ScramMechanism, ScramCredential | None]] = {}

    def add(user: str, mechanism: ScramMechanism, credential: ScramCredential | None,
            error: CredentialError | None) -> None:
        if user in errors:
            return
        if user in changes:
            del changes[user]
            errors[user] = _DUPLICATE
        elif error is not None:
            errors[user] = error
        else:
            changes[user] = {mechanism: credential}

    for deletion in request.deletions:
        mechanism = ScramMechanism.from_code(deletion.mechanism)
        exists = mechanism in existing.get(deletion.name, {})
        add(deletion.name, mechanism, None, deletion_error(deletion.name, mechanism, exists))
    for upsertion in request.upsertions:
        mechanism = ScramMechanism.from_code(upsertion.mechanism)
        error = upsertion_error(upsertion.name, mechanism, upsertion.iterations)
        credential = None if error else ScramCredential.from_salted_password(
            mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations)
        add(upsertion.name, mechanism, credential, error)
    for user, user_changes in changes.items():
        await alter_scram_credentials(metadata, user, user_changes)
    results = [{"user": user, "error_code": ErrorCode.none, "error_message": None}
               for user in changes]
    results += [{"user": user, "error_code": error.code, "error_message": error.message}
                for user, error in errors.items()]
    return ctx.respond(results=results)
