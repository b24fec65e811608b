"""A local CA and its certificates: what a broker's SSL listener and its clients check.

The strongest check is a real TLS handshake between Python's ``ssl`` contexts loaded from the
written files, as a broker with ``ssl.client.auth=required`` and a client would load them;
it runs over memory buffers (the same bytes a socket would carry, with no socket or thread).
Verification is strict (OpenSSL's X509_STRICT, Python 3.13's default).
"""

from __future__ import annotations

import ssl
import stat
from datetime import datetime, timedelta, timezone
from ipaddress import ip_address

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key, pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import (
    Criticality,
    DNSName,
    ExtensionPolicy,
    IPAddress,
    PolicyBuilder,
    Store,
    VerificationError,
)

from odradek.security.certificates import (
    CertificateAuthority,
    CertificateFiles,
    IssuedCertificate,
    KeyAlgorithm,
    Validity,
    write_file,
)

# A TLS 1.3 handshake takes two flights each way; a few more rounds cost nothing.
HANDSHAKE_ROUNDS = 10
NOW = datetime.now(timezone.utc)


@pytest.fixture
def ca() -> CertificateAuthority:
    return CertificateAuthority.create("CN=test CA,O=Example")


def handshake(server: ssl.SSLContext, client: ssl.SSLContext,
              server_hostname: str = "localhost") -> ssl.SSLObject:
    """Runs a handshake to its end and returns the server's side; raises the SSLError of the
    side that refused. In TLS 1.3 the client finishes first, so a refused client certificate
    shows on the server's side."""
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    client_side = client.wrap_bio(client_in, client_out, server_hostname=server_hostname)
    server_side = server.wrap_bio(server_in, server_out, server_side=True)
    pending = [client_side, server_side]
    for _ in range(HANDSHAKE_ROUNDS):
        for side in list(pending):
            try:
                side.do_handshake()
                pending.remove(side)
            except ssl.SSLWantReadError:
                pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        if not pending:
            return server_side
    raise AssertionError("the handshake did not finish")


def broker_context(keystore, truststore, password: str | None = None) -> ssl.SSLContext:
    """A broker's listener with ssl.keystore.location, ssl.truststore.location and
    ssl.client.auth=required."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    context.load_cert_chain(keystore, password=password)
    context.load_verify_locations(truststore)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_context(truststore, certificate, key, password: str | None = None) -> ssl.SSLContext:
    """A client with ssl.ca.location, ssl.certificate.location and ssl.key.location (or
    ssl_cafile, ssl_certfile and ssl_keyfile); it checks the broker's host name."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    context.load_verify_locations(truststore)
    context.load_cert_chain(certificate, key, password=password)
    return context


def write_all(directory, ca: CertificateAuthority, broker: IssuedCertificate,
              client: IssuedCertificate, password: str | None = None):
    """The CA's certificate and the broker's and client's files, as ``odradek certs create``
    lays them out."""
    write_file(directory / "ca.pem", ca.certificate_pem())
    broker_files = CertificateFiles.named(directory, "broker")
    client_files = CertificateFiles.named(directory, "client")
    broker_files.write(broker, password)
    client_files.write(client, password)
    return directory / "ca.pem", broker_files, client_files


def verify_client(ca: CertificateAuthority, issued: IssuedCertificate) -> None:
    """cryptography's verification of a client certificate; a client certificate names its
    subject and has no subject alternative name, which the Web PKI defaults require."""
    leaf_policy = ExtensionPolicy.webpki_defaults_ee().may_be_present(
        x509.SubjectAlternativeName, Criticality.AGNOSTIC, None)
    (PolicyBuilder().store(Store([ca.certificate]))
     .extension_policies(ca_policy=ExtensionPolicy.webpki_defaults_ca(), ee_policy=leaf_policy)
     .build_client_verifier().verify(issued.certificate, []))


