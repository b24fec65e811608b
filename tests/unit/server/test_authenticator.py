"""The SASL exchange of one connection: what a client may send before it has authenticated,
what it is answered, and when the connection must close (Kafka's SaslServerAuthenticator)."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from kafka_requests import api_versions_request, encode_request, metadata_request
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from odradek.protocol.api import ApiKey, request_class, response_class
from odradek.protocol.messages import build
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl import PlainSaslServer
from odradek.server.authenticator import AuthenticationClosed, SaslAuthenticator

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def authenticator(reauth_ms: int = 0, failed_delay_ms: int = 0, clock=None) -> SaslAuthenticator:
    return SaslAuthenticator({"PLAIN": lambda: PlainSaslServer(USERS)}, reauth_ms=reauth_ms,
                             failed_delay_ms=failed_delay_ms, clock=clock or Clock())


def handshake(mechanism: str, version: int = 1) -> bytes:
    body = build(request_class(ApiKey.SASL_HANDSHAKE, version), mechanism=mechanism)
    return encode_request(ApiKey.SASL_HANDSHAKE, version, 5, body)


def authenticate(token: bytes, version: int = 2) -> bytes:
    body = build(request_class(ApiKey.SASL_AUTHENTICATE, version), auth_bytes=token)
    return encode_request(ApiKey.SASL_AUTHENTICATE, version, 6, body)


def response(api_key: ApiKey, version: int, chunks) -> object:
    if asyncio.iscoroutine(chunks):
        chunks = asyncio.run(chunks)
    frame = b"".join(chunks)[4:]
    cls = response_class(api_key, version)
    _, offset = entity_reader(cls.__header_schema__)(frame, 0)
    return entity_reader(cls)(frame, offset)[0]


def no_dispatch(frame: bytes) -> None:
    raise AssertionError("nothing but ApiVersions reaches the request path")


def test_a_client_learns_the_versions_then_authenticates_with_plain():
    sasl = authenticator()
    dispatched = []
    sasl.receive(api_versions_request(3), dispatched.append)
    assert len(dispatched) == 1  # ApiVersions is served as on any listener

    answer = response(ApiKey.SASL_HANDSHAKE, 1, sasl.receive(handshake("PLAIN"), no_dispatch))
    assert (answer.error_code, answer.mechanisms) == (ErrorCode.none, ("PLAIN",))
    answer = response(ApiKey.SASL_AUTHENTICATE, 2,
                      sasl.receive(authenticate(b"\0alice\0alice-secret"), no_dispatch))
    assert answer.error_code is ErrorCode.none
    assert answer.session_lifetime == datetime.timedelta(0)  # sessions do not end
    assert sasl.principal == KafkaPrincipal("User", "alice")
    assert not sasl.intercepts(metadata_request(12))  # requests now take the request path


def test_a_mechanism_the_listener_does_not_enable_is_answered_with_the_enabled_ones():
    sasl = authenticator()
    answer = response(ApiKey.SASL_HANDSHAKE, 1, sasl.receive(handshake("GSSAPI"), no_dispatch))
    assert (answer.error_code, answer.mechanisms) == (ErrorCode.unsupported_sasl_mechanism,
                                                      ("PLAIN",))
    assert sasl.failed and sasl.principal is None


@pytest.mark.parametrize("frame", [metadata_request(12), authenticate(b"\0alice\0alice-secret")],
                         ids=["metadata", "authenticate-before-handshake"])
def test_a_request_before_authentication_closes_the_connection(frame):
    sasl = authenticator()
    with pytest.raises(AuthenticationClosed, match="during SASL handshake"):
        sasl.receive(frame, no_dispatch)
    assert sasl.failed and sasl.principal is None


def test_a_failed_authentication_is_answered_after_the_delay_and_ends_the_connection():
    sasl = authenticator(failed_delay_ms=50)
    sasl.receive(handshake("PLAIN"), no_dispatch)
    outcome = sasl.receive(authenticate(b"\0alice\0wrong"), no_dispatch)
    assert asyncio.iscoroutine(outcome)  # the answer waits for the delay
    loop = asyncio.new_event_loop()
    started = loop.time()
    chunks = loop.run_until_complete(outcome)
    assert loop.time() - started >= 0.05
    loop.close()
    answer = response(ApiKey.SASL_AUTHENTICATE, 2, chunks)
    assert answer.error_code is ErrorCode.sasl_authentication_failed
    assert answer.error_message == "Authentication failed: Invalid username or password"
    assert sasl.failed and sasl.principal is None


def test_a_session_ends_after_connections_max_reauth_ms_unless_renewed():
    clock = Clock()
    sasl = authenticator(reauth_ms=60_000, clock=clock)
    sasl.receive(handshake("PLAIN"), no_dispatch)
    answer = response(ApiKey.SASL_AUTHENTICATE, 2,
                      sasl.receive(authenticate(b"\0alice\0alice-secret"), no_dispatch))
    assert answer.session_lifetime == datetime.timedelta(minutes=1)  # KIP-368
    clock.now += 59
    assert not sasl.session_expired()
    # the client re-authenticates on the same connection before its session ends
    assert sasl.intercepts(handshake("PLAIN"))
    sasl.receive(handshake("PLAIN"), no_dispatch)
    sasl.receive(authenticate(b"\0alice\0alice-secret"), no_dispatch)
    clock.now += 59
    assert not sasl.session_expired()
    clock.now += 2
    assert sasl.session_expired()


def test_re_authentication_cannot_change_the_principal():
    sasl = authenticator()
    sasl.receive(handshake("PLAIN"), no_dispatch)
    sasl.receive(authenticate(b"\0alice\0alice-secret"), no_dispatch)
    sasl.receive(handshake("PLAIN"), no_dispatch)
    answer = response(ApiKey.SASL_AUTHENTICATE, 2,
                      sasl.receive(authenticate(b"\0bob\0bob-secret"), no_dispatch))
    assert answer.error_code is ErrorCode.sasl_authentication_failed
    assert "Cannot change principals during re-authentication" in answer.error_message
    assert sasl.failed and sasl.principal == KafkaPrincipal("User", "alice")


def test_handshake_v0_is_followed_by_bare_tokens():
    sasl = authenticator()
    answer = response(ApiKey.SASL_HANDSHAKE, 0, sasl.receive(handshake("PLAIN", 0), no_dispatch))
    assert answer.error_code is ErrorCode.none
    assert sasl.receive(b"\0alice\0alice-secret", no_dispatch) == [b"\0\0\0\0", b""]
    assert sasl.principal == KafkaPrincipal("User", "alice")
