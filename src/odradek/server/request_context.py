"""``RequestContext``: one request and who sent it, through which listener (Kafka's
``RequestContext``).

What a connection fixes — the listener it was accepted on, that listener's security protocol,
the principal it authenticated as and the client's address — is a :class:`ConnectionContext`,
built once when the connection is made; each request adds its header, its body and its size
on the wire. Handlers answer through :meth:`RequestContext.respond`, which is where every
response gets its ``throttle_time`` from the client quotas: no handler decides it.

Handlers ask :meth:`RequestContext.authorize` whether the principal may do an operation on a
resource, as Kafka's ``AuthHelper`` does; with no authorizer configured
(``authorizer.class.name`` empty) every request is authorized.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from odradek.protocol.api import ApiKey, response_class
from odradek.protocol.framing import Request
from odradek.protocol.messages import build, has_field
from odradek.security.acl import AclOperation, ResourceType
from odradek.security.principal import KafkaPrincipal
from odradek.server.config import SecurityProtocol

# The throttle_time of a response built unthrottled, made once rather than per response.
NO_THROTTLE = datetime.timedelta(0)

if TYPE_CHECKING:
    from odradek.security.authorizer import AclAuthorizer
    from odradek.server.quotas import ClientQuotas


@dataclass(frozen=True, slots=True)
class ConnectionContext:
    """The parts of a request's context its connection fixes."""

    listener_name: str
    security_protocol: SecurityProtocol
    principal: KafkaPrincipal
    # (host, port); None when the socket was reset before it was handed to the broker.
    client_address: tuple[str, int] | None
    # Stops reading the connection for a throttle time in ms (KIP-219); None in tests.
    mute: Callable[[int], None] | None = field(default=None, compare=False, repr=False)


# Not frozen, like the other values built for every request: a frozen dataclass's
# __init__ costs four times as much (one object.__setattr__ per field). Nothing
# changes one once built but local_complete.
@dataclass(slots=True)
class RequestContext:
    request: Request  # header fields and the kio body of the version the client sent
    connection: ConnectionContext
    quotas: ClientQuotas
    size_in_bytes: int  # the request on the wire, which produce quotas count (KIP-13)
    authorizer: AclAuthorizer | None = None  # None: no authorizer configured
    received_at: float = 0.0  # monotonic seconds when handling began (request quotas)
    # When the handler's own work ended and the request started waiting (a long poll, an
    # acks=-1 produce): Kafka's apiLocalCompleteTimeNanos, set once by the dispatcher.
    api_local_complete_at: float | None = None

    def local_complete(self, at: float) -> None:
        self.api_local_complete_at = at

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

    @property
    def client_host(self) -> str:
        """The client's address as ACL hosts name it."""
        return self.connection.client_address[0] if self.connection.client_address else ""

    def authorize(self, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """Whether the principal may do ``operation`` on the resource ``name`` of the type."""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(self.principal, self.client_host, operation,
                                         resource_type, name)

    def authorized_names(self, operation: AclOperation, resource_type: ResourceType,
                         names: Iterable[str]) -> set[str]:
        """Those of ``names`` the principal may do ``operation`` on."""
        if self.authorizer is None:
            return set(names)
        return {name for name in names if self.authorize(operation, resource_type, name)}

    def authorize_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on some resource of the type (KIP-679)."""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize_by_resource_type(self.principal, self.client_host,
                                                          operation, resource_type)

    def throttle(self, throttle_time_ms: int) -> None:
        """KIP-219: the broker, not only the client, holds back: the connection reads no
        request for the throttle time, so a client that ignores ``throttle_time`` is held to
        its quota too."""
        if self.connection.mute is not None:
            self.connection.mute(throttle_time_ms)

    def respond(self, **description: Any) -> Any:
        """Builds this request's response in the request's version (see protocol.messages),
        with the ``throttle_time`` the client quotas give it where the version has one."""
        request = self.request
        cls = response_class(request.api_key, request.api_version)
        if not has_field(cls, "throttle_time"):
            return build(cls, **description)
        description["throttle_time"] = NO_THROTTLE
        response = build(cls, **description)
        throttle_time_ms, response = self.quotas.throttle(self, response)
        if throttle_time_ms == 0:
            return response
        self.throttle(throttle_time_ms)
        return dataclasses.replace(
            response, throttle_time=datetime.timedelta(milliseconds=throttle_time_ms))