@pytest.mark.parametrize("key_algorithm", list(KeyAlgorithm))
@pytest.mark.parametrize("server_hostname", ["localhost", "127.0.0.1"])
@pytest.mark.parametrize("password", [None, "s3cret"])
def test_a_client_and_a_broker_loaded_from_the_files_complete_mutual_tls(
        tmp_path, ca, key_algorithm, server_hostname, password):
    broker = ca.issue_server(key_algorithm=key_algorithm)
    client = ca.issue_client("CN=alice,OU=Eng,O=Example", key_algorithm=key_algorithm)
    truststore, broker_files, client_files = write_all(tmp_path, ca, broker, client, password)

    server_side = handshake(
        broker_context(broker_files.keystore, truststore, password),
        client_context(truststore, client_files.certificate, client_files.private_key,
                       password),
        server_hostname)

    peer = x509.load_der_x509_certificate(server_side.getpeercert(binary_form=True))
    assert peer.subject.rfc4514_string() == "CN=alice,OU=Eng,O=Example"


def test_the_broker_certificate_names_its_hosts_and_serves_as_server_and_client(ca):
    broker = ca.issue_server(["broker-1.example.com", "10.0.0.7", "::1"])

    names = broker.certificate.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["broker-1.example.com"]
    assert names.get_values_for_type(x509.IPAddress) == [ip_address("10.0.0.7"),
                                                         ip_address("::1")]
    assert broker.certificate.subject.rfc4514_string() == "CN=broker-1.example.com"
    usages = broker.certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    store = PolicyBuilder().store(Store([ca.certificate]))
    for host in [DNSName("broker-1.example.com"), IPAddress(ip_address("10.0.0.7"))]:
        assert store.build_server_verifier(host).verify(broker.certificate, [])
    with pytest.raises(VerificationError):
        store.build_server_verifier(DNSName("broker-2.example.com")).verify(
            broker.certificate, [])


def test_the_broker_certificate_defaults_to_localhost_and_the_loopback_address(ca):
    names = ca.issue_server().certificate.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value

    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert names.get_values_for_type(x509.IPAddress) == [ip_address("127.0.0.1")]


