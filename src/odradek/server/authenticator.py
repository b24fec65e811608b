"""``SaslAuthenticator``: the SASL exchange of one connection on a SASL listener (Kafka's
``SaslServerAuthenticator``).

Until a client has authenticated, its connection serves only the exchange::

    ApiVersions*  ->  SaslHandshake(mechanism)  ->  SaslAuthenticate(token)+  ->  authenticated

- ApiVersions is answered as on any listener, so a client can learn the versions first.
- SaslHandshake names the mechanism; one the listener does not enable is answered with
  UNSUPPORTED_SASL_MECHANISM and the list it does enable, and the connection closes.
- SaslAuthenticate carries the mechanism's tokens until it completes. A failure is answered
  with SASL_AUTHENTICATION_FAILED after ``connection.failed.authentication.delay.ms`` (which
  slows a password guesser down) and the connection closes.
- Any other request before authentication completes closes the connection, as Kafka does
  ("Unexpected Kafka request of type ... during SASL handshake").
- SaslHandshake v0 (before KIP-152) is followed by the mechanism's tokens as bare frames,
  without a request header; they are answered the same way.

**Re-authentication (KIP-368).** With ``connections.max.reauth.ms`` set, SaslAuthenticate v1+
tells the client how long its session lasts. The client authenticates again on the same
connection before then (SaslHandshake and SaslAuthenticate again, as the same principal and
mechanism); a connection whose session has ended is closed at its next other request.

This class does no I/O: the connection hands it frames and writes what it returns.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import logging
import struct
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey, response_class
from odradek.protocol.framing import encode_response_chunks, parse_request, peek_header
from odradek.protocol.messages import build
from odradek.security.principal import USER_TYPE, KafkaPrincipal
from odradek.security.sasl import SaslAuthenticationError, SaslServer

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")

Response = list[bytes | bytearray]  # buffers to write, in order


class AuthenticationClosed(Exception):
    """The exchange cannot go on: the connection is closed, saying why in the log."""


class _State(enum.Enum):
    HANDSHAKE = "waiting for SaslHandshake"  # ApiVersions may come first
    AUTHENTICATE = "waiting for SaslAuthenticate"
    RAW_TOKENS = "waiting for raw SASL tokens (SaslHandshake v0)"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


_EXCHANGE_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class SaslAuthenticator:
    def __init__(
        self,
        mechanisms: Mapping[str, Callable[[], SaslServer]],
        *,
        reauth_ms: int,
        failed_delay_ms: int,
        clock: Callable[[], float],
    ) -> None:
        """``mechanisms``: the listener's enabled mechanisms, each with a factory of its
        server; ``reauth_ms``: ``connections.max.reauth.ms`` (0: sessions do not end);
        ``failed_delay_ms``: ``connection.failed.authentication.delay.ms``; ``clock``:
        monotonic seconds."""
        self._mechanisms = mechanisms
        self._reauth_ms = reauth_ms
        self._failed_delay_ms = failed_delay_ms
        self._clock = clock
        self._state = _State.HANDSHAKE
        self._server: SaslServer | None = None
        self._principal: KafkaPrincipal | None = None  # of the last completed exchange
        self._mechanism: str | None = None
        self._session_expires_at: float | None = None

    @property
    def principal(self) -> KafkaPrincipal | None:
        """Who authenticated; None until an exchange has completed."""
        return self._principal

    @property
    def failed(self) -> bool:
        """True once a response that ends the connection has been produced: the connection
        closes after writing it."""
        return self._state is _State.FAILED

    def intercepts(self, frame: bytes) -> bool:
        """Whether ``frame`` belongs to the exchange rather than to the request path."""
        if self._state is not _State.AUTHENTICATED:
            return True
        return peek_header(frame)[0] in _EXCHANGE_APIS

    def session_expired(self) -> bool:
        expires = self._session_expires_at
        return expires is not None and self._clock() >= expires

    def receive(self, frame: bytes, dispatch: Callable[[bytes], Any]) -> Any:
        """The outcome of one frame of the exchange: response buffers, or an awaitable of
        them; ``dispatch`` serves ApiVersions through the request path. Raises
        AuthenticationClosed when the connection must close without an answer."""
        if self._state is _State.RAW_TOKENS:
            return self._evaluate(frame, lambda error, message, token: (
                None if error is not ErrorCode.none else [_SIZE.pack(len(token)), token]))
        api_key = peek_header(frame)[0]
        if api_key == ApiKey.API_VERSIONS and self._state is _State.HANDSHAKE:
            return dispatch(frame)
        if api_key == ApiKey.SASL_HANDSHAKE and self._state in (_State.HANDSHAKE,
                                                                  _State.AUTHENTICATED):
            return self._handshake(parse_request(frame))
        if api_key == ApiKey.SASL_AUTHENTICATE and self._state is _State.AUTHENTICATE:
            return self._authenticate(parse_request(frame))
        name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else str(api_key)
        state, self._state = self._state, _State.FAILED
        raise AuthenticationClosed(
            f"Unexpected Kafka request of type {name} during SASL handshake ({state.value})")

    # -- SaslHandshake -----------------------------------------------------------------

    def _handshake(self, request: Any) -> Response:
        mechanism = request.body.mechanism
        enabled = tuple(self._mechanisms)
        reauthenticating = self._state is _State.AUTHENTICATED
        if mechanism not in self._mechanisms or (reauthenticating
                                                  and mechanism != self._mechanism):
            self._state = _State.FAILED
            log.warning("SASL handshake failed: mechanism %r is not enabled (enabled: %s)",
                        mechanism, ", ".join(enabled))
            error = ErrorCode.unsupported_sasl_mechanism
        else:
            self._server = self._mechanisms[mechanism]()
            self._mechanism = mechanism
            self._state = _State.AUTHENTICATE if request.api_version >= 1 else _State.RAW_TOKENS
            error = ErrorCode.none
        response = build(response_class(ApiKey.SASL_HANDSHAKE, request.api_version),
                         error_code=error, mechanisms=enabled)
        return encode_response_chunks(request.correlation_id, response)

    # -- SaslAuthenticate --------------------------------------------------------------

    def _authenticate(self, request: Any) -> Any:
        def respond(error: ErrorCode, message: str | None, token: bytes) -> Response:
            fields: dict[str, Any] = {"error_code": error, "error_message": message,
                                      "auth_bytes": token}
            if request.api_version >= 1:
                fields["session_lifetime"] = datetime.timedelta(
                    milliseconds=self._session_lifetime_ms() if error is ErrorCode.none
                    and self._state is _State.AUTHENTICATED else 0)
            response = build(response_class(ApiKey.SASL_AUTHENTICATE, request.api_version),
                             **fields)
            return encode_response_chunks(request.correlation_id, response)

        return self._evaluate(request.body.auth_bytes, respond)

    def _evaluate(self, token: bytes, respond: Callable[[ErrorCode, str | None, bytes], Any]
                  ) -> Any:
        assert self._server is not None
        try:
            challenge = self._server.evaluate_response(token)
            if self._server.complete:
                self._complete()
        except SaslAuthenticationError as exc:
            self._state = _State.FAILED
            log.info("SASL %s authentication failed: %s", self._mechanism, exc)
            return self._delayed(respond(ErrorCode.sasl_authentication_failed, str(exc), b""))
        return respond(ErrorCode.none, None, challenge)

    def _complete(self) -> None:
        assert self._server is not None
        principal = KafkaPrincipal(USER_TYPE, self._server.authorization_id)
        if self._principal is not None and principal != self._principal:
            # KIP-368: a session may be renewed, never moved to someone else.
            raise SaslAuthenticationError(f"Cannot change principals during re-authentication "
                                          f"from {self._principal}: {principal}")
        if self._principal is not None:
            log.debug("%s re-authenticated with %s", principal, self._mechanism)
        self._principal = principal
        self._state = _State.AUTHENTICATED
        lifetime_ms = self._session_lifetime_ms()
        self._session_expires_at = (self._clock() + lifetime_ms / 1000) if lifetime_ms else None

    def _session_lifetime_ms(self) -> int:
        return self._reauth_ms

    async def _delayed_response(self, response: Any) -> Any:
        await asyncio.sleep(self._failed_delay_ms / 1000)
        return response

    def _delayed(self, response: Any) -> Any:
        if not self._failed_delay_ms or response is None:
            return response
        return self._delayed_response(response)
