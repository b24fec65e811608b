"""``odradek certs create``: a local CA, a broker keystore and client certificates for an
SSL listener with mutual TLS, on a developer's machine or in tests.

Rules: no file is overwritten without --force, and none is written before all of them are
known to be free; private keys and keystores are readable by their owner only; what is
printed is what to paste: the broker's server.properties lines and each client's
librdkafka properties, with absolute paths so they work from any directory.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Optional

import typer

from odradek.cli import output
from odradek.cli.errors import fail
from odradek.security.certificates import (
    DEFAULT_BROKER_HOSTS,
    DEFAULT_VALIDITY_DAYS,
    CertificateAuthority,
    CertificateFiles,
    Validity,
    write_file,
)

app = typer.Typer(help="Make TLS certificates for local use.", no_args_is_help=True)

CA_CERTIFICATE_FILE = "ca.pem"
CA_KEY_FILE = "ca.key"
BROKER_NAME = "broker"
DEFAULT_CLIENT_NAME = "client"
# A client's name is its files' name: a plain file name that is not one of the CA's or the
# broker's, and that fits its certificate's subject (CN=<name>) unescaped, in the 64
# characters X.509 allows a common name.
CLIENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
RESERVED_NAMES = frozenset({"ca", BROKER_NAME})
# The listener of the printed server.properties: beside the embedded default's PLAINTEXT
# listener on 9092, at Kafka's customary SSL port.
SSL_LISTENER_NAME = "SSL"
SSL_LISTENER = f"{SSL_LISTENER_NAME}://127.0.0.1:9093"
# What each of CertificateFiles.written()'s files holds, in the same order.
FILE_CONTENTS = ("certificate", "private key",
                 "private key and certificate chain: a PEM keystore",
                 "private key and certificate chain: a PKCS#12 keystore")


@app.command()
def create(
    directory: Annotated[Path, typer.Option(
        "--directory", "-d", file_okay=False, help="Where to write the files.")]
    = Path("certs"),
    broker_hosts: Annotated[Optional[list[str]], typer.Option(
        "--broker-host", metavar="HOST", show_default="localhost and 127.0.0.1",
        help="A name or IP address clients reach the broker by (repeatable).")] = None,
    clients: Annotated[Optional[list[str]], typer.Option(
        "--client", metavar="NAME", show_default="one named client",
        help="Write a client certificate with subject CN=NAME (repeatable).")] = None,
    days: Annotated[int, typer.Option(
        min=1, help="How many days the certificates are valid.")] = DEFAULT_VALIDITY_DAYS,
    key_password: Annotated[Optional[str], typer.Option(
        help="Encrypt the private keys with this password, and write PKCS#12 keystores "
             "with it too.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
) -> None:
    """Write a CA, a broker keystore and client certificates, and print their settings.

    The settings are a broker's SSL listener that requires client certificates (mutual TLS)
    and each client's librdkafka properties.
    """
    hosts = broker_hosts or list(DEFAULT_BROKER_HOSTS)
    names = list(dict.fromkeys(clients or [DEFAULT_CLIENT_NAME]))
    for name in names:
        if not CLIENT_NAME.fullmatch(name) or name in RESERVED_NAMES:
            fail(f"--client {name!r}: a client's name names its files and is its "
                 f"certificate's CN, so it is 1 to 64 letters, digits, '.', '_' and '-', "
                 f"and not {' or '.join(sorted(RESERVED_NAMES))}")
    if key_password == "":
        fail("--key-password must not be empty")

    ca_certificate, ca_key = directory / CA_CERTIFICATE_FILE, directory / CA_KEY_FILE
    broker_files = CertificateFiles.named(directory, BROKER_NAME)
    client_files = {name: CertificateFiles.named(directory, name) for name in names}
    paths = [ca_certificate, ca_key, *broker_files.written(key_password),
             *(path for files in client_files.values() for path in files.written(key_password))]
    existing = [path.name for path in paths if path.exists()]
    if existing and not force:
        fail(f"{directory} already holds {', '.join(existing)}; --force overwrites them")

    validity = Validity.days(days)
    try:
        ca = CertificateAuthority.create(validity=validity)
        broker = ca.issue_server(hosts, validity=validity)
        issued = {name: ca.issue_client(f"CN={name}", validity=validity) for name in names}
    except ValueError as exc:  # a broker host or client name a certificate cannot hold
        fail(str(exc))
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_file(ca_certificate, ca.certificate_pem())
        write_file(ca_key, ca.private_key_pem(key_password), secret=True)
        broker_files.write(broker, key_password)
        for name, files in client_files.items():
            files.write(issued[name], key_password)
    except OSError as exc:
        fail(f"cannot write {exc.filename}: {exc.strerror}")

    output.table(["File", "Of", "Contents"], [
        (ca_certificate, "the CA", "certificate: the truststore of the broker and clients"),
        (ca_key, "the CA", "private key"),
        *_file_rows(broker_files, f"the broker ({', '.join(hosts)})", key_password),
        # The principal is what ACLs name: the subject, under the default
        # ssl.principal.mapping.rules.
        *(row for name, files in client_files.items()
          for row in _file_rows(files, f"User:CN={name}", key_password)),
    ])
    output.line("")
    output.line("# server.properties: an SSL listener that requires client certificates")
    for line in _server_properties(ca_certificate, broker_files, key_password):
        output.line(line)
    for name, files in client_files.items():
        output.line("")
        output.line(f"# client {name}, for librdkafka (confluent-kafka; kcat -F FILE)")
        for line in _client_properties(ca_certificate, files, key_password):
            output.line(line)


def _file_rows(files: CertificateFiles, owner: str,
               password: str | None) -> list[tuple[Path, str, str]]:
    return [(path, owner, contents)
            for path, contents in zip(files.written(password), FILE_CONTENTS)]


def _server_properties(ca_certificate: Path, broker_files: CertificateFiles,
                       password: str | None) -> list[str]:
    return [
        f"listeners={SSL_LISTENER}",
        f"listener.security.protocol.map={SSL_LISTENER_NAME}:SSL",
        # Brokers reach each other on PLAINTEXT unless told otherwise, and there is none.
        f"inter.broker.listener.name={SSL_LISTENER_NAME}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={broker_files.keystore.absolute()}",
        *_key_password(password),
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={ca_certificate.absolute()}",
        "ssl.client.auth=required",
    ]


def _client_properties(ca_certificate: Path, files: CertificateFiles,
                       password: str | None) -> list[str]:
    return [
        "security.protocol=ssl",
        f"ssl.ca.location={ca_certificate.absolute()}",
        f"ssl.certificate.location={files.certificate.absolute()}",
        f"ssl.key.location={files.private_key.absolute()}",
        *_key_password(password),
    ]


def _key_password(password: str | None) -> list[str]:
    return [] if password is None else [f"ssl.key.password={password}"]
