"""The broker's side of SASL PLAIN and SCRAM, driven by tokens a client sends, and the JAAS
text that configures them."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
import scramp
from hypothesis import given
from hypothesis import strategies as st

from odradek.security.sasl import (
    PlainSaslServer,
    SaslAuthenticationError,
    ScramSaslServer,
    parse_jaas_config,
)
from odradek.security.scram import (
    ScramCredential,
    ScramMechanism,
    deletion_error,
    salted_password,
    upsertion_error,
)

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


# -- PLAIN ----------------------------------------------------------------------------------


def test_plain_authenticates_a_known_user_in_one_token():
    server = PlainSaslServer(USERS)
    assert server.evaluate_response(b"\0alice\0alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize(("token", "message"), [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"\0\0alice-secret", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"bob\0alice\0alice-secret",
     "Authentication failed: Client requested an authorization id that is different from "
     "username"),
])
def test_plain_refuses_with_kafkas_messages(token, message):
    server = PlainSaslServer(USERS)
    with pytest.raises(SaslAuthenticationError, match=message):
        server.evaluate_response(token)
    assert not server.complete


@given(st.binary(max_size=64))
def test_plain_never_accepts_a_token_without_a_users_password(token):
    server = PlainSaslServer(USERS)
    try:
        server.evaluate_response(token)
    except SaslAuthenticationError:
        return
    assert token.split(b"\0")[2].decode() == USERS[server.authorization_id]


# -- SCRAM ----------------------------------------------------------------------------------


def scram_server(mechanism=ScramMechanism.SCRAM_SHA_256, password="bob-secret", user="bob"):
    credential = ScramCredential.from_password(mechanism, password)
    return ScramSaslServer(mechanism, lambda name, m: credential
                           if (name, m) == (user, mechanism) else None)


def exchange(server, user, password, mechanism="SCRAM-SHA-256"):
    client = scramp.ScramClient([mechanism], user, password)
    server_first = server.evaluate_response(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    server_final = server.evaluate_response(client.get_client_final().encode())
    client.set_server_final(server_final.decode())  # the client checks the server's proof


@pytest.mark.parametrize("mechanism", [ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512])
def test_scram_authenticates_with_a_stored_credential_and_proves_itself(mechanism):
    server = scram_server(mechanism)
    exchange(server, "bob", "bob-secret", mechanism.mechanism_name)
    assert server.complete and server.authorization_id == "bob"


@pytest.mark.parametrize(("user", "password"), [("bob", "wrong"), ("nobody", "bob-secret")])
def test_scram_refuses_a_wrong_password_and_an_unknown_user_alike(user, password):
    server = scram_server()
    with pytest.raises(SaslAuthenticationError, match="invalid credentials with SASL mechanism "
                                                      "SCRAM-SHA-256"):
        exchange(server, user, password)
    assert not server.complete


@given(st.binary(max_size=200), st.binary(max_size=200))
def test_scram_refuses_malformed_tokens_with_an_authentication_error(first, second):
    server = scram_server()
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(first)
        server.evaluate_response(second)


def test_a_scram_username_travels_escaped():
    server = scram_server(user="a,b=c")
    exchange(server, "a,b=c", "bob-secret")
    assert server.authorization_id == "a,b=c"


def test_a_credential_is_derived_from_the_salted_password_as_rfc_5802_says():
    salt = b"0123456789abcdef"
    salted = salted_password(ScramMechanism.SCRAM_SHA_256, "pencil", salt, 4096)
    credential = ScramCredential.from_salted_password(ScramMechanism.SCRAM_SHA_256, salt,
                                                      salted, 4096)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    assert credential.stored_key == hashlib.sha256(client_key).digest()
    assert credential.server_key == hmac.digest(salted, b"Server Key", "sha256")
    text = credential.to_kafka_string()
    assert text.startswith(f"salt={base64.b64encode(salt).decode()},stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_kafka_string(text) == credential


@pytest.mark.parametrize(("user", "mechanism", "iterations", "code", "message"), [
    ("", ScramMechanism.SCRAM_SHA_256, 4096, 93, "Username must not be empty"),
    ("u", ScramMechanism.UNKNOWN, 4096, 33, "Unknown SCRAM mechanism"),
    ("u", ScramMechanism.SCRAM_SHA_512, 4095, 93, "Too few iterations"),
    ("u", ScramMechanism.SCRAM_SHA_512, 16385, 93, "Too many iterations"),
])
def test_alterations_kafka_refuses_are_refused_with_its_error(user, mechanism, iterations,
                                                                 code, message):
    error = upsertion_error(user, mechanism, iterations)
    assert (error.code, error.message) == (code, message)


def test_deleting_a_credential_that_does_not_exist_is_refused():
    error = deletion_error("u", ScramMechanism.SCRAM_SHA_256, exists=False)
    assert (error.code, error.message) == (91, "Attempt to delete a user credential that does "
                                               "not exist")
    assert deletion_error("u", ScramMechanism.SCRAM_SHA_256, exists=True) is None


# -- JAAS -----------------------------------------------------------------------------------


def test_jaas_config_gives_the_plain_users_and_the_brokers_own_login():
    [module] = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '  username="admin" password="admin-secret"\n'
        '  user_admin="admin-secret" user_alice="al\\"ice";')
    assert module.class_name == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert module.flag == "required"
    assert (module.options["username"], module.options["password"]) == ("admin", "admin-secret")
    assert module.plain_users() == {"admin": "admin-secret", "alice": 'al"ice'}


@pytest.mark.parametrize(("text", "message"), [
    ('Module required user_a="x"', "not terminated by semi-colon"),
    ('Module user_a="x";', "control flag not specified"),
    ('Module required user_a;', "Value not specified for key 'user_a'"),
    ("", "no login module"),
])
def test_a_jaas_config_that_does_not_parse_says_why(text, message):
    with pytest.raises(ValueError, match=message):
        parse_jaas_config(text)


def test_scram_accepts_a_final_nonce_that_ends_with_the_combined_one_as_kafka_does():
    # librdkafka before 2.1 (Debian's kcat) sends its own nonce twice in client-final
    server = scram_server()
    client = scramp.ScramClient(["SCRAM-SHA-256"], "bob", "bob-secret")
    client_first = client.get_client_first()
    client_nonce = client_first.rpartition("r=")[2]
    server_first = server.evaluate_response(client_first.encode()).decode()
    combined, salt, iterations = (part[2:] for part in server_first.split(","))
    salted = salted_password(ScramMechanism.SCRAM_SHA_256, "bob-secret",
                             base64.b64decode(salt), int(iterations))
    without_proof = f"c=biws,r={client_nonce}{combined}"
    auth_message = ",".join((client_first[3:], server_first, without_proof)).encode()
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth_message, "sha256")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    server_final = server.evaluate_response(f"{without_proof},p={proof}".encode())
    assert server.complete and server.authorization_id == "bob"
    assert server_final.startswith(b"v=")
