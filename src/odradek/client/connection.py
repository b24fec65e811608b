"""One Kafka protocol connection to another broker, for broker-to-broker requests.

Followers fetch from leaders and the controller sends its requests to brokers over the same
wire protocol clients use, so this is a small client of that protocol: kio requests in,
kio responses out, framed as in ``odradek.protocol.framing``::

    connection = await BrokerConnection.open("10.0.0.2", 9092, client_id="broker-1",
                                             connect_timeout_s=5.0)
    response = await connection.send(fetch_request, timeout_s=30.0)

A Kafka broker answers the requests of one connection in the order it received them (see
``odradek.server.connection``), so requests are pipelined: each one written takes a slot at
the back of ``_in_flight`` and each response answers the slot at the front. Its correlation
id must be that slot's; one that is not means the stream can no longer be trusted, and the
connection closes.

Failures follow Kafka's ``NetworkClient``: a connection that fails (refused, reset, closed by
the peer, an unreadable response) fails every request in flight on it with
:class:`BrokerConnectionError` and stays closed; the caller reconnects
(:class:`BrokerConnections` does). A request not answered within its timeout raises
``TimeoutError`` and closes the connection too, because its response may still come and
the broker is not answering in time anyway.

A connection to a TLS or SASL listener is made with a :class:`ClientSecurity`: the TLS
handshake is asyncio's, and the SASL exchange (SaslHandshake, then SaslAuthenticate until
the mechanism completes) runs in :meth:`BrokerConnection.open`, before any other request.

Replica fetches go through here, so the per-request path is kept short: an
``asyncio.Protocol`` rather than streams, one future and one timer handle per request, the
frame encoded by the compiled encoders, and a response decoded only if someone still
waits for it (a caller cancelled while waiting leaves its slot to be answered and dropped).

This module is not thread-safe: a connection belongs to the event loop that opened it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from odradek.protocol.api import ApiKey, request_class, response_class
from odradek.protocol.encoder import encode_frame
from odradek.protocol.framing import FrameDecoder, FrameTooLargeError, FramingError
from odradek.protocol.messages import build, lenient_timestamps
from odradek.security.sasl import SaslAuthenticationError, SaslClient

# A fetch response is bounded by replica.fetch.response.max.bytes (10 MiB by default) but
# always carries at least one whole batch, which can be as large as the topic allows. 100
# MiB is the broker's own bound on a request (socket.request.max.bytes), and about
# librdkafka's on a response (receive.message.max.bytes, 10^8).
DEFAULT_MAX_RESPONSE_BYTES = 100 * 1024 * 1024

# Correlation ids are int32 on the wire; they wrap around to 0 after the largest.
_CORRELATION_ID_MASK = 0x7FFF_FFFF


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How to reach a listener that is not PLAINTEXT: TLS with ``ssl_context``, SASL with
    ``sasl_mechanism`` (PLAIN, SCRAM-SHA-256/512) as ``username``."""

    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""


class BrokerConnectionError(ConnectionError):
    """The connection to a broker could not be made or was lost; the requests in flight on
    it will not be answered."""


class _InFlight:
    """A request written and not yet answered: what its response must carry and who waits."""

    __slots__ = ("correlation_id", "future", "response_class", "timer")

    def __init__(self, correlation_id: int, response_cls: type, future: asyncio.Future[Any],
                 timer: asyncio.TimerHandle) -> None:
        self.correlation_id = correlation_id
        self.response_class = response_cls
        self.future = future
        self.timer = timer


