"""``odradek users scram``, ``odradek acls`` and ``odradek quotas``, run through typer's runner
against one broker that authenticates (SASL_PLAINTEXT, PLAIN and SCRAM-SHA-256) and
authorizes (ACLs, ``User:admin`` its super user), with the -X properties a user would give;
and the TLS and SASL settings the CLI's own requests take from those properties."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator

import confluent_kafka
import pytest
import typer
from secured import librdkafka, secured_broker
from typer.testing import CliRunner

from odradek.cli.broker_requests import client_security
from odradek.cli.main import app
from odradek.client.connection import ClientSecurity
from odradek.testing.embedded import EmbeddedBroker

runner = CliRunner()

TIMEOUT_SECONDS = 10


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[EmbeddedBroker]:
    with secured_broker(tmp_path_factory.mktemp("secured"),
                        **{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"}) as broker:
        yield broker


def odradek(broker: EmbeddedBroker, *args: str, user: str = "admin"):
    """The command run as a user runs it: -b and the user's -X properties (SASL/PLAIN)."""
    properties = [item for key, value in librdkafka(broker, user).items()
                  if key != "bootstrap.servers" for item in ("-X", f"{key}={value}")]
    return runner.invoke(app, [*args, "-b", broker.bootstrap_servers, *properties])


def ok(broker: EmbeddedBroker, *args: str, user: str = "admin"):
    result = odradek(broker, *args, user=user)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result


def rows(broker: EmbeddedBroker, *args: str, user: str = "admin") -> list[list[str]]:
    """The rows of the table a command prints, each split into its cells."""
    lines = ok(broker, *args, user=user).stdout.splitlines()
    ruled = [i for i, line in enumerate(lines) if line.lstrip().startswith("─")]
    if not ruled:
        return []
    return [line.split() for line in lines[ruled[0] + 1:] if line.strip()]


def assert_one_error_line(result, *fragments: str) -> None:
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ")
    for fragment in fragments:
        assert fragment in line, line


def authenticates_with_scram(broker: EmbeddedBroker, user: str, password: str) -> bool:
    """Whether a confluent-kafka producer logging in as ``user`` with SCRAM-SHA-256 gets
    metadata (it may see no topics: authenticating is what is asked)."""
    failures: list[confluent_kafka.KafkaError] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password,
        "error_cb": failures.append, "log_level": 0})
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while time.monotonic() < deadline:  # until metadata comes or authentication fails
        producer.poll(0)  # serves error_cb
        if any(f.code() == confluent_kafka.KafkaError._AUTHENTICATION for f in failures):
            return False
        try:
            producer.list_topics(timeout=0.5)
            return True
        except confluent_kafka.KafkaException:
            pass
    return False


# --- users scram -----------------------------------------------------------------------


def test_a_scram_credential_set_is_listed_lets_its_user_authenticate_until_deleted(broker):
    assert ok(broker, "users", "scram", "set", "carol", "--mechanism", "SCRAM-SHA-256",
              "--iterations", "8192", "--password", "carol-secret").stdout == \
        "Set the SCRAM-SHA-256 credential of user carol.\n"

    assert rows(broker, "users", "scram", "list") == [["carol", "SCRAM-SHA-256", "8192"]]
    assert rows(broker, "users", "scram", "list", "carol") == [
        ["carol", "SCRAM-SHA-256", "8192"]]
    assert authenticates_with_scram(broker, "carol", "carol-secret")
    assert not authenticates_with_scram(broker, "carol", "wrong-secret")

    assert ok(broker, "users", "scram", "delete", "carol", "--mechanism",
              "SCRAM-SHA-256").stdout == "Deleted the SCRAM-SHA-256 credential of user carol.\n"

    assert rows(broker, "users", "scram", "list") == []
    assert not authenticates_with_scram(broker, "carol", "carol-secret")
    assert_one_error_line(odradek(broker, "users", "scram", "list", "carol"),
                          "user 'carol'", "RESOURCE_NOT_FOUND")
    assert_one_error_line(odradek(broker, "users", "scram", "delete", "carol", "--mechanism",
                                  "SCRAM-SHA-256"), "user 'carol'", "RESOURCE_NOT_FOUND")


def test_a_scram_credential_with_too_few_iterations_is_refused(broker):
    result = odradek(broker, "users", "scram", "set", "dave", "--mechanism", "SCRAM-SHA-256",
                     "--iterations", "1000", "--password", "dave-secret")

    assert_one_error_line(result, "user 'dave'", "Too few iterations", "UNACCEPTABLE_CREDENTIAL")


