"""The broker's side of the SASL mechanisms it serves: PLAIN (RFC 4616) and SCRAM-SHA-256/512
(RFC 5802, RFC 7677), and the JAAS text Kafka configures them with.

A :class:`SaslServer` takes the client's tokens one at a time (``evaluate_response``) and
answers with its own, until it is ``complete``; it then names who authenticated
(``authorization_id``). A refusal raises :class:`SaslAuthenticationError`, whose message the
client is told (SASL_AUTHENTICATION_FAILED). These classes do no I/O: the connection
(``server.authenticator``) carries the tokens in SaslAuthenticate requests.

**Users.** PLAIN users are the ``user_<name>="<password>"`` options of the listener's
``listener.name.<listener>.plain.sasl.jaas.config`` (Kafka's ``PlainServerCallbackHandler``);
SCRAM users are the credentials in the metadata store, looked up when a client
authenticates, so a user added or removed with AlterUserScramCredentials counts at once.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import scramp

from odradek.security.scram import ScramCredential, ScramMechanism

PLAIN = "PLAIN"


class SaslAuthenticationError(Exception):
    """The client failed to authenticate; the message is what it is told."""


class SaslServer(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user's name, once complete."""

    def evaluate_response(self, response: bytes) -> bytes:
        """The server's answer to the client's next token; SaslAuthenticationError when the
        client fails."""


class PlainSaslServer:
    """RFC 4616: one token, ``[authzid] NUL authcid NUL passwd``, and an empty answer."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        assert self._authorization_id is not None, "authentication is not complete"
        return self._authorization_id

    def evaluate_response(self, response: bytes) -> bytes:
        # Kafka's PlainSaslServer messages, word for word.
        try:
            tokens = response.decode("utf-8").split("\0")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if len(tokens) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authorization_id, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        if expected is None or not _equal(expected, password):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        self._authorization_id = username
        return b""


class ScramSaslServer:
    """RFC 5802's server: client-first -> server-first, client-final -> server-final.

    Written here rather than taken from ``scramp``, because Kafka's server is more lenient
    than the RFC in one place clients rely on: it accepts a client-final nonce that *ends
    with* the combined nonce (``ScramSaslServer``), and librdkafka before 2.1 (Debian's kcat)
    sends its own nonce twice there. Every failure is one message that does not say whether
    the user exists or which step failed."""

    def __init__(self, mechanism: ScramMechanism,
                 credentials: Callable[[str, ScramMechanism], ScramCredential | None]) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram_mechanism = mechanism
        self._credentials = credentials
        self._username: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._gs2_header = ""
        self._server_first = ""
        self._nonce = ""
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        assert self._complete and self._username is not None, "authentication is not complete"
        return self._username

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            message = response.decode("utf-8")
            if self._credential is None:
                return self._client_first(message).encode()
            if not self._complete:
                return self._client_final(message).encode()
        except (UnicodeDecodeError, KeyError, ValueError, binascii.Error):
            pass
        raise SaslAuthenticationError("Authentication failed during authentication due to "
                                      f"invalid credentials with SASL mechanism {self.mechanism}")

    def _client_first(self, message: str) -> str:
        """``gs2-header client-first-message-bare``; the header is "n,," or "y,," (no channel
        binding), with an optional authzid that must be the user, as Kafka requires."""
        cbind, authzid, bare = message.split(",", 2)
        if cbind not in ("n", "y") or (authzid and not authzid.startswith("a=")):
            raise ValueError("unsupported GS2 header")
        attributes = _scram_attributes(bare)
        username = scram_username(attributes["n"])
        client_nonce = attributes["r"]
        if not client_nonce or (authzid and scram_username(authzid[2:]) != username):
            raise ValueError("bad client-first-message")
        credential = self._credentials(username, self._scram_mechanism)
        if credential is None:
            raise KeyError(username)
        self._username, self._credential = username, credential
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        self._nonce = client_nonce + secrets.token_urlsafe(24)
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        return self._server_first

    def _client_final(self, message: str) -> str:
        """``c=<gs2 header>,r=<nonce>,p=<proof>``: the proof shows the client knows the
        salted password, and the answer proves the server knows the credential."""
        without_proof, separator, proof = message.rpartition(",p=")
        attributes = _scram_attributes(without_proof)
        if (not separator
                or base64.b64decode(attributes["c"], validate=True) != self._gs2_header.encode()
                or not attributes["r"].endswith(self._nonce)):
            raise ValueError("bad client-final-message")
        digest = self._scram_mechanism.hash_name
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 without_proof)).encode()
        credential = self._credential
        client_signature = hmac.digest(credential.stored_key, auth_message, digest)
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof, validate=True),
                                                 client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(digest, client_key).digest(),
                                   credential.stored_key):
            raise ValueError("wrong proof")
        self._complete = True
        server_signature = hmac.digest(credential.server_key, auth_message, digest)
        return f"v={base64.b64encode(server_signature).decode()}"


def _scram_attributes(text: str) -> dict[str, str]:
    """``a=value,b=value``: RFC 5802 attributes (a value may hold "=")."""
    attributes = {}
    for part in text.split(","):
        name, separator, value = part.partition("=")
        if not separator or len(name) != 1:
            raise ValueError(f"bad SCRAM attribute {part!r}")
        attributes.setdefault(name, value)
    return attributes


def scram_username(sasl_name: str) -> str:
    """RFC 5802's saslname: "," and "=" travel as "=2C" and "=3D" (ScramFormatter.username)."""
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


def _equal(expected: str, given: str) -> bool:
    return hmac.compare_digest(expected.encode(), given.encode())


# -- JAAS ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoginModule:
    """One entry of a JAAS config: ``<class> <flag> key="value" ...;``."""

    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def plain_users(self) -> dict[str, str]:
        """The PLAIN users this module declares: ``user_alice="secret"``."""
        return {name[len("user_"):]: value for name, value in self.options.items()
                if name.startswith("user_") and len(name) > len("user_")}


_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))')


