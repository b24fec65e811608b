"""SaslAuthenticate (key 36) outside a SASL exchange: ILLEGAL_SASL_STATE, as Kafka answers
one that reaches the request path (see ``sasl_handshake``)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.server.handlers import RequestContext, handles


@handles(ApiKey.SASL_AUTHENTICATE)
def handle_sasl_authenticate(ctx: RequestContext, request) -> object:
    return ctx.respond(error_code=ErrorCode.illegal_sasl_state,
                       error_message="Unexpected SaslAuthenticate request: this connection is "
                                     "not in a SASL exchange",
                       auth_bytes=b"")
