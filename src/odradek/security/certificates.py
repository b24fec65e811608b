"""A local certificate authority and the certificates it signs, for TLS listeners in tests
and on a developer's machine (``odradek certs create``).

Rules of this module:

1. Making is separate from writing. :class:`CertificateAuthority` and
   :class:`IssuedCertificate` are frozen values that hold keys and certificates and return
   PEM or PKCS#12 bytes; only :func:`write_file` and :meth:`CertificateFiles.write` touch
   the file system.
2. The files are in the forms Kafka's configs and clients read: a certificate is PEM, a
   private key is PKCS#8 PEM (encrypted, PBES2 with AES-256, when given a password: the
   ``ssl.key.password``), a keystore is the private key followed by the certificate chain
   in one PEM file (``ssl.keystore.type=PEM``) or a PKCS#12 file
   (``ssl.keystore.type=PKCS12``), and a truststore is the CA's certificate.
3. Certificates pass strict verification (OpenSSL's X509_STRICT, Python 3.13's default):
   every certificate has a subject key identifier, every issued one the CA's authority key
   identifier, and basic constraints and key usage are critical.
4. A broker's certificate allows both serverAuth and clientAuth: brokers connect to each
   other, and with ``ssl.client.auth=required`` a broker is the client of another.

Worked example, a broker keystore and a client for mutual TLS::

    ca = CertificateAuthority.create("CN=odradek test CA")
    broker = ca.issue_server(["localhost", "127.0.0.1"])
    alice = ca.issue_client("CN=alice,OU=Eng,O=Example")
    write_file(directory / "ca.pem", ca.certificate_pem())
    CertificateFiles.named(directory, "broker").write(broker)
"""

from __future__ import annotations

import enum
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
PublicKey = ec.EllipticCurvePublicKey | rsa.RSAPublicKey
# A subject as an RFC 4514 string ("CN=alice,OU=Eng,O=Example") or as a Name built from
# its attributes.
Subject = str | x509.Name

DEFAULT_CA_SUBJECT = "CN=odradek test CA"
# What a broker on the embedded default is reached by: its name and its address.
DEFAULT_BROKER_HOSTS = ("localhost", "127.0.0.1")
DEFAULT_VALIDITY_DAYS = 365
# A certificate valid from "now" is not yet valid on a machine whose clock is a little
# behind; starting the window a few minutes back is what local CAs (mkcert, step) do too.
CLOCK_SKEW_ALLOWANCE = timedelta(minutes=5)
RSA_KEY_SIZE = 2048
RSA_PUBLIC_EXPONENT = 65537
# PKCS#12 encryption that Java (8u301+, 11.0.12+), OpenSSL 3 and Python all read:
# PBES2 with AES-256-CBC and a SHA-256 MAC. cryptography's "best available" may move on.
PKCS12_KDF_ROUNDS = 50_000
# Keys and keystores are readable by their owner only, as ssh requires of its keys.
SECRET_FILE_MODE = 0o600
PUBLIC_FILE_MODE = 0o644


class KeyAlgorithm(enum.Enum):
    """EC P-256 by default: generated in about a millisecond, where an RSA 2048 key takes
    tens of milliseconds; RSA for peers that need it."""

    EC_P256 = "ec-p256"
    RSA_2048 = "rsa-2048"

    def generate(self) -> PrivateKey:
        if self is KeyAlgorithm.RSA_2048:
            return rsa.generate_private_key(RSA_PUBLIC_EXPONENT, RSA_KEY_SIZE)
        return ec.generate_private_key(ec.SECP256R1())


@dataclass(frozen=True, slots=True)
class Validity:
    """A certificate's validity window; an expired certificate is one whose window is past."""

    not_before: datetime
    not_after: datetime

    def __post_init__(self) -> None:
        if self.not_before.tzinfo is None or self.not_after.tzinfo is None:
            raise ValueError("not_before and not_after must be timezone-aware datetimes")
        if self.not_after <= self.not_before:
            raise ValueError(f"not_after ({self.not_after}) must be after not_before "
                             f"({self.not_before})")

    @classmethod
    def days(cls, days: int, now: datetime | None = None) -> Validity:
        """Valid for ``days`` days from ``now`` (default: the current time), starting
        :data:`CLOCK_SKEW_ALLOWANCE` earlier."""
        if days < 1:
            raise ValueError(f"a certificate is valid for at least 1 day, not {days}")
        now = now or datetime.now(timezone.utc)
        return cls(now - CLOCK_SKEW_ALLOWANCE, now + timedelta(days=days))


