"""TLS contexts from Kafka's ``ssl.*`` configs, for TLS listeners and for brokers as clients.

The configs are Kafka's, read for one listener (``get(name)`` answers with the listener's own
value when it has one). Key material comes in the forms Kafka accepts that Python can read:

- ``ssl.keystore.type=PEM``: the private key and certificate chain in-line
  (``ssl.keystore.key``, ``ssl.keystore.certificate.chain``) or in one PEM file
  (``ssl.keystore.location``); ``ssl.key.password`` decrypts an encrypted key.
- ``ssl.keystore.type=PKCS12``: ``ssl.keystore.location`` with ``ssl.keystore.password``
  (and ``ssl.key.password`` when the key has a password of its own).
- truststores alike: ``ssl.truststore.type=PEM`` with ``ssl.truststore.certificates`` or
  ``ssl.truststore.location``, or PKCS12 with ``ssl.truststore.password``.

Java's JKS, Kafka's default type, is refused with a message saying what to use instead.

``ssl.client.auth`` (none, requested, required) decides whether clients are asked for a
certificate; ``ssl.enabled.protocols`` the TLS versions; ``ssl.cipher.suites`` the TLS 1.2
suites, by IANA name (Java's, which Kafka configs use) or OpenSSL name. Python cannot choose
among TLS 1.3 suites (OpenSSL's defaults are all AEAD), so a list that names no TLS 1.3 suite
turns TLS 1.3 off, as it does in Java, and one that does keeps OpenSSL's TLS 1.3 suites.

A listener's context is a :class:`ReloadableSslContext`: a certificate renewed through a
dynamic config update applies to connections made afterwards, without a restart.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

Config = Callable[[str], Any]  # one listener's value of an ssl.* config

_PROTOCOL_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_VERIFY_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                 "required": ssl.CERT_REQUIRED}
# IANA names of the TLS 1.3 suites, which Python leaves to OpenSSL.
_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                           "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                           "TLS_AES_128_CCM_8_SHA256"})


class SslConfigError(Exception):
    """An ``ssl.*`` config that cannot make a TLS context; the message names the config."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


class ReloadableSslContext(ssl.SSLContext):
    """A server context whose key material can be replaced while the listener serves.

    asyncio (and uvloop) make each connection's TLS session with ``wrap_bio`` of the context
    the server was created with; this one hands that to the context of the moment, so
    :meth:`replace` takes effect for every connection accepted afterwards while the
    connections already made keep theirs."""

    current: ssl.SSLContext

    def __new__(cls, current: ssl.SSLContext) -> ReloadableSslContext:
        context = super().__new__(cls, ssl.PROTOCOL_TLS_SERVER)
        context.current = current
        return context

    def __init__(self, current: ssl.SSLContext) -> None:
        pass  # made in __new__: SSLContext is built there

    def replace(self, current: ssl.SSLContext) -> None:
        self.current = current

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        return self.current.wrap_bio(*args, **kwargs)