class BrokerConnection(asyncio.Protocol):
    """One TCP connection to one broker. Open it with :meth:`open`."""

    def __init__(self, host: str, port: int, client_id: str, max_response_bytes: int) -> None:
        self.host = host
        self.port = port
        self.address = f"{host}:{port}"  # as errors name the broker
        self._client_id = client_id
        self._loop = asyncio.get_running_loop()
        self._decoder = FrameDecoder(max_response_bytes)
        self._max_response_bytes = max_response_bytes
        self._transport: asyncio.Transport | None = None
        self._in_flight: deque[_InFlight] = deque()
        self._correlation_id = 0
        self._closed = False

    @classmethod
    async def open(cls, host: str, port: int, *, client_id: str, connect_timeout_s: float,
                   max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                   security: ClientSecurity | None = None) -> BrokerConnection:
        """Connects to ``host:port`` (with TLS and SASL as ``security`` says); raises
        :class:`BrokerConnectionError` if that fails or takes longer than
        ``connect_timeout_s``."""
        loop = asyncio.get_running_loop()
        security = security or ClientSecurity()
        tls = {"ssl": security.ssl_context, "server_hostname": host} \
            if security.ssl_context is not None else {}
        connection: BrokerConnection | None = None
        try:
            async with asyncio.timeout(connect_timeout_s):
                _, connection = await loop.create_connection(
                    lambda: cls(host, port, client_id, max_response_bytes), host, port, **tls)
                if security.sasl_mechanism is not None:
                    await connection._authenticate(security, connect_timeout_s)
        except TimeoutError:
            if connection is not None:
                connection.close()
            raise BrokerConnectionError(
                f"cannot connect to {host}:{port}: no connection within {connect_timeout_s} s"
            ) from None
        except BrokerConnectionError:
            raise
        except (OSError, ssl.SSLError) as exc:
            raise BrokerConnectionError(f"cannot connect to {host}:{port}: {exc}") from exc
        return connection

    async def _authenticate(self, security: ClientSecurity, timeout_s: float) -> None:
        """The SASL exchange (KIP-152): SaslHandshake v1, then SaslAuthenticate v2 carrying
        the mechanism's tokens."""
        mechanism = security.sasl_mechanism
        client = SaslClient(mechanism, security.username, security.password)
        handshake = await self.send(build(request_class(ApiKey.SASL_HANDSHAKE, 1),
                                          mechanism=mechanism), timeout_s=timeout_s)
        problem = None
        if handshake.error_code != ErrorCode.none:
            problem = (f"mechanism {mechanism} is not enabled (the listener offers "
                       f"{', '.join(handshake.mechanisms) or 'none'})")
        token: bytes | None = client.first_token()
        while problem is None and token is not None:
            answer = await self.send(build(request_class(ApiKey.SASL_AUTHENTICATE, 2),
                                           auth_bytes=token), timeout_s=timeout_s)
            if answer.error_code != ErrorCode.none:
                problem = answer.error_message or answer.error_code.name
                break
            try:
                token = None if client.complete else client.next_token(answer.auth_bytes)
            except SaslAuthenticationError as exc:
                problem = str(exc)
        if problem is not None:
            self.close()
            raise BrokerConnectionError(f"SASL {mechanism} authentication to {self.address} "
                                        f"failed: {problem}")

    @property
    def closed(self) -> bool:
        """True once the connection failed or was closed; it never opens again."""
        return self._closed

    async def send(self, request: Any, *, timeout_s: float) -> Any:
        """Sends a kio request and returns the kio response of the same API and version.

        Raises :class:`BrokerConnectionError` if the connection is or becomes closed before
        the answer, and ``TimeoutError`` (closing the connection) if no answer came within
        ``timeout_s``.
        """
        if self._closed:
            raise BrokerConnectionError(f"connection to {self.address} is closed")
        if getattr(request, "acks", None) == 0:
            # The broker sends nothing back, so the next response would answer this slot.
            raise ValueError("a Produce with acks=0 has no response to wait for")
        cls = type(request)
        correlation_id = (self._correlation_id + 1) & _CORRELATION_ID_MASK
        header = cls.__header_schema__(
            request_api_key=cls.__api_key__, request_api_version=cls.__version__,
            correlation_id=correlation_id, client_id=self._client_id)
        # Encoded before it takes a slot: a request that cannot be encoded is not in flight.
        chunks = encode_frame(header, request)
        self._correlation_id = correlation_id
        future = self._loop.create_future()
        timer = self._loop.call_later(timeout_s, self._request_timed_out, future, cls, timeout_s)
        self._in_flight.append(_InFlight(
            correlation_id, response_class(cls.__api_key__, cls.__version__), future, timer))
        self._transport.writelines(chunks)
        return await future

    def close(self) -> None:
        """Closes the connection; requests in flight fail with BrokerConnectionError."""
        self._fail(BrokerConnectionError(f"connection to {self.address} was closed"))

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except FrameTooLargeError:
            self._fail(BrokerConnectionError(
                f"{self.address} sent a response larger than "
                f"{self._max_response_bytes} bytes"))
            return
        except FramingError as exc:
            self._fail(BrokerConnectionError(f"{self.address}: {exc}"))
            return
        for frame in frames:
            if self._closed:
                return
            self._response_received(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = "closed by the broker" if exc is None else f"lost: {exc}"
        self._fail(BrokerConnectionError(f"connection to {self.address} {reason}"))

    # -- responses ---------------------------------------------------------------------

    def _response_received(self, frame: bytes) -> None:
        if not self._in_flight:
            self._fail(BrokerConnectionError(f"{self.address} sent a response to no request"))
            return
        slot = self._in_flight[0]
        try:
            header, offset = entity_reader(slot.response_class.__header_schema__)(frame, 0)
        except Exception as exc:  # kio raises a variety of decode errors on malformed input
            self._fail(self._unreadable(slot, exc))
            return
        if header.correlation_id != slot.correlation_id:
            self._fail(BrokerConnectionError(
                f"{self.address} answered correlation id {header.correlation_id} while "
                f"{slot.correlation_id} was the oldest request in flight"))
            return
        self._in_flight.popleft()
        slot.timer.cancel()
        if slot.future.done():  # its caller was cancelled: the answer is dropped
            return
        try:
            response, _ = entity_reader(lenient_timestamps(slot.response_class))(frame, offset)
        except Exception as exc:  # as above
            error = self._unreadable(slot, exc)
            slot.future.set_exception(error)
            self._fail(error)
            return
        slot.future.set_result(response)

    def _unreadable(self, slot: _InFlight, exc: Exception) -> BrokerConnectionError:
        cls = slot.response_class
        return BrokerConnectionError(
            f"{self.address} sent an unreadable {cls.__name__} v{cls.__version__}: {exc!r}")

    def _request_timed_out(self, future: asyncio.Future[Any], request_cls: type,
                           timeout_s: float) -> None:
        if not future.done():
            future.set_exception(TimeoutError(
                f"{request_cls.__name__} v{request_cls.__version__} to {self.address} "
                f"not answered within {timeout_s} s"))
        self._fail(BrokerConnectionError(
            f"connection to {self.address} closed: a request timed out"))

    def _fail(self, error: BrokerConnectionError) -> None:
        """Closes the connection, failing every request still waiting with ``error``."""
        self._closed = True
        in_flight, self._in_flight = self._in_flight, deque()
        for slot in in_flight:
            slot.timer.cancel()
            if not slot.future.done():
                slot.future.set_exception(error)
        if self._transport is not None:
            self._transport.abort()
            self._transport = None


class BrokerConnections:
    """One connection per broker, by node id, opened on first use and again once closed.

    A broker that moved (a new host or port for the same node id) gets a new connection and
    the old one is closed.
    """

    def __init__(self, *, client_id: str, connect_timeout_s: float,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 security: ClientSecurity | None = None) -> None:
        self._client_id = client_id
        self._connect_timeout_s = connect_timeout_s
        self._max_response_bytes = max_response_bytes
        self._security = security
        self._connections: dict[int, BrokerConnection] = {}

    async def get(self, node_id: int, host: str, port: int) -> BrokerConnection:
        """An open connection to broker ``node_id`` at ``host:port``; raises
        :class:`BrokerConnectionError` if none can be made."""
        connection = self._usable(node_id, host, port)
        if connection is not None:
            return connection
        opened = await BrokerConnection.open(
            host, port, client_id=self._client_id, connect_timeout_s=self._connect_timeout_s,
            max_response_bytes=self._max_response_bytes, security=self._security)
        # Another caller may have connected to the same broker while this one waited.
        connection = self._usable(node_id, host, port)
        if connection is not None:
            opened.close()
            return connection
        if (stale := self._connections.get(node_id)) is not None:
            stale.close()
        self._connections[node_id] = opened
        return opened

    def _usable(self, node_id: int, host: str, port: int) -> BrokerConnection | None:
        connection = self._connections.get(node_id)
        if (connection is None or connection.closed
                or (connection.host, connection.port) != (host, port)):
            return None
        return connection

    def close_all(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
