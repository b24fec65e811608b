"""SaslHandshake (key 17) outside a SASL exchange.

On a SASL listener the connection's authenticator (``server.authenticator``) answers the
handshake, the first one and those that start a re-authentication (KIP-368). One that reaches
the request path came through a listener that authenticates nobody with SASL (PLAINTEXT or
SSL): Kafka answers ILLEGAL_SASL_STATE there, and so does odradek."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey
from odradek.server.handlers import RequestContext, handles


@handles(ApiKey.SASL_HANDSHAKE)
def handle_sasl_handshake(ctx: RequestContext, request) -> object:
    return ctx.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
