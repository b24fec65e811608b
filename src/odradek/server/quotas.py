"""``ClientQuotas``: the delay a response asks its client to hold back (``throttle_time``).

Kafka throttles a client over its quotas, set per user principal and/or client id (KIP-55):
bandwidth quotas on the bytes it produces and fetches (KIP-13) and request quotas on the
share of broker time its requests take (KIP-124). The response carries the delay in
``throttle_time`` and the client waits that long before its next request (KIP-219). Every
response that has the field takes it from :meth:`ClientQuotas.throttle_time_ms`, through
``RequestContext.respond``, so quotas have one place to live.

No quota can be configured yet: nobody is throttled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.server.request_context import RequestContext


class ClientQuotas:
    def throttle_time_ms(self, ctx: RequestContext, response: Any) -> int:
        """The throttle time of ``response`` (built unthrottled, in the request's version) to
        the request of ``ctx``: its principal and client id pick the quotas, its size and
        the response's are what bandwidth quotas count."""
        return 0
