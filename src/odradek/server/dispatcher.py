"""From a request frame to an encoded response: parse, route to the handler, encode.

The dispatcher binds every handler to the services it declares once, when it is built, and
gives each request its :class:`RequestContext`: the connection's part, the request's header
and size, the client quotas that ``respond`` reads ``throttle_time`` from, and the
authorizer handlers ask.
"""

from __future__ import annotations

import inspect
import logging
import time
from typing import Any

from odradek.protocol.api import ApiKey
from odradek.protocol.framing import (
    InvalidRequestError,
    Request,
    UnsupportedVersionError,
    encode_response_chunks,
    parse_request,
)
from odradek.security.authorizer import AclAuthorizer
from odradek.server.connection import Outcome, Response
from odradek.server.handlers import Handler, bind, load_handlers
from odradek.server.handlers.api_versions import unsupported_version_response
from odradek.server.quotas import ClientQuotas
from odradek.server.request_context import ConnectionContext, RequestContext
from odradek.server.services import Services

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(self, services: Services, quotas: ClientQuotas,
                 authorizer: AclAuthorizer | None = None) -> None:
        """``authorizer``: the ACL authorizer, None when none is configured."""
        self._quotas = quotas
        self._authorizer = authorizer
        # Each API key's handler with its services bound.
        handlers = load_handlers()
        self.handlers: dict[ApiKey, Handler] = {
            key: bind(handler, services) for key, handler in handlers.items()}
        # Handlers that do their work in a coroutine; the others return an awaitable only
        # once their work is done and they wait for a completion.
        self._coroutine_handlers = frozenset(
            key for key, handler in handlers.items() if inspect.iscoroutinefunction(handler))

    def __call__(self, frame: bytes, connection: ConnectionContext) -> Outcome:
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
        ctx = self.context(request, connection, len(frame))
        outcome = self.handlers[request.api_key](ctx, request.body)
        # Coroutines and futures alike have __await__; inspect.isawaitable would also test
        # the response against an abstract base class, a noticeable share of a small request.
        if hasattr(outcome, "__await__"):
            if request.api_key not in self._coroutine_handlers:
                # A handler that did its work and now waits for a completion: request quotas
                # count the work, not the wait (Kafka's apiLocalComplete).
                ctx.local_complete(time.monotonic())
            return self._finish(request.correlation_id, outcome)
        if outcome is None:
            # Nothing to carry a throttle time (acks=0 produce): the quotas still count the
            # request, and the connection alone holds the client back (KIP-219).
            throttle_time_ms, _ = self._quotas.throttle(ctx, None)
            if throttle_time_ms:
                ctx.throttle(throttle_time_ms)
            return None
        return encode_response_chunks(request.correlation_id, outcome)

    def context(self, request: Request, connection: ConnectionContext,
                size_in_bytes: int) -> RequestContext:
        return RequestContext(request, connection, self._quotas, size_in_bytes, self._authorizer,
                              time.monotonic())

    def handle(self, request: Request, connection: ConnectionContext, size_in_bytes: int) -> Any:
        """The handler's answer to a parsed request: its response, an awaitable of it, or
        None when nothing is sent."""
        return self.handlers[request.api_key](self.context(request, connection, size_in_bytes),
                                              request.body)

    async def _finish(self, correlation_id: int, pending: Any) -> Response | None:
        response = await pending
        return None if response is None else encode_response_chunks(correlation_id, response)
