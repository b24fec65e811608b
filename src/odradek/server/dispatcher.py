"""From a request frame to an encoded response: parse, route to the handler, encode."""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any

from odradek.protocol.api import ApiKey
from odradek.protocol.framing import (
    InvalidRequestError,
    UnsupportedVersionError,
    encode_response_chunks,
    parse_request,
)
from odradek.server.connection import Connection, Outcome, Response
from odradek.server.handlers import RequestContext, load_handlers
from odradek.server.handlers.api_versions import unsupported_version_response

if TYPE_CHECKING:
    from odradek.server.broker import Broker

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._handlers = load_handlers()

    def __call__(self, frame: bytes, connection: Connection) -> Outcome:
        try:
            request = parse_request(frame)
        except UnsupportedVersionError as exc:
            if exc.api_key == ApiKey.API_VERSIONS:
                # KIP-511: answer an ApiVersions request newer than we know in v0, with the
                # versions we do serve, so the client can retry with one of them.
                return encode_response_chunks(exc.correlation_id, unsupported_version_response())
            # Kafka closes the connection here too: the body cannot be parsed, so no
            # well-formed error response can be built for it.
            raise InvalidRequestError(str(exc)) from None
        ctx = RequestContext(self._broker, request, connection)
        outcome = self._handlers[request.api_key](ctx, request.body)
        if inspect.isawaitable(outcome):
            return self._finish(request.correlation_id, outcome)
        if outcome is None:
            return None
        return encode_response_chunks(request.correlation_id, outcome)

    async def _finish(self, correlation_id: int, pending: Any) -> Response | None:
        response = await pending
        return None if response is None else encode_response_chunks(correlation_id, response)