def _distinguished_name(subject: Subject) -> x509.Name:
    """``subject`` as a Name; a string is read as RFC 4514, most specific part first."""
    if isinstance(subject, x509.Name):
        name = subject
    else:
        try:
            name = x509.Name.from_rfc4514_string(subject)
        except ValueError as exc:
            detail = f": {exc}" if str(exc) else ""
            raise ValueError(f"not a distinguished name: {subject!r} (expected e.g. "
                             f"'CN=alice,OU=Eng,O=Example'){detail}") from None
    if not name.rdns:
        raise ValueError("a certificate's subject must not be empty")
    return name


def _subject_alternative_name(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    """An IP address entry for each host that is an IP address, a DNS name entry for the
    rest: clients match the address or name they connected to against these."""
    names: list[x509.GeneralName] = []
    for host in hosts:
        if not host:
            raise ValueError("a broker host must not be empty")
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    if not names:
        raise ValueError("a server certificate needs at least one host")
    return x509.SubjectAlternativeName(names)


def _certificate_pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _private_key_pem(private_key: PrivateKey, password: str | None) -> bytes:
    if password == "":
        raise ValueError("a key password must not be empty")
    encryption = (serialization.NoEncryption() if password is None
                  else serialization.BestAvailableEncryption(password.encode()))
    return private_key.private_bytes(serialization.Encoding.PEM,
                                     serialization.PrivateFormat.PKCS8, encryption)


@dataclass(frozen=True, slots=True)
class IssuedCertificate:
    """A private key and its certificate, signed by the CA whose certificate it carries."""

    private_key: PrivateKey
    certificate: x509.Certificate
    ca_certificate: x509.Certificate

    def certificate_pem(self) -> bytes:
        return _certificate_pem(self.certificate)

    def private_key_pem(self, password: str | None = None) -> bytes:
        """PKCS#8, encrypted with ``password`` when given."""
        return _private_key_pem(self.private_key, password)

    def keystore_pem(self, password: str | None = None) -> bytes:
        """A PEM keystore: the private key, then the certificate and the CA's certificate."""
        return (self.private_key_pem(password) + self.certificate_pem()
                + _certificate_pem(self.ca_certificate))

    def pkcs12(self, password: str, alias: str | None = None) -> bytes:
        """A PKCS#12 keystore of the key, certificate and CA certificate; ``alias`` is the
        entry's name (its friendly name, Java's keystore alias)."""
        if not password:
            raise ValueError("a PKCS#12 keystore needs a password")
        encryption = (serialization.PrivateFormat.PKCS12.encryption_builder()
                      .kdf_rounds(PKCS12_KDF_ROUNDS)
                      .key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
                      .hmac_hash(hashes.SHA256())
                      .build(password.encode()))
        return pkcs12.serialize_key_and_certificates(
            alias.encode() if alias else None, self.private_key, self.certificate,
            [self.ca_certificate], encryption)


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """A self-signed CA that signs certificates directly (no intermediates: path length 0).

    Its certificate is the truststore of every broker and client that trusts what it issues.
    """

    private_key: PrivateKey
    certificate: x509.Certificate

    @classmethod
    def create(cls, subject: Subject = DEFAULT_CA_SUBJECT, *, validity: Validity | None = None,
               key_algorithm: KeyAlgorithm = KeyAlgorithm.EC_P256) -> CertificateAuthority:
        private_key = key_algorithm.generate()
        name = _distinguished_name(subject)
        public_key = private_key.public_key()
        certificate = (
            _builder(name, name, public_key, validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(key_cert_sign=True), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public_key),
                           critical=False)
            .sign(private_key, hashes.SHA256())
        )
        return cls(private_key, certificate)

    def certificate_pem(self) -> bytes:
        """The CA's certificate: a PEM truststore (``ssl.truststore.location``,
        ``ssl.ca.location``, ``ssl_cafile``)."""
        return _certificate_pem(self.certificate)

    def private_key_pem(self, password: str | None = None) -> bytes:
        """PKCS#8, encrypted with ``password`` when given."""
        return _private_key_pem(self.private_key, password)

    def issue_server(self, hosts: Iterable[str] = DEFAULT_BROKER_HOSTS, *,
                     subject: Subject | None = None, validity: Validity | None = None,
                     key_algorithm: KeyAlgorithm = KeyAlgorithm.EC_P256) -> IssuedCertificate:
        """A broker's certificate: ``hosts`` (names and IP addresses) in its subject
        alternative name, usable as a TLS server and client. The subject defaults to
        ``CN=<first host>``."""
        hosts = list(hosts)
        alternative_name = _subject_alternative_name(hosts)
        name = (_distinguished_name(subject) if subject is not None
                else x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        return self._issue(name, [ExtendedKeyUsageOID.SERVER_AUTH,
                                  ExtendedKeyUsageOID.CLIENT_AUTH],
                           alternative_name, validity, key_algorithm)

    def issue_client(self, subject: Subject, *, validity: Validity | None = None,
                     key_algorithm: KeyAlgorithm = KeyAlgorithm.EC_P256) -> IssuedCertificate:
        """A client's certificate. A broker's SSL listener names its client after the
        subject (``User:CN=alice,OU=Eng,O=Example`` under the default
        ``ssl.principal.mapping.rules``)."""
        return self._issue(_distinguished_name(subject), [ExtendedKeyUsageOID.CLIENT_AUTH],
                           None, validity, key_algorithm)

    def _issue(self, subject: x509.Name, usages: list[x509.ObjectIdentifier],
               alternative_name: x509.SubjectAlternativeName | None,
               validity: Validity | None, key_algorithm: KeyAlgorithm) -> IssuedCertificate:
        private_key = key_algorithm.generate()
        builder = (
            _builder(subject, self.certificate.subject, private_key.public_key(), validity)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            # RSA key exchange (TLS 1.2's TLS_RSA_* suites) encrypts with the key itself.
            .add_extension(_key_usage(key_encipherment=isinstance(private_key,
                                                                  rsa.RSAPrivateKey)),
                           critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                self.private_key.public_key()), critical=False)
        )
        if alternative_name is not None:
            builder = builder.add_extension(alternative_name, critical=False)
        certificate = builder.sign(self.private_key, hashes.SHA256())
        return IssuedCertificate(private_key, certificate, self.certificate)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: PublicKey,
             validity: Validity | None) -> x509.CertificateBuilder:
    validity = validity or Validity.days(DEFAULT_VALIDITY_DAYS)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity.not_before)
        .not_valid_after(validity.not_after)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _key_usage(*, key_cert_sign: bool = False, key_encipherment: bool = False) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=key_encipherment,
        data_encipherment=False, key_agreement=False, key_cert_sign=key_cert_sign,
        crl_sign=key_cert_sign, encipher_only=False, decipher_only=False)


