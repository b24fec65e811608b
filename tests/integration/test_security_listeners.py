"""TLS, mutual TLS and SASL (PLAIN, SCRAM) listeners, driven by confluent-kafka,
kafka-python, aiokafka and kcat; and the refusals a user would run into.

One broker serves the whole module on five listeners:

=============  ==============  ==========================================================
listener       protocol        what it asks of a client
=============  ==============  ==========================================================
PLAINTEXT      PLAINTEXT       nothing (the tests' own checks of what was written)
SSL            SSL             TLS; a client certificate if it has one (requested)
MTLS           SSL             TLS with a client certificate signed by the CA (required)
SASL_PLAINTEXT SASL_PLAINTEXT  PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
SASL_SSL       SASL_SSL        TLS, then PLAIN or SCRAM-SHA-512
=============  ==============  ==========================================================

The ACL authorizer runs with ``allow.everyone.if.no.acl.found``, so topics without ACLs are
open to all and one topic with ACLs shows who a client was taken to be; the PLAINTEXT
listener's ANONYMOUS is a super user, for the tests' own checks.
"""

from __future__ import annotations

import datetime
import logging
import socket
import struct
import time
import uuid
from pathlib import Path

import aiokafka.helpers
import confluent_kafka
import pytest
from conftest import CLIENTS, TIMEOUT_SECONDS, Client
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_requests import encode_request, metadata_request
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from odradek.protocol.api import ApiKey, request_class, response_class
from odradek.protocol.messages import build
from odradek.security.certificates import (
    CertificateAuthority,
    CertificateFiles,
    Validity,
    write_file,
)
from odradek.security.scram import ScramCredential, ScramMechanism
from odradek.testing.embedded import EmbeddedBroker

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{user}="{password}"' for user, password in USERS.items()) + ";")
ALICE_DN = "CN=alice,OU=Eng,O=Odradek"
RECORDS = [{"key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(3)]


class Pki:
    """A CA, the broker's keystore, and client certificates: alice's and bob's, an expired
    one, and one from another CA."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ca = CertificateAuthority.create("CN=odradek test CA")
        write_file(directory / "ca.pem", self.ca.certificate_pem())
        CertificateFiles.named(directory, "broker").write(self.ca.issue_server())
        self._client("alice", self.ca, ALICE_DN)
        self._client("bob", self.ca, "CN=bob,OU=Ops,O=Odradek")
        past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
        self._client("expired", self.ca, ALICE_DN,
                     Validity(past, past + datetime.timedelta(days=1)))
        self._client("stranger", CertificateAuthority.create("CN=another CA"), ALICE_DN)

    def _client(self, name: str, ca: CertificateAuthority, subject: str,
                validity: Validity | None = None) -> None:
        CertificateFiles.named(self.directory, name).write(
            ca.issue_client(subject, validity=validity))

    def path(self, name: str) -> str:
        return str(self.directory / name)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, pki):
    configs = {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in
                              ("PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL")),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("broker.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/L,DEFAULT",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms":
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener is the tests' own
        "connection.failed.authentication.delay.ms": 10,
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("odradek"), **configs) as broker:
        for user, password in USERS.items():  # SCRAM users live in the metadata store
            broker.call(broker.broker.metadata.set_entity_configs(f"users/{user}", {
                mechanism.mechanism_name: ScramCredential.from_password(
                    mechanism, password).to_kafka_string()
                for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)}))
        yield broker


# -- each client's own settings ---------------------------------------------------------


def settings_of(client: Client, pki: Pki, *, tls: bool, certificate: str | None = None,
                sasl: tuple[str, str, str] | None = None) -> dict:
    """``client``'s connection settings, in its own names: TLS trusting the test CA (with
    ``certificate``'s key pair), SASL as (mechanism, user, password)."""
    protocol = ("SASL_" if sasl else "") + ("SSL" if tls else "PLAINTEXT")
    if client.name in ("confluent-kafka", "kcat"):
        found = {"security.protocol": protocol.lower()}
        if tls:
            found["ssl.ca.location"] = pki.path("ca.pem")
        if certificate:
            found |= {"ssl.certificate.location": pki.path(f"{certificate}.crt"),
                      "ssl.key.location": pki.path(f"{certificate}.key")}
        if sasl:
            found |= dict(zip(("sasl.mechanism", "sasl.username", "sasl.password"), sasl,
                              strict=True))
        return found
    found = {"security_protocol": protocol}
    if tls and client.name == "aiokafka":
        found["ssl_context"] = aiokafka.helpers.create_ssl_context(
            cafile=pki.path("ca.pem"),
            certfile=pki.path(f"{certificate}.crt") if certificate else None,
            keyfile=pki.path(f"{certificate}.key") if certificate else None)
    elif tls:
        found |= {"ssl_cafile": pki.path("ca.pem"), "ssl_check_hostname": True}
        if certificate:
            found |= {"ssl_certfile": pki.path(f"{certificate}.crt"),
                      "ssl_keyfile": pki.path(f"{certificate}.key")}
    if sasl:
        found |= dict(zip(("sasl_mechanism", "sasl_plain_username", "sasl_plain_password"),
                          sasl, strict=True))
    return found


# (listener, settings_of keywords)
WAYS_IN = {
    "mutual-tls": ("MTLS", {"tls": True, "certificate": "alice"}),
    "sasl-plaintext-scram-sha-256": ("SASL_PLAINTEXT",
                                     {"tls": False, "sasl": ("SCRAM-SHA-256", "alice",
                                                             "alice-secret")}),
    "sasl-ssl-plain": ("SASL_SSL", {"tls": True, "sasl": ("PLAIN", "bob", "bob-secret")}),
}
MORE_WAYS_IN = {
    "tls-without-certificate": ("SSL", {"tls": True}),
    "sasl-plaintext-plain": ("SASL_PLAINTEXT",
                             {"tls": False, "sasl": ("PLAIN", "alice", "alice-secret")}),
    "sasl-plaintext-scram-sha-512": ("SASL_PLAINTEXT",
                                     {"tls": False, "sasl": ("SCRAM-SHA-512", "bob",
                                                             "bob-secret")}),
    "sasl-ssl-scram-sha-512": ("SASL_SSL", {"tls": True, "sasl": ("SCRAM-SHA-512", "alice",
                                                                  "alice-secret")}),
}


def new_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def round_trip(broker, pki, client: Client, listener: str, way: dict) -> None:
    topic = new_topic(client.name)
    bootstrap = broker.bootstrap_servers_of(listener)
    security = settings_of(client, pki, **way)
    client.produce(bootstrap, topic, RECORDS, security=security)
    got = client.consume(bootstrap, topic, len(RECORDS), security=security)
    assert [(c.key, c.value) for c in got] == [(r["key"], r["value"]) for r in RECORDS]


@pytest.mark.parametrize("way", WAYS_IN)
def test_every_client_produces_and_consumes_through_tls_and_sasl(broker, pki, client, way):
    listener, keywords = WAYS_IN[way]
    round_trip(broker, pki, client, listener, keywords)


@pytest.mark.parametrize("way", MORE_WAYS_IN)
def test_confluent_kafka_produces_and_consumes_every_other_way_in(broker, pki, way):
    listener, keywords = MORE_WAYS_IN[way]
    round_trip(broker, pki, CLIENTS["confluent-kafka"], listener, keywords)


# -- who a client is -------------------------------------------------------------------


def librdkafka(broker, pki, listener: str, **way) -> dict:
    return {"bootstrap.servers": broker.bootstrap_servers_of(listener),
            **settings_of(CLIENTS["confluent-kafka"], pki, **way)}


def produce_once(config: dict, topic: str, timeout: float = 10) -> confluent_kafka.KafkaError | None:
    """Produces one record and returns the first error the client reported, if any, as
    soon as it is reported."""
    errors: list[confluent_kafka.KafkaError] = []
    delivered: list[bool] = []
    producer = confluent_kafka.Producer({**config, "message.timeout.ms": int(timeout * 1000),
                                         "error_cb": errors.append})
    producer.produce(topic, b"value", on_delivery=lambda error, _: (
        errors.append(error) if error else delivered.append(True)))
    deadline = time.monotonic() + timeout + 5
    while not errors and not delivered and time.monotonic() < deadline:
        producer.poll(0.05)
    return errors[0] if errors else None


def record_count(broker, topic: str) -> int:
    """How many records ``topic``'s partition 0 holds, asked through the PLAINTEXT listener."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers,
                                         "group.id": "counter"})
    try:
        low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                                   timeout=TIMEOUT_SECONDS)
        return high - low
    except confluent_kafka.KafkaException:
        return 0  # no such topic
    finally:
        consumer.close()


def test_a_client_certificate_names_the_principal_through_the_mapping_rules(broker, pki):
    topic = new_topic("alice-only")
    allow_only(broker, "User:alice", topic)  # so who a client is taken to be decides
    assert produce_once(librdkafka(broker, pki, "MTLS", tls=True, certificate="alice"),
                        topic) is None
    refused = produce_once(librdkafka(broker, pki, "MTLS", tls=True, certificate="bob"), topic)
    assert refused.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    # the SASL user is the principal on SASL listeners
    assert produce_once(librdkafka(broker, pki, "SASL_SSL", tls=True,
                                   sasl=("PLAIN", "alice", "alice-secret")), topic) is None
    assert record_count(broker, topic) == 2


def allow_only(broker, principal: str, topic: str) -> None:
    """An ACL giving ``principal`` every operation on ``topic``, created through the
    PLAINTEXT listener."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                         AclOperation.ALL, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(TIMEOUT_SECONDS)


# -- refusals --------------------------------------------------------------------------


@pytest.mark.parametrize(("listener", "way", "message"), [
    ("SASL_PLAINTEXT", {"sasl": ("PLAIN", "alice", "wrong")}, "Invalid username or password"),
    ("SASL_PLAINTEXT", {"sasl": ("SCRAM-SHA-256", "alice", "wrong")}, "invalid credentials"),
    ("SASL_SSL", {"tls": True, "sasl": ("SCRAM-SHA-512", "mallory", "x")},
     "invalid credentials"),
    ("SASL_SSL", {"tls": True, "sasl": ("SCRAM-SHA-256", "alice", "alice-secret")},
     "Unsupported SASL mechanism"),
    # a failed TLS handshake reaches librdkafka's error_cb as "brokers are down" in TLS 1.3
    # (the client learns of it after its own handshake finished): what counts is the refusal
    ("MTLS", {"tls": True, "certificate": "expired"}, ""),
    ("MTLS", {"tls": True, "certificate": "stranger"}, ""),
    ("MTLS", {"tls": True}, ""),
    ("SSL", {"tls": False}, ""),
], ids=["wrong-password", "wrong-scram-password", "unknown-user", "mechanism-not-enabled",
        "expired-certificate", "certificate-of-another-ca", "no-certificate",
        "plaintext-client-on-tls-port"])
def test_a_client_that_cannot_authenticate_writes_nothing_and_others_carry_on(
        broker, pki, listener, way, message):
    topic = new_topic("refused")
    way = {"tls": False, **way}
    error = produce_once(librdkafka(broker, pki, listener, **way), topic, timeout=3)
    assert error is not None and message in error.str()
    assert record_count(broker, topic) == 0
    round_trip(broker, pki, CLIENTS["confluent-kafka"], "SASL_PLAINTEXT",
               {"tls": False, "sasl": ("PLAIN", "bob", "bob-secret")})


def raw_connection(broker, listener: str) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", broker.broker.bound_ports[listener]),
                                          timeout=TIMEOUT_SECONDS)
    return connection


def send(connection: socket.socket, frame: bytes) -> None:
    connection.sendall(struct.pack(">i", len(frame)) + frame)


def receive(connection: socket.socket, api_key: ApiKey, version: int):
    """The next response, decoded; None when the broker closed the connection instead."""
    header = connection.recv(4, socket.MSG_WAITALL)
    if not header:
        return None
    (size,) = struct.unpack(">i", header)
    frame = connection.recv(size, socket.MSG_WAITALL)
    cls = response_class(api_key, version)
    _, offset = entity_reader(cls.__header_schema__)(frame, 0)
    return entity_reader(cls)(frame, offset)[0]


def sasl_request(api_key: ApiKey, version: int, **fields) -> bytes:
    return encode_request(api_key, version, 1, build(request_class(api_key, version), **fields))


def authenticate(connection: socket.socket, mechanism: str, token: bytes):
    """SaslHandshake then one SaslAuthenticate; the SaslAuthenticate response."""
    send(connection, sasl_request(ApiKey.SASL_HANDSHAKE, 1, mechanism=mechanism))
    assert receive(connection, ApiKey.SASL_HANDSHAKE, 1).error_code is ErrorCode.none
    send(connection, sasl_request(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=token))
    return receive(connection, ApiKey.SASL_AUTHENTICATE, 2)


def test_a_request_before_authentication_closes_the_connection_and_reveals_nothing(broker):
    with raw_connection(broker, "SASL_PLAINTEXT") as connection:
        send(connection, metadata_request(12, None))
        assert connection.recv(4) == b""  # closed without an answer


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=st.binary(max_size=300), mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256"]))
def test_a_malformed_sasl_token_is_refused_and_the_broker_serves_on(broker, token, mechanism):
    with raw_connection(broker, "SASL_PLAINTEXT") as connection:
        answer = authenticate(connection, mechanism, token)
        assert answer is not None  # every token is answered, a bad one with an error
        if answer.error_code is not ErrorCode.none:
            assert answer.error_code is ErrorCode.sasl_authentication_failed
            assert connection.recv(4) == b""  # and the connection closes
        else:  # only what the mechanism would take: valid PLAIN, or a SCRAM first message
            assert (mechanism == "SCRAM-SHA-256"
                    or token in {f"\0{u}\0{p}".encode() for u, p in USERS.items()})
    with raw_connection(broker, "PLAINTEXT") as connection:
        send(connection, metadata_request(12, None))
        assert receive(connection, ApiKey.METADATA, 12).brokers


# -- certificates renewed without a restart ----------------------------------------------


def test_a_renewed_broker_certificate_applies_to_new_connections_without_restart(
        broker, pki, tmp_path):
    renewed_ca = CertificateAuthority.create("CN=renewed CA")
    write_file(tmp_path / "renewed-ca.pem", renewed_ca.certificate_pem())
    CertificateFiles.named(tmp_path, "renewed").write(renewed_ca.issue_server())
    trusting_renewed = {"bootstrap.servers": broker.bootstrap_servers_of("SSL"),
                        "security.protocol": "ssl",
                        "ssl.ca.location": str(tmp_path / "renewed-ca.pem")}
    assert produce_once(trusting_renewed, new_topic("renewed"), timeout=3) is not None

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("listener.name.ssl.ssl.keystore.location", str(tmp_path / "renewed.pem"),
                    incremental_operation=confluent_kafka.admin.AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_SECONDS)
    try:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while (error := produce_once(trusting_renewed, new_topic("renewed"), timeout=3)) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        assert error is None
        # the other TLS listeners keep the certificate they had
        round_trip(broker, pki, CLIENTS["confluent-kafka"], "MTLS",
                   {"tls": True, "certificate": "alice"})
    finally:
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry("listener.name.ssl.ssl.keystore.location", "",
                        incremental_operation=confluent_kafka.admin.AlterConfigOpType.DELETE)])
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_SECONDS)


