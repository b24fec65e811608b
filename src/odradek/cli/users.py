"""``odradek users scram``: set, delete and list users' SCRAM credentials (KIP-554), as
``kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`` does.

The password never reaches the broker: librdkafka salts and hashes it
(``SaltedPassword = Hi(password, salt, iterations)``, RFC 5802) and AlterUserScramCredentials
carries the salt and salted password. The broker keeps the credential and answers
DescribeUserScramCredentials with each user's mechanisms and iteration counts only; ``list``
sends that request itself (see there why), secured as the -X properties say.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kio.schema.errors import ErrorCode

from odradek.cli import output
from odradek.cli.arguments import DEFAULT_BOOTSTRAP_SERVERS, BootstrapServers, ClientProperties
from odradek.cli.broker_requests import describe_error, exchange_with_any_broker
from odradek.cli.client import ADMIN_TIMEOUTS, Kafka
from odradek.cli.errors import fail
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build

app = typer.Typer(help="Manage users' credentials.", no_args_is_help=True)
scram = typer.Typer(help="Set, delete and list users' SCRAM credentials.", no_args_is_help=True)
app.add_typer(scram, name="scram")

# Kafka's default, and its least for either mechanism (ScramMechanism.minIterations).
DEFAULT_ITERATIONS = 4096

# Kafka's mechanism names, as sasl.mechanism and sasl.enabled.mechanisms spell them.
MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
              "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}

Mechanism = Annotated[str, typer.Option(
    "--mechanism", metavar="|".join(MECHANISMS), help="The SCRAM mechanism.")]


def _mechanism(name: str) -> ScramMechanism:
    mechanism = MECHANISMS.get(name.upper())
    if mechanism is None:
        fail(f"unknown SCRAM mechanism {name!r}: the mechanisms are {', '.join(MECHANISMS)}")
    return mechanism


def _mechanism_name(mechanism: ScramMechanism) -> str:
    return mechanism.name.replace("_", "-")  # SCRAM_SHA_256 is SCRAM-SHA-256


def _user(name: str) -> str:
    return f"user {name!r}"


@scram.command("set")
def set_credential(
    user: Annotated[str, typer.Argument(help="The user (the name it authenticates with).")],
    mechanism: Mechanism,
    password: Annotated[str, typer.Option(
        prompt=True, hide_input=True, confirmation_prompt=True,
        show_default="asked for, unechoed", help="The user's password.")],
    iterations: Annotated[int, typer.Option(
        help="SCRAM iterations: more make a stolen credential slower to crack and each "
             "authentication slower.")] = DEFAULT_ITERATIONS,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Create or replace a user's SCRAM credential for one mechanism; clients can then
    authenticate as the user with -X sasl.mechanism=MECHANISM."""
    upsertion = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(_mechanism(mechanism), iterations), password.encode())
    with Kafka(bootstrap_server, command_config) as kafka:
        kafka.result(kafka.admin.alter_user_scram_credentials(
            [upsertion], **ADMIN_TIMEOUTS)[user], _user(user))
    output.line(f"Set the {mechanism.upper()} credential of user {user}.")


@scram.command()
def delete(
    user: Annotated[str, typer.Argument(help="The user.")],
    mechanism: Mechanism,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Delete a user's SCRAM credential for one mechanism: the user can no longer
    authenticate with it."""
    deletion = UserScramCredentialDeletion(user, _mechanism(mechanism))
    with Kafka(bootstrap_server, command_config) as kafka:
        kafka.result(kafka.admin.alter_user_scram_credentials(
            [deletion], **ADMIN_TIMEOUTS)[user], _user(user))
    output.line(f"Deleted the {mechanism.upper()} credential of user {user}.")


@scram.command("list")
def list_credentials(
    users: Annotated[Optional[list[str]], typer.Argument(
        show_default="every user with a credential", help="Users whose credentials to list.")]
    = None,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """List users' SCRAM credentials: mechanism and iterations, never the secret."""
    # Sent by the CLI itself, not with librdkafka's describe_user_scram_credentials: an
    # answer with a request-level error (CLUSTER_AUTHORIZATION_FAILED) crashes librdkafka
    # 2.16, whose response parser keeps an error string it did not allocate (on the stack,
    # or librdkafka's static one) for rd_kafka_op_destroy to free.
    request = build(request_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0),
                    users=[{"name": user} for user in dict.fromkeys(users or [])] or None)
    with Kafka(bootstrap_server, command_config) as kafka:
        response = exchange_with_any_broker(kafka, request)
    if response.error_code != ErrorCode.none:
        fail(f"DescribeUserScramCredentials: "
             f"{describe_error(response.error_code, response.error_message)}")
    failures = [f"{_user(result.user)}: {describe_error(result.error_code, result.error_message)}"
                for result in response.results if result.error_code != ErrorCode.none]
    if failures:
        fail("; ".join(failures))
    rows = [[result.user, _mechanism_name(ScramMechanism(info.mechanism)), info.iterations]
            for result in sorted(response.results, key=lambda result: result.user)
            for info in sorted(result.credential_infos, key=lambda info: info.mechanism)]
    if not rows:
        output.note("no SCRAM credentials")
        return
    output.table(["User", "Mechanism", "Iterations"], rows)
