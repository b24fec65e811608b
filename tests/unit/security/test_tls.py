"""TLS contexts from Kafka's ssl.* configs: what each form of store gives, and the errors a
bad config gets, naming the config."""

from __future__ import annotations

import ssl

import pytest

from odradek.security.certificates import CertificateAuthority
from odradek.security.tls import (
    ReloadableSslContext,
    SslConfigError,
    client_context,
    openssl_cipher_name,
    server_context,
)
from odradek.server.config_defs import BROKER_CONFIGS


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.create()


def configs(**values):
    """A listener's ssl.* values: the defaults of BROKER_CONFIGS with ``values`` on top."""
    values = {name.replace("_", "."): value for name, value in values.items()}
    return lambda name: values.get(name, BROKER_CONFIGS[name].default)


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> str:
    """A TLS handshake in memory; the protocol version agreed."""
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server_side = server.wrap_bio(server_in, server_out, server_side=True)
    client_side = client.wrap_bio(client_in, client_out, server_hostname="localhost")
    for _ in range(10):
        for side in (client_side, server_side):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    return client_side.version()


def test_an_in_line_pem_keystore_serves_clients_trusting_the_ca(ca, tmp_path):
    broker = ca.issue_server()
    server = server_context(configs(ssl_keystore_type="PEM",
                                    ssl_keystore_key=broker.private_key_pem().decode(),
                                    ssl_keystore_certificate_chain=broker.certificate_pem().decode()))
    (tmp_path / "ca.pem").write_bytes(ca.certificate_pem())
    client = client_context(configs(ssl_truststore_type="PEM",
                                    ssl_truststore_location=str(tmp_path / "ca.pem")))
    assert handshake(server, client) == "TLSv1.3"


def test_a_pkcs12_keystore_with_its_password_serves_too(ca, tmp_path):
    (tmp_path / "broker.p12").write_bytes(ca.issue_server().pkcs12("secret"))
    (tmp_path / "ca.pem").write_bytes(ca.certificate_pem())
    server = server_context(configs(ssl_keystore_type="PKCS12",
                                    ssl_keystore_location=str(tmp_path / "broker.p12"),
                                    ssl_keystore_password="secret"))
    client = client_context(configs(ssl_truststore_type="PEM",
                                    ssl_truststore_location=str(tmp_path / "ca.pem"),
                                    ssl_enabled_protocols=("TLSv1.2",)))
    assert handshake(server, client) == "TLSv1.2"


@pytest.mark.parametrize(("values", "config", "message"), [
    ({}, "ssl.keystore.location", "A TLS listener needs a keystore"),
    ({"ssl_keystore_location": "/nonexistent.pem", "ssl_keystore_type": "PEM"},
     "ssl.keystore.location", "cannot read /nonexistent.pem"),
    ({"ssl_keystore_location": "/x.jks"}, "ssl.keystore.type",
     "ssl.keystore.type=JKS is not supported"),
    ({"ssl_keystore_type": "PEM", "ssl_keystore_key": "x"}, "ssl.keystore.certificate.chain",
     "needs both ssl.keystore.key and ssl.keystore.certificate.chain"),
])
def test_a_bad_keystore_config_is_refused_naming_the_config(values, config, message):
    with pytest.raises(SslConfigError, match=message) as refused:
        server_context(configs(**values))
    assert refused.value.name == config


def test_client_auth_without_a_truststore_is_refused(ca):
    broker = ca.issue_server()
    with pytest.raises(SslConfigError, match="ssl.client.auth=required needs a truststore"):
        server_context(configs(ssl_keystore_type="PEM", ssl_client_auth="required",
                               ssl_keystore_key=broker.private_key_pem().decode(),
                               ssl_keystore_certificate_chain=broker.certificate_pem().decode()))


@pytest.mark.parametrize(("iana", "openssl"), [
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"),
    ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
])
def test_cipher_suites_are_named_as_java_names_them_or_as_openssl_does(iana, openssl):
    assert openssl_cipher_name(iana) == openssl


def test_a_reloadable_context_hands_new_connections_the_replaced_key_material(ca):
    first, second = ca.issue_server(), ca.issue_server(["renewed.example"])

    def context(issued):
        return server_context(configs(ssl_keystore_type="PEM",
                                      ssl_keystore_key=issued.private_key_pem().decode(),
                                      ssl_keystore_certificate_chain=issued.certificate_pem().decode()))

    reloadable = ReloadableSslContext(context(first))
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(cadata=ca.certificate_pem().decode())
    assert handshake(reloadable, client) == "TLSv1.3"  # localhost is in the first
    reloadable.replace(context(second))
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(reloadable, client)  # the renewed one names another host
