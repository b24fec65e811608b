"""Kafka requests the CLI sends itself, over ``odradek.client.BrokerConnection``, for the
APIs librdkafka has no call for (reassignments, transactions, client quotas) or mishandles
(DescribeAcls, DescribeUserScramCredentials): one connection per request, bounded in time,
and broker errors worded for a person.

A connection is secured as the command's librdkafka clients are: :func:`client_security`
reads the same -X properties (``security.protocol``, ``sasl.*``, ``ssl.*``).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError
from kio.schema.errors import ErrorCode

from odradek.cli.client import CONNECTION_SETUP_TIMEOUT_MS, REQUEST_TIMEOUT_SECONDS, Kafka
from odradek.cli.errors import fail
from odradek.client.connection import BrokerConnection, BrokerConnectionError, ClientSecurity
from odradek.security.tls import SslConfigError, client_context

# A little over the request's own timeout, so that the broker's answer is what we report.
SEND_TIMEOUT_S = REQUEST_TIMEOUT_SECONDS + 2
CLIENT_ID = "odradek-cli"

# librdkafka's security.protocol values (in any case), each: (TLS?, SASL?).
_SECURITY_PROTOCOLS = {
    "plaintext": (False, False),
    "ssl": (True, False),
    "sasl_plaintext": (False, True),
    "sasl_ssl": (True, True),
}
# The SASL mechanisms BrokerConnection speaks; librdkafka's default, GSSAPI, is not one.
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# The TLS versions librdkafka offers by default (it has no ssl.enabled.protocols).
_TLS_VERSIONS = ["TLSv1.2", "TLSv1.3"]


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    node_id: int
    host: str
    port: int


def kafka_error_name(code: ErrorCode) -> str:
    return code.name.upper()  # kio's names are Kafka's, in lower case


def error_reason(code: ErrorCode) -> str:
    """librdkafka's description of a broker error, for answers that carry no message."""
    return KafkaError(int(code)).str().removeprefix("Broker: ")


def describe_error(code: ErrorCode, message: str | None) -> str:
    return f"{message or error_reason(code)} ({kafka_error_name(code)})"


def client_security(properties: Mapping[str, Any]) -> ClientSecurity | None:
    """How to reach the brokers as a librdkafka client with ``properties`` does (None for
    PLAINTEXT); fails with one line on what BrokerConnection cannot do, e.g. GSSAPI.

    librdkafka's TLS files become Kafka's ``ssl.*`` configs for ``client_context``: the CA
    file (``ssl.ca.location``) a PEM truststore, the certificate and key files
    (``ssl.certificate.location``, ``ssl.key.location``) an in-line PEM keystore.
    """
    protocol = str(properties.get("security.protocol", "plaintext")).lower()
    if protocol not in _SECURITY_PROTOCOLS:
        fail(f"security.protocol={protocol} is not one of "
             f"{', '.join(p.upper() for p in _SECURITY_PROTOCOLS)}")
    tls, sasl = _SECURITY_PROTOCOLS[protocol]
    if not tls and not sasl:
        return None
    mechanism = None
    if sasl:
        mechanism = str(properties.get("sasl.mechanism")
                        or properties.get("sasl.mechanisms") or "GSSAPI").upper()
        if mechanism not in _SASL_MECHANISMS:
            fail(f"sasl.mechanism={mechanism} is not supported for this command; use "
                 f"{', '.join(_SASL_MECHANISMS)}")
    return ClientSecurity(ssl_context=_ssl_context(properties) if tls else None,
                          sasl_mechanism=mechanism,
                          username=str(properties.get("sasl.username", "")),
                          password=str(properties.get("sasl.password", "")))


def _ssl_context(properties: Mapping[str, Any]) -> ssl.SSLContext:
    kafka_configs: dict[str, Any] = {
        "ssl.enabled.protocols": _TLS_VERSIONS,
        # librdkafka (since 2.0) checks the broker's host name against its certificate
        # unless told "none"; Kafka's Java clients do the same.
        "ssl.endpoint.identification.algorithm": properties.get(
            "ssl.endpoint.identification.algorithm", "https"),
        "ssl.key.password": properties.get("ssl.key.password"),
    }
    if "ssl.ca.location" in properties:
        kafka_configs |= {"ssl.truststore.type": "PEM",
                          "ssl.truststore.location": properties["ssl.ca.location"]}
    key = properties.get("ssl.key.location")
    certificate = properties.get("ssl.certificate.location")
    if (key is None) != (certificate is None):
        fail("a client certificate needs both ssl.certificate.location and ssl.key.location")
    if key is not None:
        kafka_configs |= {"ssl.keystore.type": "PEM",
                          "ssl.keystore.key": _read_pem("ssl.key.location", key),
                          "ssl.keystore.certificate.chain": _read_pem(
                              "ssl.certificate.location", certificate)}
    try:
        return client_context(kafka_configs.get)
    except SslConfigError as exc:
        fail(f"cannot make a TLS context from the ssl.* properties: {exc}")


def _read_pem(name: str, path: str) -> str:
    try:
        with open(path, encoding="ascii") as file:
            return file.read()
    except OSError as exc:
        fail(f"{name}: cannot read {path}: {exc.strerror}")
    except UnicodeDecodeError:
        fail(f"{name}: {path} is not a PEM file")


async def exchange(broker: BrokerAddress, request: Any,
                   security: ClientSecurity | None = None) -> Any:
    """Sends ``request`` to ``broker`` on a connection of its own (secured as ``security``
    says) and returns the answer."""
    connection = await BrokerConnection.open(
        broker.host, broker.port, client_id=CLIENT_ID,
        connect_timeout_s=CONNECTION_SETUP_TIMEOUT_MS / 1000, security=security)
    try:
        return await connection.send(request, timeout_s=SEND_TIMEOUT_S)
    finally:
        connection.close()


def exchange_with_broker(kafka: Kafka, broker: BrokerAddress, request: Any) -> Any:
    """The answer of ``broker``, reached as the command's librdkafka clients reach it; fails
    with one line naming the broker and the problem when it does not answer."""
    name = type(request).__name__.removesuffix("Request")
    try:
        return asyncio.run(exchange(broker, request, client_security(kafka.config())))
    except (BrokerConnectionError, TimeoutError) as exc:  # both name the address
        fail(f"{name}: broker {broker.node_id}: {exc}")


def exchange_with_any_broker(kafka: Kafka, request: Any) -> Any:
    """The answer of the first broker of the cluster that gives one, as Kafka's admin client
    sends requests any broker serves (client quotas, SCRAM credentials) to whichever it
    reaches. The brokers are reached as the command's librdkafka clients reach them: their
    metadata names the brokers, their properties say how to connect. Fails with one line
    naming each broker's problem when none answers."""
    cluster = kafka.admin.list_topics(timeout=REQUEST_TIMEOUT_SECONDS)
    security = client_security(kafka.config())
    name = type(request).__name__.removesuffix("Request")
    problems = []
    for broker in sorted(cluster.brokers.values(), key=lambda b: b.id):
        address = BrokerAddress(broker.id, broker.host, broker.port)
        try:
            return asyncio.run(exchange(address, request, security))
        except (BrokerConnectionError, TimeoutError) as exc:  # both name the address
            problems.append(f"broker {broker.id}: {exc}")
    fail(f"{name}: {'; '.join(problems) or 'the cluster has no brokers'}")
