"""One module per Kafka API, each registering its handler here by API key.

A handler is ``handle(ctx: RequestContext, request) -> response | awaitable | None``: it
receives the parsed kio request of the version the client sent and returns the response
built with :meth:`RequestContext.respond` (which picks the same version's response class).
Returning ``None`` sends nothing (acks=0 produce). Expected failures are Kafka error codes
in the response; an exception escaping a handler is a bug and closes the connection.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from odradek.protocol.api import ApiKey, SUPPORTED_APIS, response_class
from odradek.protocol.framing import Request
from odradek.protocol.messages import build

if TYPE_CHECKING:
    from odradek.server.broker import Broker
    from odradek.server.connection import Connection


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: Broker
    request: Request
    connection: Connection

    @property
    def api_version(self) -> int:
        return self.request.api_version

    def respond(self, **description: Any) -> Any:
        """Builds this request's response in the request's version (see protocol.messages)."""
        return build(response_class(self.request.api_key, self.request.api_version), **description)


Handler = Callable[[RequestContext, Any], Any | Awaitable[Any] | None]
HANDLERS: dict[ApiKey, Handler] = {}


def handles(api_key: ApiKey) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        if api_key in HANDLERS:
            raise RuntimeError(f"two handlers for {api_key.name}")
        HANDLERS[api_key] = handler
        return handler

    return register


def load_handlers() -> dict[ApiKey, Handler]:
    """Imports every handler module; fails loudly if an advertised API has no handler."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    missing = set(SUPPORTED_APIS) - set(HANDLERS)
    if missing:
        raise RuntimeError(f"advertised APIs without a handler: {sorted(k.name for k in missing)}")
    return HANDLERS
