"""``odradek certs create``, run through typer's runner into a temporary directory: the files
it writes, the settings it prints, and its refusal to overwrite without --force."""

from __future__ import annotations

import ssl
from datetime import timedelta

from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key, pkcs12
from typer.testing import CliRunner

from odradek.cli.main import app

runner = CliRunner()


def certs_create(*args: str):
    return runner.invoke(app, ["certs", "create", *args])


def printed_settings(stdout: str) -> list[dict[str, str]]:
    """The printed property blocks (server.properties, then one per client), each a dict."""
    blocks: list[dict[str, str]] = []
    for line in stdout.splitlines():
        if line.startswith("# "):
            blocks.append({})
        elif "=" in line and blocks:
            key, _, value = line.partition("=")
            blocks[-1][key] = value
    return blocks


def load_certificate(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_create_writes_a_ca_a_broker_keystore_and_a_client_and_prints_their_settings(tmp_path):
    certs = tmp_path / "certs"

    result = certs_create("--directory", str(certs))

    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in certs.iterdir()) == [
        "broker.crt", "broker.key", "broker.pem", "ca.key", "ca.pem",
        "client.crt", "client.key", "client.pem"]
    server, client = printed_settings(result.stdout)
    assert server == {
        "listeners": "SSL://127.0.0.1:9093",
        "listener.security.protocol.map": "SSL:SSL",
        "inter.broker.listener.name": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "broker.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.client.auth": "required",
    }
    assert client == {
        "security.protocol": "ssl",
        "ssl.ca.location": str(certs / "ca.pem"),
        "ssl.certificate.location": str(certs / "client.crt"),
        "ssl.key.location": str(certs / "client.key"),
    }
    # What a broker and a client do with these settings: each load succeeds only when the
    # key matches its certificate.
    broker_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH,
                                                cafile=server["ssl.truststore.location"])
    broker_context.load_cert_chain(server["ssl.keystore.location"])
    client_context = ssl.create_default_context(cafile=client["ssl.ca.location"])
    client_context.load_cert_chain(client["ssl.certificate.location"],
                                   client["ssl.key.location"])
    ca = load_certificate(certs / "ca.pem")
    broker = load_certificate(certs / "broker.crt")
    broker.verify_directly_issued_by(ca)
    load_certificate(certs / "client.crt").verify_directly_issued_by(ca)
    names = broker.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(name.value) for name in names] == ["localhost", "127.0.0.1"]


def test_create_with_clients_hosts_days_and_a_key_password(tmp_path):
    certs = tmp_path / "certs"

    result = certs_create("-d", str(certs), "--client", "alice", "--client", "bob",
                          "--broker-host", "kafka.example.com", "--broker-host", "10.0.0.7",
                          "--days", "7", "--key-password", "s3cret")

    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in certs.iterdir()) == [
        "alice.crt", "alice.key", "alice.p12", "alice.pem",
        "bob.crt", "bob.key", "bob.p12", "bob.pem",
        "broker.crt", "broker.key", "broker.p12", "broker.pem", "ca.key", "ca.pem"]
    server, alice, bob = printed_settings(result.stdout)
    assert server["ssl.key.password"] == alice["ssl.key.password"] == "s3cret"
    assert bob["ssl.certificate.location"] == str(certs / "bob.crt")
    for key in ["ca.key", "broker.key", "alice.key"]:
        load_pem_private_key((certs / key).read_bytes(), password=b"s3cret")
    keystore = pkcs12.load_pkcs12((certs / "broker.p12").read_bytes(), b"s3cret")
    broker = keystore.cert.certificate
    names = broker.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(name.value) for name in names] == ["kafka.example.com", "10.0.0.7"]
    assert broker.not_valid_after_utc - broker.not_valid_before_utc < timedelta(days=7, hours=1)
    alice_certificate = load_certificate(certs / "alice.crt")
    assert alice_certificate.subject.rfc4514_string() == "CN=alice"
    assert "User:CN=alice" in result.stdout


def test_create_refuses_to_overwrite_files_without_force(tmp_path):
    certs = tmp_path / "certs"
    assert certs_create("-d", str(certs)).exit_code == 0
    ca_before = (certs / "ca.pem").read_bytes()

    refused = certs_create("-d", str(certs))

    assert refused.exit_code == 1
    assert refused.stdout == ""
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith("error: ")
    assert "ca.pem, ca.key, broker.crt" in line and "--force" in line
    assert (certs / "ca.pem").read_bytes() == ca_before

    forced = certs_create("-d", str(certs), "--force")

    assert forced.exit_code == 0, forced.output
    assert (certs / "ca.pem").read_bytes() != ca_before


def test_a_client_name_that_cannot_name_files_is_refused_before_anything_is_written(tmp_path):
    certs = tmp_path / "certs"

    for name in ["../alice", "ca", "broker"]:
        result = certs_create("-d", str(certs), "--client", name)

        assert result.exit_code == 1
        assert result.stderr.startswith(f"error: --client {name!r}")
        assert not certs.exists()