def test_a_client_certificate_has_the_subject_it_was_given_and_client_usage_only(ca):
    alice = ca.issue_client("CN=alice,OU=Eng,O=Example")
    bob = ca.issue_client(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bob")]))

    assert alice.certificate.subject.rfc4514_string() == "CN=alice,OU=Eng,O=Example"
    assert bob.certificate.subject.rfc4514_string() == "CN=bob"
    usages = alice.certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    verify_client(ca, alice)


def test_the_ca_is_a_self_signed_ca_that_only_signs_end_entities(ca):
    certificate = ca.certificate

    assert certificate.subject == certificate.issuer
    assert certificate.subject.rfc4514_string() == "CN=test CA,O=Example"
    constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca and constraints.value.path_length == 0
    assert certificate.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    certificate.verify_directly_issued_by(certificate)


def test_an_expired_broker_certificate_is_refused_by_its_clients(tmp_path, ca):
    expired = Validity(NOW - timedelta(days=10), NOW - timedelta(days=1))
    broker = ca.issue_server(validity=expired)
    truststore, broker_files, client_files = write_all(tmp_path, ca, broker,
                                                       ca.issue_client("CN=alice"))

    assert broker.certificate.not_valid_after_utc < NOW
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate has expired"):
        handshake(broker_context(broker_files.keystore, truststore),
                  client_context(truststore, client_files.certificate, client_files.private_key))
    with pytest.raises(VerificationError):
        PolicyBuilder().store(Store([ca.certificate])).build_server_verifier(
            DNSName("localhost")).verify(broker.certificate, [])


def test_a_client_certificate_from_another_ca_is_refused_by_the_broker(tmp_path, ca):
    other_ca = CertificateAuthority.create("CN=another CA")
    truststore, broker_files, client_files = write_all(
        tmp_path, ca, ca.issue_server(), other_ca.issue_client("CN=mallory"))

    with pytest.raises(ssl.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        handshake(broker_context(broker_files.keystore, truststore),
                  client_context(truststore, client_files.certificate, client_files.private_key))
    with pytest.raises(VerificationError):
        verify_client(ca, other_ca.issue_client("CN=mallory"))


def test_a_broker_certificate_from_another_ca_is_refused_by_its_clients(tmp_path, ca):
    other_ca = CertificateAuthority.create("CN=another CA")
    truststore, broker_files, client_files = write_all(
        tmp_path, ca, other_ca.issue_server(), ca.issue_client("CN=alice"))

    with pytest.raises(ssl.SSLCertVerificationError, match="CERTIFICATE_VERIFY_FAILED"):
        handshake(broker_context(broker_files.keystore, truststore),
                  client_context(truststore, client_files.certificate, client_files.private_key))


def test_an_encrypted_private_key_loads_only_with_its_password(ca):
    issued = ca.issue_client("CN=alice")
    encrypted = issued.private_key_pem("s3cret")

    assert encrypted.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    with pytest.raises(TypeError):
        load_pem_private_key(encrypted, password=None)
    with pytest.raises(ValueError):
        load_pem_private_key(encrypted, password=b"wrong")
    loaded = load_pem_private_key(encrypted, password=b"s3cret")
    assert loaded.public_key() == issued.private_key.public_key()
    assert issued.private_key_pem().startswith(b"-----BEGIN PRIVATE KEY-----")


def test_a_pkcs12_keystore_round_trips_the_key_and_the_chain(ca):
    broker = ca.issue_server()

    loaded = pkcs12.load_pkcs12(broker.pkcs12("s3cret", alias="broker"), b"s3cret")

    assert loaded.key.public_key() == broker.private_key.public_key()
    assert loaded.cert.certificate == broker.certificate
    assert loaded.cert.friendly_name == b"broker"
    assert [extra.certificate for extra in loaded.additional_certs] == [ca.certificate]
    with pytest.raises(ValueError):
        pkcs12.load_pkcs12(broker.pkcs12("s3cret"), b"wrong")


def test_keys_and_keystores_are_readable_by_their_owner_only(tmp_path, ca):
    files = CertificateFiles.named(tmp_path, "broker")

    files.write(ca.issue_server(), password="s3cret")

    assert files.written("s3cret") == [tmp_path / name for name in
                                       ["broker.crt", "broker.key", "broker.pem", "broker.p12"]]
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in tmp_path.iterdir()}
    assert modes == {"broker.crt": 0o644, "broker.key": 0o600, "broker.pem": 0o600,
                     "broker.p12": 0o600}


def test_without_a_password_no_pkcs12_keystore_is_written(tmp_path, ca):
    files = CertificateFiles.named(tmp_path, "alice")

    files.write(ca.issue_client("CN=alice"))

    assert sorted(path.name for path in tmp_path.iterdir()) == ["alice.crt", "alice.key",
                                                                "alice.pem"]
    assert files.written() == [files.certificate, files.private_key, files.keystore]


def test_rsa_keys_are_2048_bits_and_may_encipher(ca):
    broker = ca.issue_server(key_algorithm=KeyAlgorithm.RSA_2048)

    assert isinstance(broker.private_key, rsa.RSAPrivateKey)
    assert broker.private_key.key_size == 2048
    assert broker.certificate.extensions.get_extension_for_class(
        x509.KeyUsage).value.key_encipherment


def test_validity_in_days_starts_a_little_before_now():
    validity = Validity.days(30, now=NOW)

    assert NOW - timedelta(minutes=10) < validity.not_before < NOW
    assert validity.not_after == NOW + timedelta(days=30)


@pytest.mark.parametrize("subject, message", [
    ("alice", "not a distinguished name: 'alice'"),
    ("", "must not be empty"),
])
def test_a_subject_that_is_not_a_distinguished_name_is_refused(ca, subject, message):
    with pytest.raises(ValueError, match=message):
        ca.issue_client(subject)


def test_a_validity_window_that_ends_before_it_starts_is_refused():
    with pytest.raises(ValueError, match="must be after"):
        Validity(NOW, NOW - timedelta(days=1))
