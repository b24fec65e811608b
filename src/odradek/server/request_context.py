"""``RequestContext``: one request and who sent it, through which listener (Kafka's
``RequestContext``).

What a connection fixes — the listener it was accepted on, that listener's security protocol,
the principal it authenticated as and the client's address — is a :class:`ConnectionContext`,
built once when the connection is made; each request adds its header, its body and its size
on the wire. Handlers answer through :meth:`RequestContext.respond`, which is where every
response gets its ``throttle_time`` from the client quotas: no handler decides it.
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from odradek.protocol.api import ApiKey, response_class
from odradek.protocol.framing import Request
from odradek.protocol.messages import build, has_field
from odradek.server.config import SecurityProtocol

if TYPE_CHECKING:
    from odradek.server.quotas import ClientQuotas


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """Who a client is, as authorization and quotas see it ("User:alice")."""

    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


# Kafka's KafkaPrincipal.ANONYMOUS: the principal of every client of a PLAINTEXT listener,
# which authenticates nobody.
ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


@dataclass(frozen=True, slots=True)
class ConnectionContext:
    """The parts of a request's context its connection fixes."""

    listener_name: str
    security_protocol: SecurityProtocol
    principal: KafkaPrincipal
    # (host, port); None when the socket was reset before it was handed to the broker.
    client_address: tuple[str, int] | None


@dataclass(frozen=True, slots=True)
class RequestContext:
    request: Request  # header fields and the kio body of the version the client sent
    connection: ConnectionContext
    quotas: ClientQuotas
    size_in_bytes: int  # the request on the wire, which produce quotas count (KIP-13)

    @property
    def api_key(self) -> ApiKey:
        return self.request.api_key

    @property
    def api_version(self) -> int:
        return self.request.api_version

    @property
    def client_id(self) -> str | None:
        return self.request.client_id

    @property
    def listener_name(self) -> str:
        return self.connection.listener_name

    @property
    def security_protocol(self) -> SecurityProtocol:
        return self.connection.security_protocol

    @property
    def principal(self) -> KafkaPrincipal:
        return self.connection.principal

    @property
    def client_address(self) -> tuple[str, int] | None:
        return self.connection.client_address

    def respond(self, **description: Any) -> Any:
        """Builds this request's response in the request's version (see protocol.messages),
        with the ``throttle_time`` the client quotas give it where the version has one."""
        cls = response_class(self.api_key, self.api_version)
        if not has_field(cls, "throttle_time"):
            return build(cls, **description)
        response = build(cls, **(description | {"throttle_time": 0}))
        throttle_time_ms = self.quotas.throttle_time_ms(self, response)
        if throttle_time_ms == 0:
            return response
        return dataclasses.replace(
            response, throttle_time=datetime.timedelta(milliseconds=throttle_time_ms))