def parse_jaas_config(text: str) -> list[LoginModule]:
    """``sasl.jaas.config``'s value as Kafka's JaasConfig reads it; ValueError with a message
    naming what is wrong."""
    tokens = _jaas_tokens(text)
    modules: list[LoginModule] = []
    while tokens:
        class_name = tokens.pop(0)
        if not tokens or tokens[0].lower() not in _FLAGS:
            raise ValueError(f"Login module control flag not specified in JAAS config: "
                             f"expected one of {', '.join(_FLAGS)} after {class_name}")
        flag = tokens.pop(0).lower()
        options: dict[str, str] = {}
        while tokens and tokens[0] != ";":
            if len(tokens) < 3 or tokens[1] != "=":
                raise ValueError(f"Value not specified for key {tokens[0]!r} in JAAS config")
            options[tokens[0]] = tokens[2]
            del tokens[:3]
        if not tokens:
            raise ValueError("JAAS config entry not terminated by semi-colon")
        tokens.pop(0)
        modules.append(LoginModule(class_name, flag, options))
    if not modules:
        raise ValueError("JAAS config has no login module")
    return modules


def _jaas_tokens(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _JAAS_TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"Unexpected character in JAAS config at {text[position:]!r}")
        quoted, word, equals, semicolon = match.groups()
        if quoted is not None:
            tokens.append(re.sub(r"\\(.)", r"\1", quoted))
        else:
            tokens.append(word or equals or semicolon)
        position = match.end()
    return tokens


# -- the client's side ---------------------------------------------------------------------


class SaslClient:
    """The client's side of PLAIN and SCRAM, for a broker authenticating to another broker
    (and the CLI's own requests): ``first_token()``, then ``next_token(challenge)`` until
    ``complete``. SCRAM's exchange is ``scramp``'s, which checks the server's proof."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._plain = mechanism == PLAIN
        self._scram = None if self._plain else scramp.ScramClient([mechanism], username,
                                                                 password)
        self._credentials = (username, password)
        self._step = 0

    @property
    def complete(self) -> bool:
        return self._step == (1 if self._plain else 3)

    def first_token(self) -> bytes:
        self._step = 1
        if self._plain:
            username, password = self._credentials
            return f"\0{username}\0{password}".encode()
        return self._scram.get_client_first().encode()

    def next_token(self, challenge: bytes) -> bytes | None:
        """The answer to the server's token; None once the exchange is complete (the last
        server token only proves the server). Raises SaslAuthenticationError when the
        server's token is not what the mechanism expects."""
        try:
            if self._step == 1:
                self._scram.set_server_first(challenge.decode())
                self._step = 2
                return self._scram.get_client_final().encode()
            self._scram.set_server_final(challenge.decode())
        except (scramp.ScramException, UnicodeDecodeError, AttributeError) as exc:
            raise SaslAuthenticationError(f"the broker's SCRAM answer is not valid: {exc}") \
                from None
        self._step = 3
        return None