def test_an_unknown_scram_mechanism_is_refused_before_asking_the_broker(broker):
    result = odradek(broker, "users", "scram", "set", "dave", "--mechanism", "SCRAM-MD5",
                     "--password", "dave-secret")

    assert_one_error_line(result, "unknown SCRAM mechanism 'SCRAM-MD5'", "SCRAM-SHA-512")


# --- acls ------------------------------------------------------------------------------


def test_acls_added_are_listed_and_removed(broker):
    added = ok(broker, "acls", "add", "--allow-principal", "User:alice", "--operation", "read",
               "--operation", "Describe", "--topic", "orders", "--group", "billing")
    assert "added 4 ACLs" in added.stderr
    ok(broker, "acls", "add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.7",
       "--operation", "Write", "--topic", "orders-", "--resource-pattern-type", "prefixed")

    assert rows(broker, "acls", "list", "--topic", "orders") == [
        ["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"],
        ["TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"]]
    assert rows(broker, "acls", "list", "--topic", "orders-eu",
                "--resource-pattern-type", "match") == [
        ["TOPIC", "orders-", "PREFIXED", "User:bob", "10.0.0.7", "WRITE", "DENY"]]
    assert rows(broker, "acls", "list", "--principal", "User:alice") == [
        ["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"],
        ["TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"],
        ["GROUP", "billing", "LITERAL", "User:alice", "*", "READ", "ALLOW"],
        ["GROUP", "billing", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"]]

    assert rows(broker, "acls", "remove", "--allow-principal", "User:alice",
                "--operation", "Read", "--topic", "orders") == [
        ["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"]]
    assert rows(broker, "acls", "remove", "--topic", "orders", "--group", "billing",
                "--topic", "orders-") == [
        ["TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"],
        ["TOPIC", "orders-", "PREFIXED", "User:bob", "10.0.0.7", "WRITE", "DENY"],
        ["GROUP", "billing", "LITERAL", "User:alice", "*", "READ", "ALLOW"],
        ["GROUP", "billing", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"]]
    assert rows(broker, "acls", "list") == []


def test_producer_and_consumer_acls_are_those_kafka_acls_grants(broker):
    ok(broker, "acls", "add", "--producer", "--idempotent", "--allow-principal", "User:alice",
       "--topic", "payments", "--transactional-id", "payer")
    ok(broker, "acls", "add", "--consumer", "--allow-principal", "User:bob",
       "--topic", "payments", "--group", "ledger")

    assert rows(broker, "acls", "list") == [
        ["TOPIC", "payments", "LITERAL", "User:alice", "*", "WRITE", "ALLOW"],
        ["TOPIC", "payments", "LITERAL", "User:alice", "*", "CREATE", "ALLOW"],
        ["TOPIC", "payments", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"],
        ["TOPIC", "payments", "LITERAL", "User:bob", "*", "READ", "ALLOW"],
        ["TOPIC", "payments", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"],
        ["GROUP", "ledger", "LITERAL", "User:bob", "*", "READ", "ALLOW"],
        ["CLUSTER", "kafka-cluster", "LITERAL", "User:alice", "*", "IDEMPOTENT_WRITE", "ALLOW"],
        ["TRANSACTIONAL_ID", "payer", "LITERAL", "User:alice", "*", "WRITE", "ALLOW"],
        ["TRANSACTIONAL_ID", "payer", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"]]

    # What they grant works: alice creates the topic by producing to it.
    producer = confluent_kafka.Producer(librdkafka(broker, "alice", **{
        "transactional.id": "payer", "log_level": 0}))
    producer.init_transactions(TIMEOUT_SECONDS)
    producer.begin_transaction()
    producer.produce("payments", b"paid")
    producer.commit_transaction(TIMEOUT_SECONDS)

    ok(broker, "acls", "remove", "--producer", "--idempotent", "--allow-principal",
       "User:alice", "--topic", "payments", "--transactional-id", "payer")
    ok(broker, "acls", "remove", "--consumer", "--allow-principal", "User:bob",
       "--topic", "payments", "--group", "ledger")
    assert rows(broker, "acls", "list") == []


def test_an_unknown_operation_is_refused_with_kafkas_names(broker):
    result = odradek(broker, "acls", "add", "--allow-principal", "User:alice",
                     "--operation", "Fly", "--topic", "orders")

    assert_one_error_line(result, "unknown operation 'Fly'", "Read", "IdempotentWrite")


def test_an_operation_the_resource_type_lacks_is_refused(broker):
    result = odradek(broker, "acls", "add", "--allow-principal", "User:alice",
                     "--operation", "IdempotentWrite", "--group", "billing")

    assert_one_error_line(result, "ResourceType GROUP only supports operations",
                          "Read, Delete, Describe")


# --- quotas ----------------------------------------------------------------------------


def test_quotas_set_are_described_and_deleted(broker):
    assert ok(broker, "quotas", "set", "--user", "alice", "--add", "producer_byte_rate=1024",
              "--add", "request_percentage=12.5").stdout == \
        "Altered the quotas of user 'alice'.\n"
    ok(broker, "quotas", "set", "--user-default", "--client-id", "reports",
       "--add", "consumer_byte_rate=2048")

    assert rows(broker, "quotas", "describe", "--user", "alice") == [
        ["alice", "producer_byte_rate", "1024"], ["alice", "request_percentage", "12.5"]]
    assert rows(broker, "quotas", "describe", "--user-default", "--client-id", "reports") == [
        ["<default>", "reports", "consumer_byte_rate", "2048"]]
    assert len(rows(broker, "quotas", "describe")) == 3

    ok(broker, "quotas", "set", "--user", "alice", "--delete", "producer_byte_rate")
    assert rows(broker, "quotas", "describe", "--user", "alice") == [
        ["alice", "request_percentage", "12.5"]]

    ok(broker, "quotas", "set", "--user", "alice", "--delete", "request_percentage")
    ok(broker, "quotas", "set", "--user-default", "--client-id", "reports",
       "--delete", "consumer_byte_rate")
    described = ok(broker, "quotas", "describe")
    assert described.stdout == ""
    assert "no quotas" in described.stderr


def test_a_quota_key_kafka_does_not_know_is_refused(broker):
    result = odradek(broker, "quotas", "set", "--client-id", "reports",
                     "--add", "fetch_byte_rate=10")

    assert_one_error_line(result, "client-id 'reports'", "INVALID_REQUEST")


# --- what a user without ACLs is told --------------------------------------------------


@pytest.mark.parametrize("command", [
    ["users", "scram", "list"],
    ["users", "scram", "set", "bob", "--mechanism", "SCRAM-SHA-256", "--password", "s3cret"],
    ["acls", "list"],
    ["acls", "add", "--allow-principal", "User:bob", "--operation", "All", "--cluster"],
    ["acls", "remove", "--topic", "orders"],
    ["quotas", "describe"],
    ["quotas", "set", "--user", "bob", "--add", "producer_byte_rate=1000000"],
], ids=" ".join)
def test_a_user_without_acls_is_told_the_cluster_refused_in_one_line(broker, command):
    result = odradek(broker, *command, user="bob")

    assert_one_error_line(result, "Cluster authorization failed", "CLUSTER_AUTHORIZATION_FAILED")


# --- how the requests the CLI sends itself are secured ------------------------------------


def test_the_sasl_properties_of_librdkafka_log_the_cli_s_own_connections_in():
    assert client_security({}) is None
    assert client_security({"security.protocol": "PLAINTEXT"}) is None
    assert client_security({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": "alice-secret"}) == ClientSecurity(
        None, "SCRAM-SHA-512", "alice", "alice-secret")


def test_the_tls_properties_of_librdkafka_pass_a_broker_s_mutual_tls_handshake(tmp_path):
    certs = tmp_path / "certs"
    assert runner.invoke(app, ["certs", "create", "-d", str(certs)]).exit_code == 0
    properties = {"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
                  "ssl.certificate.location": str(certs / "client.crt"),
                  "ssl.key.location": str(certs / "client.key")}
    broker_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    broker_context.load_cert_chain(certs / "broker.pem")
    broker_context.load_verify_locations(certs / "ca.pem")
    broker_context.verify_mode = ssl.CERT_REQUIRED

    security = client_security(properties)

    assert security.sasl_mechanism is None
    assert security.ssl_context.check_hostname  # librdkafka's default
    client_certificate = handshake(security.ssl_context, broker_context, "localhost")
    assert dict(part[0] for part in client_certificate["subject"]) == {"commonName": "client"}
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(security.ssl_context, broker_context, "kafka.example.com")
    assert handshake(client_security({**properties, "ssl.endpoint.identification.algorithm":
                                      "none"}).ssl_context, broker_context, "kafka.example.com")


def handshake(client: ssl.SSLContext, server: ssl.SSLContext, server_name: str) -> dict:
    """A TLS handshake between the two contexts in memory; the client's certificate, as the
    server saw it."""
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    client_side = client.wrap_bio(client_in, client_out, server_hostname=server_name)
    server_side = server.wrap_bio(server_in, server_out, server_side=True)
    done = {client_side: False, server_side: False}
    while not all(done.values()):
        for side in done:
            try:
                side.do_handshake()
                done[side] = True
            except ssl.SSLWantReadError:
                pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    return server_side.getpeercert()


def test_a_sasl_mechanism_the_cli_cannot_speak_is_one_error_line(capsys):
    with pytest.raises(typer.Exit):
        client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"})

    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: sasl.mechanism=GSSAPI is not supported")
