"""SCRAM credentials (RFC 5802, RFC 7677) as Kafka stores and manages them.

A credential never holds the password: it is the salt, the iteration count, and two keys
derived from the salted password (``SaltedPassword = Hi(password, salt, iterations)``):
``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``. The broker checks a client's proof
against StoredKey and proves itself with ServerKey.

Kafka's ZooKeeper mode keeps a user's credentials as entity configs of the user, one per
mechanism, in this text form (``ScramCredentialUtils.credentialToString``)::

    SCRAM-SHA-256 = "salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=4096"

AlterUserScramCredentials (KIP-554) carries the salt and the salted password, computed by the
client, so the password never reaches the broker either.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import os
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

# ScramControlManager.MAX_ITERATIONS; every mechanism's minimum is 4096 (ScramMechanism).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramMechanism(enum.IntEnum):
    """The mechanism codes of Describe/AlterUserScramCredentials (Kafka's ScramMechanism)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return {ScramMechanism.SCRAM_SHA_256: "sha256",
                ScramMechanism.SCRAM_SHA_512: "sha512"}[self]

    @classmethod
    def from_code(cls, code: int) -> ScramMechanism:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        """SCRAM-SHA-256 or SCRAM-SHA-512; ValueError for anything else."""
        for mechanism in (cls.SCRAM_SHA_256, cls.SCRAM_SHA_512):
            if mechanism.mechanism_name == name:
                return mechanism
        raise ValueError(f"Unknown SCRAM mechanism {name!r}: use SCRAM-SHA-256 or SCRAM-SHA-512")


MECHANISM_NAMES = frozenset(m.mechanism_name for m in ScramMechanism if m)  # not UNKNOWN


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salt: bytes,
                             salted_password: bytes, iterations: int) -> ScramCredential:
        digest = mechanism.hash_name
        client_key = hmac.digest(salted_password, b"Client Key", digest)
        return cls(salt, hashlib.new(digest, client_key).digest(),
                   hmac.digest(salted_password, b"Server Key", digest), iterations)

    @classmethod
    def from_password(cls, mechanism: ScramMechanism, password: str,
                      iterations: int = DEFAULT_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        salt = os.urandom(32) if salt is None else salt
        return cls.from_salted_password(
            mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)

    def to_kafka_string(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_kafka_string(cls, text: str) -> ScramCredential:
        """ValueError when ``text`` is not a credential in Kafka's form."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True),
                       int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes,
                    iterations: int) -> bytes:
    """RFC 5802's ``Hi(password, salt, i)``, which is PBKDF2 with the mechanism's HMAC; the
    password is taken as its UTF-8 bytes, as Kafka's ScramFormatter takes it."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


@dataclass(frozen=True, slots=True)
class CredentialError:
    """Why one user's alteration is refused: Kafka's error code and message."""

    code: ErrorCode
    message: str


def upsertion_error(user: str, mechanism: ScramMechanism, iterations: int) -> CredentialError | None:
    """ScramControlManager.validateUpsertion."""
    error = _user_and_mechanism_error(user, mechanism)
    if error is not None:
        return error
    if iterations < MIN_ITERATIONS:
        return CredentialError(ErrorCode.unacceptable_credential, "Too few iterations")
    if iterations > MAX_ITERATIONS:
        return CredentialError(ErrorCode.unacceptable_credential, "Too many iterations")
    return None


def deletion_error(user: str, mechanism: ScramMechanism, exists: bool) -> CredentialError | None:
    """ScramControlManager.validateDeletion."""
    error = _user_and_mechanism_error(user, mechanism)
    if error is None and not exists:
        return CredentialError(ErrorCode.resource_not_found,
                               "Attempt to delete a user credential that does not exist")
    return error


def _user_and_mechanism_error(user: str, mechanism: ScramMechanism) -> CredentialError | None:
    if not user:
        return CredentialError(ErrorCode.unacceptable_credential, "Username must not be empty")
    if mechanism is ScramMechanism.UNKNOWN:
        return CredentialError(ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return None