def server_context(get: Config) -> ssl.SSLContext:
    """The context of a TLS listener; SslConfigError when the configs cannot make one."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols_and_ciphers(context, get)
    if not _load_keystore(context, get):
        raise SslConfigError("A TLS listener needs a keystore: set ssl.keystore.location, or "
                             "ssl.keystore.type=PEM with ssl.keystore.key and "
                             "ssl.keystore.certificate.chain", "ssl.keystore.location")
    client_auth = get("ssl.client.auth")
    context.verify_mode = _VERIFY_MODES[client_auth]
    if not _load_truststore(context, get) and client_auth != "none":
        raise SslConfigError(f"ssl.client.auth={client_auth} needs a truststore to check client "
                             "certificates against: set ssl.truststore.location or "
                             "ssl.truststore.certificates", "ssl.truststore.location")
    return context


def client_context(get: Config) -> ssl.SSLContext:
    """The context of a broker connecting to another broker's TLS listener: the truststore
    (the system's CAs when none is set), its keystore when it has one (mutual TLS), and the
    peer's name checked when ``ssl.endpoint.identification.algorithm`` is https."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols_and_ciphers(context, get)
    _load_keystore(context, get)
    if not _load_truststore(context, get):
        context.load_default_certs()
    context.check_hostname = (get("ssl.endpoint.identification.algorithm") or "").lower() == "https"
    return context


# -- protocols and cipher suites ---------------------------------------------------------


def _set_protocols_and_ciphers(context: ssl.SSLContext, get: Config) -> None:
    enabled = [_PROTOCOL_VERSIONS[name] for name in get("ssl.enabled.protocols")]
    if not enabled:
        raise SslConfigError("ssl.enabled.protocols must name at least one TLS version",
                             "ssl.enabled.protocols")
    context.minimum_version = min(enabled)
    context.maximum_version = max(enabled)
    suites = get("ssl.cipher.suites")
    if not suites:
        return
    tls12 = [openssl_cipher_name(name) for name in suites if name not in _TLS13_SUITES]
    if not tls12:  # TLS 1.3 suites only
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        return
    if len(tls12) == len(suites) and context.maximum_version is ssl.TLSVersion.TLSv1_3:
        context.maximum_version = ssl.TLSVersion.TLSv1_2  # no TLS 1.3 suite named
    try:
        context.set_ciphers(":".join(tls12))
    except ssl.SSLError:
        raise SslConfigError(f"None of the cipher suites {', '.join(suites)} in "
                             "ssl.cipher.suites is available", "ssl.cipher.suites") from None


def openssl_cipher_name(name: str) -> str:
    """OpenSSL's name of a TLS 1.2 cipher suite given by its IANA name, which Java and so
    Kafka's configs use ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" is
    "ECDHE-RSA-AES128-GCM-SHA256"); an OpenSSL name is returned as it is."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    exchange, cipher = name[len("TLS_"):].split("_WITH_", 1)
    parts = [] if exchange == "RSA" else exchange.split("_")
    cipher = cipher.replace("AES_128", "AES128").replace("AES_256", "AES256")
    cipher_parts = cipher.split("_")
    if cipher_parts[:2] == ["CHACHA20", "POLY1305"]:
        cipher_parts = ["CHACHA20", "POLY1305"]  # OpenSSL drops the hash of this one
    return "-".join(parts + cipher_parts)


# -- key material ----------------------------------------------------------------------------


def _load_keystore(context: ssl.SSLContext, get: Config) -> bool:
    """Loads the keystore the configs name into ``context``; False when none is set."""
    location = get("ssl.keystore.location")
    key, chain = get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
    if location is None and key is None and chain is None:
        return False
    store_type = _store_type(get, "ssl.keystore.type")
    key_password = get("ssl.key.password")
    if store_type == "PKCS12":
        if location is None:
            raise SslConfigError("ssl.keystore.type=PKCS12 needs ssl.keystore.location",
                                 "ssl.keystore.location")
        key_pem, chain_pem = _pkcs12_key_and_chain(location, get("ssl.keystore.password"),
                                                   "ssl.keystore.location")
        _load_pem_keystore(context, key_pem + chain_pem, None, "ssl.keystore.location")
        return True
    if location is not None:
        if key is not None or chain is not None:
            raise SslConfigError("Set either ssl.keystore.location or ssl.keystore.key and "
                                 "ssl.keystore.certificate.chain, not both",
                                 "ssl.keystore.location")
        _load_pem_keystore(context, _read(location, "ssl.keystore.location"), key_password,
                           "ssl.keystore.location")
        return True
    if key is None or chain is None:
        missing = "ssl.keystore.key" if key is None else "ssl.keystore.certificate.chain"
        raise SslConfigError(f"An in-line PEM keystore needs both ssl.keystore.key and "
                             f"ssl.keystore.certificate.chain; {missing} is not set", missing)
    _load_pem_keystore(context, f"{key}\n{chain}\n".encode(), key_password, "ssl.keystore.key")
    return True


def _load_truststore(context: ssl.SSLContext, get: Config) -> bool:
    location = get("ssl.truststore.location")
    certificates = get("ssl.truststore.certificates")
    if location is None and certificates is None:
        return False
    store_type = _store_type(get, "ssl.truststore.type")
    name = "ssl.truststore.location" if location is not None else "ssl.truststore.certificates"
    if store_type == "PKCS12" and location is not None:
        _, certificate, extra = _pkcs12(_read(location, name), get("ssl.truststore.password"),
                                        name)
        pem = b"".join(c.public_bytes(serialization.Encoding.PEM)
                       for c in [certificate, *extra] if c is not None)
    elif location is not None:
        pem = _read(location, name)
    else:
        pem = certificates.encode()
    try:
        context.load_verify_locations(cadata=pem.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as exc:
        raise SslConfigError(f"{name} holds no usable PEM certificate: {exc}", name) from None
    return True


def _store_type(get: Config, name: str) -> str:
    store_type = (get(name) or "JKS").upper()
    if store_type not in ("PEM", "PKCS12"):
        raise SslConfigError(f"{name}={store_type} is not supported: odradek reads PEM and "
                             f"PKCS12 stores (set {name}=PEM or PKCS12)", name)
    return store_type


def _load_pem_keystore(context: ssl.SSLContext, pem: bytes, password: str | None,
                       name: str) -> None:
    """``load_cert_chain`` reads files only, so the PEM goes through a private temporary
    file that is removed at once."""
    fd, path = tempfile.mkstemp(prefix="odradek-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(pem)
        context.load_cert_chain(path, password=password or None)
    except ssl.SSLError as exc:
        raise SslConfigError(f"{name}: cannot load the private key and certificate chain "
                             f"({exc.reason or exc}); check ssl.key.password", name) from None
    finally:
        os.unlink(path)


def _pkcs12_key_and_chain(location: str, password: str | None, name: str) -> tuple[bytes, bytes]:
    key, certificate, extra = _pkcs12(_read(location, name), password, name)
    if key is None or certificate is None:
        raise SslConfigError(f"{name}: the PKCS12 keystore holds no private key with its "
                             "certificate", name)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [certificate, *extra])
    return key_pem, chain


def _pkcs12(data: bytes, password: str | None, name: str) -> tuple[Any, Any, list[Any]]:
    try:
        return pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError as exc:
        raise SslConfigError(f"{name}: cannot read the PKCS12 store ({exc}); check its "
                             "password", name) from None


def _read(path: str, name: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise SslConfigError(f"{name}: cannot read {path}: {exc.strerror}", name) from None
