"""One client connection: frames in, responses out, in request order.

A connection is accepted on one listener; when it is made it fixes the connection-level part
of every request's context (``ConnectionContext``: that listener, its security protocol, the
principal and the client's address), which the dispatcher gets with each frame. On a TLS
listener the connection is made once the TLS handshake is done, and a client certificate
gives the principal (``ListenerSecurity``). On a SASL listener the frames go to the
connection's ``SaslAuthenticator`` until the client has authenticated, which sets the
principal; a connection whose exchange failed is closed once its answer is written.

Kafka clients pipeline requests and match responses by correlation id, but they also expect
responses in the order of their requests on a connection, so a slow request (a long-poll
fetch) holds back the answers queued behind it. Each request takes a slot in ``_pending``;
a slot is written to the socket once it and every slot before it are done.

The answers ready after one read (or after one batch of slots completing) go to the socket
in one write: a pipelining producer of small batches would otherwise pay a send system call,
on loopback the receiver's TCP processing too, for each of its requests.

Backpressure: reading pauses while more than ``MAX_IN_FLIGHT_REQUESTS`` are pending or
while the transport's write buffer is over its high-water mark, so a client that sends
faster than it reads cannot grow the broker's memory without bound; while the memory pool
(``queued.max.request.bytes``) has no room for the request being received; and for the
throttle time of a client over its quota (``mute``, KIP-219).

A framing error (oversized frame, unparseable header, unknown API) closes this connection
only, with a log line saying why; every other connection keeps being served. So does a
request the broker parsed but failed on (a handler bug, an unencodable response): it is
logged as an error with its traceback, and the connection closes, as Kafka closes it for an
unexpected error it cannot map to an error code. Nothing a request does reaches the loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from odradek.log.file_region import FileRegion, TruncatedRegionError
from odradek.protocol.framing import FrameDecoder, FramingError
from odradek.security.principal import ANONYMOUS
from odradek.security.ssl_principal import NoMatchingRule
from odradek.server.authenticator import AuthenticationClosed, SaslAuthenticator
from odradek.server.listener_security import ListenerSecurity
from odradek.server.memory_pool import SMALL_REQUEST_BYTES, MemoryPool
from odradek.server.request_context import ConnectionContext
from odradek.server.zero_copy import in_memory, take, write_to_socket

log = logging.getLogger(__name__)

# Enough to keep a pipelining producer busy (librdkafka sends up to 1,000,000 in flight by
# default but 5 per connection with idempotence); beyond it the socket stops being read.
MAX_IN_FLIGHT_REQUESTS = 64

# Past this many bytes queued on the transport the connection stops reading requests; it
# reads again once they are all written (low water 0), which is also when the rest of a
# response behind a file region may go straight to the socket again.
WRITE_BUFFER_HIGH_BYTES = 64 * 1024
# What of a response behind a full socket is read into memory at a time: over the high-water
# mark, so that the transport, holding it, calls back once it has written it.
UNSENT_PIECE_BYTES = 2 * WRITE_BUFFER_HIGH_BYTES

# What a dispatcher returns for a request: the encoded response as buffers to write in order
# (a fetch's large records as file regions), None when no response is due (acks=0
# produce), or an awaitable of either.
Response = list[bytes | bytearray | FileRegion]
Outcome = Response | None | Awaitable[Response | None]
Dispatcher = Callable[[bytes, ConnectionContext], Outcome]


class Connection(asyncio.Protocol):
    def __init__(
        self,
        dispatch: Dispatcher,
        max_request_bytes: int,
        listener: ListenerSecurity,
        on_open: Callable[[Connection], str | None],
        on_close: Callable[[Connection], None],
        memory_pool: MemoryPool | None = None,
    ) -> None:
        """``listener`` is the security of the listener that accepted it;
        ``on_open`` admits the connection or says why it is refused (a connection quota);
        ``on_close`` is called when an admitted connection is gone."""
        self._dispatch = dispatch
        self._listener = listener
        self._authenticator: SaslAuthenticator | None = None
        self.context: ConnectionContext | None = None
        self._decoder = FrameDecoder(max_request_bytes)
        self._on_open = on_open
        self._on_close = on_close
        self._admitted = False
        self._pending: deque[asyncio.Future[Response | None]] = deque()
        self._outgoing: Response = []  # answers ready, written together by _flush
        self._unsent: Response = []  # the rest of answers a full socket held back (zero_copy)
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._muted_until = 0.0  # loop time until which a quota holds the client back, or 0
        self._memory_pool = memory_pool or MemoryPool(-1)
        self._held = 0  # bytes of a request in progress, counted in the memory pool
        self._waiting_for_memory = False
        self._loop = asyncio.get_running_loop()
        self.last_active = self._loop.time()  # connections.max.idle.ms
        self.peer: tuple[str, int] | None = None
        self.peer_host = ""
        self.closed = self._loop.create_future()

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._transport = transport
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH_BYTES, low=0)
        self.peer = transport.get_extra_info("peername")
        # A socket reset before it was handed to us has no peer name any more.
        self.peer_host = self.peer[0] if self.peer else ""
        listener = self._listener
        try:
            principal = (listener.tls_principal(transport.get_extra_info("ssl_object"))
                         if listener.uses_tls else ANONYMOUS)
        except NoMatchingRule as exc:
            log.warning("refusing connection from %s: %s", self.peer, exc)
            transport.abort()
            return
        self._authenticator = listener.authenticator()
        self.context = ConnectionContext(listener.name, listener.protocol, principal,
                                         self.peer[:2] if self.peer else None, self.mute)
        refusal = self._on_open(self)
        if refusal is not None:
            log.warning("refusing connection from %s: %s", self.peer, refusal)
            transport.abort()
            return
        self._admitted = True

    def data_received(self, data: bytes) -> None:
        self.last_active = self._loop.time()
        try:
            frames = self._decoder.feed(data)
        except FramingError as exc:
            self.abort(str(exc))
            return
        if self._memory_pool.bounded:
            self._count_held_memory()
        for frame in frames:
            if self._transport is None or self._transport.is_closing():
                break
            self._submit(frame)
        self._flush()

    @property
    def answering(self) -> bool:
        """Whether requests received are still being answered."""
        return bool(self._pending)

    def _count_held_memory(self) -> None:
        """queued.max.request.bytes: counts the bytes kept for the request in progress, and
        stops reading while the pool has no room for more of them."""
        pool = self._memory_pool
        held = self._decoder.buffered
        pool.adjust(held - self._held)
        self._held = held
        size = self._decoder.pending_frame_size
        large = size is not None and size > SMALL_REQUEST_BYTES
        if held and not pool.has_room(large) and not self._waiting_for_memory:
            self._waiting_for_memory = True
            pool.wait(self, large, self._memory_room)
            self._update_reading()

    def _memory_room(self) -> None:
        self._waiting_for_memory = False
        self._update_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._unsent = []
        self._memory_pool.forget(self)
        self._memory_pool.adjust(-self._held)
        self._held = 0
        for slot in self._pending:
            slot.cancel()
        self._pending.clear()
        if not self.closed.done():
            self.closed.set_result(None)
        if self._admitted:
            self._on_close(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._unsent:
            self._send_unsent()
        self._update_reading()

    # -- requests ----------------------------------------------------------------------

    def _submit(self, frame: bytes) -> None:
        try:
            outcome = self._outcome(frame)
        except (FramingError, AuthenticationClosed) as exc:
            self.abort(str(exc))
            return
        except Exception as exc:
            self._fail(exc)
            return
        if not isinstance(outcome, (list, type(None))):
            slot = asyncio.ensure_future(outcome)
            slot.add_done_callback(self._slot_done)
            self._pending.append(slot)
            self._update_reading()
            return
        if not self._pending:
            if outcome is not None:
                self._write(outcome)
            return
        slot = self._loop.create_future()
        slot.set_result(outcome)
        self._pending.append(slot)

    def _slot_done(self, _: asyncio.Future[Response | None]) -> None:
        transport = self._transport
        pending = self._pending
        while pending and pending[0].done():
            slot = pending.popleft()
            if slot.cancelled() or transport is None:
                continue
            exc = slot.exception()
            if exc is not None:
                self._fail(exc)
                return
            response = slot.result()
            if response is not None:
                self._write(response)
        self._flush()
        self._update_reading()

    def _outcome(self, frame: bytes) -> Outcome:
        authenticator = self._authenticator
        if authenticator is None:
            return self._dispatch(frame, self.context)
        if authenticator.intercepts(frame):
            outcome = authenticator.receive(frame, lambda f: self._dispatch(f, self.context))
            if outcome is None and authenticator.failed:  # a bare token failed: no answer
                raise AuthenticationClosed("SASL authentication failed")
            principal = authenticator.principal
            if principal is not None and principal != self.context.principal:
                self.context = dataclasses.replace(self.context, principal=principal)
            return outcome
        if authenticator.session_expired():
            # KIP-368: past its session, a connection serves nothing but re-authentication.
            raise AuthenticationClosed("the SASL session expired (connections.max.reauth.ms) "
                                       "and the client did not re-authenticate")
        return self._dispatch(frame, self.context)

    def _write(self, response: Response) -> None:
        """Queues ``response`` for the next :meth:`_flush`; an answer that ends a failed
        SASL exchange is written at once, and the connection closed after it."""
        self._outgoing += response
        if self._authenticator is not None and self._authenticator.failed:
            self._flush()
            if self._unsent:  # the transport writes what it holds before it closes
                self._transport.writelines(in_memory(self._unsent))
                self._unsent = []
            self._transport.close()

    def _flush(self) -> None:
        outgoing, self._outgoing = self._outgoing, []
        transport = self._transport
        if not outgoing or transport is None:
            return
        if self._listener.uses_tls:
            # One TLS record per buffer written: joined, the answers are a few records of up
            # to 16 KB instead of one for each of their many small pieces.
            transport.write(b"".join(outgoing))
        elif self._unsent:
            self._unsent += outgoing  # behind the rest of an answer: sent after it, in order
        elif not any(type(chunk) is FileRegion for chunk in outgoing):
            transport.writelines(outgoing)
        else:
            self._unsent = outgoing
            self._send_unsent()
        self.last_active = self._loop.time()

    def _send_unsent(self) -> None:
        """Answers holding file regions (large fetched records), and what follows them:
        sent from the page cache by the kernel while the transport has nothing queued,
        which leaves the socket to us. When the socket is full, a piece is read and queued
        on the transport instead; past the high-water mark the transport pauses writing,
        and once it has written everything ``resume_writing`` sends the rest from here."""
        transport = self._transport
        try:
            while self._unsent and not self._writing_paused:
                if transport.get_write_buffer_size() == 0:
                    self._unsent = write_to_socket(
                        transport.get_extra_info("socket").fileno(), self._unsent)
                    if not self._unsent:
                        return
                piece, self._unsent = take(self._unsent, UNSENT_PIECE_BYTES)
                transport.writelines(piece)
        except TruncatedRegionError as exc:
            self._unsent = []
            self.abort(f"cannot send the records fetched: {exc}")  # never a short response
        except OSError as exc:  # the client is gone: the transport finds out next
            log.debug("writing to %s failed: %s", self.peer, exc)
            self._unsent = []
            transport.abort()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None:
            return
        should_pause = (self._writing_paused or len(self._pending) > MAX_IN_FLIGHT_REQUESTS
                        or self._waiting_for_memory or self._muted_until > 0)
        if should_pause and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused:
            transport.resume_reading()
            self._reading_paused = False

    def mute(self, throttle_time_ms: int) -> None:
        """Reads no request for ``throttle_time_ms`` (KIP-219: a client over its quota is
        held back by the broker too, whatever it does with ``throttle_time``)."""
        loop = self._loop
        until = loop.time() + throttle_time_ms / 1000
        if until > self._muted_until:
            self._muted_until = until
            loop.call_at(until, self._unmute, until)
        self._update_reading()

    def _unmute(self, until: float) -> None:
        # The timer may run a little before ``until`` (the loop's clock resolution), so the
        # mute ends by this call, unless a longer one came since.
        if self._muted_until == until:
            self._muted_until = 0.0
            self._update_reading()

    def abort(self, reason: str) -> None:
        """Closes this connection because of what the client sent, saying why in the log."""
        log.warning("closing connection from %s: %s", self.peer, reason)
        self._close_now()

    def _fail(self, exc: Exception) -> None:
        """Closes this connection because the broker failed on one of its requests."""
        log.error("closing connection from %s: request failed: %r", self.peer, exc,
                  exc_info=exc)
        self._close_now()

    def _close_now(self) -> None:
        """Closes at once. The answers to the requests before the one that ended it go out
        as far as the socket takes them now; what it cannot take is dropped with the
        connection, as Kafka's Selector drops a closed channel's sends, rather than held for
        a client that may never read."""
        if self._transport is not None:
            self._flush()
            self._transport.abort()

    def close(self) -> None:
        """Closes after writing what is already queued (shutdown)."""
        if self._transport is not None:
            self._transport.close()

    async def drain(self) -> None:
        """Waits until every pending request has been answered."""
        while self._pending:
            await asyncio.wait(list(self._pending))