def write_file(path: Path, data: bytes, *, secret: bool = False) -> None:
    """Writes ``data`` to ``path``, replacing the file; a secret (a private key, a keystore)
    is readable by its owner only, from the moment the file exists."""
    mode = SECRET_FILE_MODE if secret else PUBLIC_FILE_MODE
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "wb") as file:
        os.fchmod(file.fileno(), mode)  # an existing file keeps its mode through os.open
        file.write(data)


@dataclass(frozen=True, slots=True)
class CertificateFiles:
    """One issued certificate's files, named after their owner in one directory.

    ``<name>.crt``: the certificate (``ssl.certificate.location``, ``ssl_certfile``);
    ``<name>.key``: its private key (``ssl.key.location``, ``ssl_keyfile``);
    ``<name>.pem``: the key and the chain (``ssl.keystore.type=PEM``,
    ``ssl.keystore.location``);
    ``<name>.p12``: the same as PKCS#12 (``ssl.keystore.type=PKCS12``), only with a password.
    """

    certificate: Path
    private_key: Path
    keystore: Path
    pkcs12: Path

    @classmethod
    def named(cls, directory: Path, name: str) -> CertificateFiles:
        return cls(directory / f"{name}.crt", directory / f"{name}.key",
                   directory / f"{name}.pem", directory / f"{name}.p12")

    def written(self, password: str | None = None) -> list[Path]:
        """The files :meth:`write` writes with this ``password``."""
        paths = [self.certificate, self.private_key, self.keystore]
        return paths if password is None else [*paths, self.pkcs12]

    def write(self, issued: IssuedCertificate, password: str | None = None) -> None:
        """Writes the files; with a password the keys are encrypted with it and the PKCS#12
        keystore is written too (its alias is the files' name)."""
        write_file(self.certificate, issued.certificate_pem())
        write_file(self.private_key, issued.private_key_pem(password), secret=True)
        write_file(self.keystore, issued.keystore_pem(password), secret=True)
        if password is not None:
            write_file(self.pkcs12, issued.pkcs12(password, alias=self.pkcs12.stem),
                       secret=True)
