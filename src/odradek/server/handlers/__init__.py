"""One module per Kafka API, each registering its handler here by API key.

A handler is ``handle(ctx: RequestContext, request, <services>) -> response | awaitable |
None``: it receives the request's context and the parsed kio request of the version the
client sent, and returns the response built with :meth:`RequestContext.respond` (which picks
the same version's response class and fills ``throttle_time``). The parameters after
``request`` are the services it uses, each named after a field of
:class:`~odradek.server.services.Services` and bound once by :func:`bind`; a handler never
sees the Broker. Returning ``None`` sends nothing (acks=0 produce). Expected failures are
Kafka error codes in the response; an exception escaping a handler is a bug and closes the
connection.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from collections.abc import Awaitable, Callable
from typing import Any

from odradek.protocol.api import SUPPORTED_APIS, ApiKey
from odradek.server.request_context import RequestContext
from odradek.server.services import SERVICE_NAMES, Services

__all__ = ["HANDLERS", "Handler", "RequestContext", "bind", "handles", "load_handlers"]

# A handler once its services are bound: what the dispatcher calls.
Handler = Callable[[RequestContext, Any], Any | Awaitable[Any] | None]
HANDLERS: dict[ApiKey, Callable[..., Any]] = {}


def handles(api_key: ApiKey) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(handler: Callable[..., Any]) -> Callable[..., Any]:
        if api_key in HANDLERS:
            raise RuntimeError(f"two handlers for {api_key.name}")
        HANDLERS[api_key] = handler
        return handler

    return register


def load_handlers() -> dict[ApiKey, Callable[..., Any]]:
    """Imports every handler module; fails loudly if an advertised API has no handler."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    missing = set(SUPPORTED_APIS) - set(HANDLERS)
    if missing:
        raise RuntimeError(f"advertised APIs without a handler: {sorted(k.name for k in missing)}")
    return HANDLERS


def bind(handler: Callable[..., Any], services: Services) -> Handler:
    """``handler`` with the services it declares (its parameters after ``ctx, request``)."""
    declared = list(inspect.signature(handler).parameters)[2:]
    unknown = [name for name in declared if name not in SERVICE_NAMES]
    if unknown:
        raise TypeError(f"{handler.__qualname__} declares unknown services {unknown}; "
                        f"services are {sorted(SERVICE_NAMES)}")
    if not declared:
        return handler
    return functools.partial(handler, **{name: getattr(services, name) for name in declared})