# -- re-authentication (KIP-368) -------------------------------------------------------


def test_sessions_end_after_connections_max_reauth_ms_and_librdkafka_renews_them(tmp_path,
                                                                                caplog):
    caplog.set_level(logging.DEBUG, logger="odradek.server")
    configs = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
               "inter.broker.listener.name": "SASL_PLAINTEXT",
               "sasl.enabled.mechanisms": "PLAIN",
               "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
               "connections.max.reauth.ms": 1000}
    with EmbeddedBroker(tmp_path, **configs) as broker:
        config = {"bootstrap.servers": broker.bootstrap_servers,
                  "security.protocol": "sasl_plaintext", "sasl.mechanism": "PLAIN",
                  "sasl.username": "alice", "sasl.password": "alice-secret"}
        errors: list = []
        producer = confluent_kafka.Producer({**config, "error_cb": errors.append,
                                             "linger.ms": 0})
        delivered = []
        deadline = time.monotonic() + 4  # four session lifetimes
        while time.monotonic() < deadline:
            producer.produce("renewed", b"v", on_delivery=lambda e, m: delivered.append(e))
            producer.poll(0.1)
        assert producer.flush(TIMEOUT_SECONDS) == 0
        assert delivered and not any(delivered) and not errors
        # on the connections it had: renewed sessions, none closed for having expired
        assert sum("re-authenticated" in r.message for r in caplog.records) >= 2
        assert not any("SASL session expired" in r.message for r in caplog.records)

        # a client that does not re-authenticate is closed at its first request after
        with raw_connection(broker, "SASL_PLAINTEXT") as connection:
            answer = authenticate(connection, "PLAIN", b"\0alice\0alice-secret")
            assert answer.session_lifetime == datetime.timedelta(seconds=1)
            send(connection, metadata_request(12, None))
            assert receive(connection, ApiKey.METADATA, 12) is not None
            time.sleep(1.2)
            send(connection, metadata_request(12, None))
            assert connection.recv(4) == b""
