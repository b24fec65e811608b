"""``odradek quotas``: set and describe client quotas (KIP-55, KIP-546), as
``kafka-configs.sh --entity-type users|clients --alter --add-config ...`` does.

A quota is set on an entity: a user, a client id, or a user and a client id together, each
either named or Kafka's ``<default>`` (a null entity name on the wire), which applies to
those that have no quota of their own. Its keys are ``producer_byte_rate`` and
``consumer_byte_rate`` (bytes per second), ``request_percentage`` (of one request handler
thread) and ``controller_mutation_rate`` (partition mutations per second).

librdkafka's admin client has no client quota calls, so these commands send
AlterClientQuotas (v1) and DescribeClientQuotas (v1) themselves
(``broker_requests.exchange_with_any_broker``), secured as the -X properties say.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from kio.schema.errors import ErrorCode

from odradek.cli import output
from odradek.cli.arguments import (
    DEFAULT_BOOTSTRAP_SERVERS,
    BootstrapServers,
    ClientProperties,
    key_value_pairs,
)
from odradek.cli.broker_requests import describe_error, exchange_with_any_broker
from odradek.cli.client import Kafka
from odradek.cli.errors import fail
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build

app = typer.Typer(help="Set and describe client quotas of users and client ids.",
                  no_args_is_help=True)

# Kafka's ClientQuotaEntity types.
USER = "user"
CLIENT_ID = "client-id"
# How Kafka writes the default entity's name; on the wire it is null.
DEFAULT_NAME = "<default>"
# DescribeClientQuotas' match types: a name, or the default.
MATCH_EXACT = 0
MATCH_DEFAULT = 1

Entity = dict[str, Optional[str]]  # entity type -> name, None for <default>

User = Annotated[Optional[str], typer.Option("--user", help="A user's quotas.")]
UserDefault = Annotated[bool, typer.Option(
    "--user-default", help="The quotas of users without quotas of their own.")]
ClientId = Annotated[Optional[str], typer.Option("--client-id", help="A client id's quotas.")]
ClientDefault = Annotated[bool, typer.Option(
    "--client-default", help="The quotas of client ids without quotas of their own.")]


@app.command("set")
def set_quotas(
    user: User = None,
    user_default: UserDefault = False,
    client_id: ClientId = None,
    client_default: ClientDefault = False,
    additions: Annotated[Optional[list[str]], typer.Option(
        "--add", metavar="KEY=VALUE",
        help="Set a quota, e.g. producer_byte_rate=1048576 (repeatable).")] = None,
    deletions: Annotated[Optional[list[str]], typer.Option(
        "--delete", metavar="KEY", help="Remove a quota (repeatable).")] = None,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Set or remove quotas of a user, a client id, or a user's client id, leaving its other
    quotas as they are."""
    entity = _entity(user, user_default, client_id, client_default)
    if not entity:
        fail("give the entity: --user or --user-default, --client-id or --client-default, "
             "or one of each")
    ops = [{"key": key, "value": _number(key, value), "remove": False}
           for key, value in key_value_pairs(additions, "--add")]
    ops += [{"key": key, "value": 0.0, "remove": True} for key in deletions or []]
    if not ops:
        fail("nothing to change: give --add KEY=VALUE or --delete KEY")
    request = build(request_class(ApiKey.ALTER_CLIENT_QUOTAS, 1), validate_only=False,
                    entries=[{"entity": _entity_data(entity), "ops": ops}])
    with Kafka(bootstrap_server, command_config) as kafka:
        [result] = exchange_with_any_broker(kafka, request).entries
    if result.error_code != ErrorCode.none:
        fail(f"{_entity_text(entity)}: {describe_error(result.error_code, result.error_message)}")
    output.line(f"Altered the quotas of {_entity_text(entity)}.")


@app.command()
def describe(
    user: User = None,
    user_default: UserDefault = False,
    client_id: ClientId = None,
    client_default: ClientDefault = False,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Show the quotas of an entity (every entity with quotas if none is given)."""
    entity = _entity(user, user_default, client_id, client_default)
    # Strict, as kafka-configs.sh describes: --user alice is alice's own quotas, not those
    # of alice's client ids.
    request = build(request_class(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1), strict=bool(entity),
                    components=[{"entity_type": entity_type,
                                 "match_type": MATCH_DEFAULT if name is None else MATCH_EXACT,
                                 "match": name}
                                for entity_type, name in entity.items()])
    with Kafka(bootstrap_server, command_config) as kafka:
        response = exchange_with_any_broker(kafka, request)
    if response.error_code != ErrorCode.none:
        fail(f"DescribeClientQuotas: "
             f"{describe_error(response.error_code, response.error_message)}")
    rows = sorted(
        ([_shown_name(entry.entity, USER), _shown_name(entry.entity, CLIENT_ID), value.key,
          _shown_value(value.value)]
         for entry in response.entries or () for value in entry.values))
    if not rows:
        output.note(f"{_entity_text(entity)} has no quotas" if entity else "no quotas")
        return
    output.table(["User", "ClientId", "Quota", "Value"], rows)


def _entity(user: str | None, user_default: bool, client_id: str | None,
            client_default: bool) -> Entity:
    if user is not None and user_default:
        fail("give --user or --user-default, not both")
    if client_id is not None and client_default:
        fail("give --client-id or --client-default, not both")
    entity: Entity = {}
    if user is not None or user_default:
        entity[USER] = user
    if client_id is not None or client_default:
        entity[CLIENT_ID] = client_id
    return entity


def _entity_data(entity: Entity) -> list[dict[str, Any]]:
    return [{"entity_type": entity_type, "entity_name": name}
            for entity_type, name in entity.items()]


def _entity_text(entity: Entity) -> str:
    """``user 'alice'``, ``user <default> and client-id 'app'``, ..."""
    return " and ".join(f"{entity_type} {DEFAULT_NAME if name is None else repr(name)}"
                        for entity_type, name in entity.items())


def _number(key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        fail(f"--add {key} takes a number, got {value!r}")


def _shown_name(parts: Any, entity_type: str) -> str:
    """The entity's name of ``entity_type``: ``<default>``, or blank when it has none."""
    names = {part.entity_type: part.entity_name for part in parts}
    if entity_type not in names:
        return ""
    return DEFAULT_NAME if names[entity_type] is None else names[entity_type]


def _shown_value(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)

