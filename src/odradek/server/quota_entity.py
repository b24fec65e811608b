"""Client quota entities and which quota applies to a client (KIP-55).

A quota is set on an entity: a user (the principal's name), a client id, or a (user,
client id) pair, and each of these can be Kafka's ``<default>`` instead of a name (a null
``entity_name`` on the wire): ``QuotaEntity(user="alice")``, ``QuotaEntity(client_id=DEFAULT)``,
``QuotaEntity("alice", "app")``. Each entity holds any of the four quotas
``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage`` and
``controller_mutation_rate``.

The quota of one kind that applies to a client is the first found in Kafka's order
(``DefaultQuotaCallback``):

1. /config/users/<user>/clients/<client-id>
2. /config/users/<user>/clients/<default>
3. /config/users/<user>
4. /config/users/<default>/clients/<client-id>
5. /config/users/<default>/clients/<default>
6. /config/users/<default>
7. /config/clients/<client-id>
8. /config/clients/<default>

and the level it is found at decides which clients share one measurement (Kafka's metric
tags): a quota at a (user, client id) level (1, 2, 4, 5) is measured per user and client
id; at a user level (3, 6), per user, so all of alice's client ids share one bound, and each
user its own share of ``<default>``; at a client-id level (7, 8), per client id, whoever
sends it. A client no quota applies to is measured per client id, without a bound.

Names are the principal's name and the client id as sent, never sanitized: the metadata
store turns ZooKeeper's sanitized node names back into them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from odradek.metadata.store import DEFAULT_ENTITY, EntityName

# Kafka's ClientQuotaEntity entity types.
USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"  # KIP-612 connection rate quotas: a Kafka entity type odradek does not hold

# The quotas of user and client-id entities (QuotaConfig), with their ConfigDef type: a LONG
# quota is a whole number.
PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"  # stored, not enforced
QUOTA_CONFIG_TYPES: Final[Mapping[str, Literal["LONG", "DOUBLE"]]] = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}


# Kafka's <default> entity name: the metadata store's sentinel, since quotas live there.
DEFAULT: Final = DEFAULT_ENTITY


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """What a quota is set on: a user, a client id or both; ``DEFAULT`` for ``<default>``,
    None where the entity has no such part."""

    user: EntityName = None
    client_id: EntityName = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("Invalid empty client quota entity")

    @classmethod
    def from_entries(cls, entries: Mapping[str, str | None]) -> QuotaEntity:
        """The entity of a request's (entity_type -> entity_name) entries, a null name being
        ``<default>``; only user and client-id types."""
        def name(entity_type: str) -> EntityName:
            if entity_type not in entries:
                return None
            value = entries[entity_type]
            return DEFAULT if value is None else value
        return cls(name(USER), name(CLIENT_ID))

    def entries(self) -> dict[str, str | None]:
        """(entity_type -> entity_name) as the protocol carries it, ``<default>`` as null, in
        the order Kafka's responses list them (client-id first)."""
        named = {CLIENT_ID: self.client_id, USER: self.user}
        return {entity_type: None if name is DEFAULT else name
                for entity_type, name in named.items() if name is not None}


@dataclass(frozen=True, slots=True)
class QuotaMatch:
    """The quota of one kind applying to a client, and the clients measured together with
    it: ``sensor`` is (user, client id), None where clients are not told apart by it."""

    entity: QuotaEntity | None  # None: no quota applies
    bound: float  # math.inf when no quota applies
    sensor: tuple[str | None, str | None]


def match_quota(bounds: Mapping[QuotaEntity, float], user: str, client_id: str) -> QuotaMatch:
    """The first of ``bounds`` (one kind of quota by entity) in Kafka's precedence order."""
    per_both, per_user, per_client = (user, client_id), (user, None), (None, client_id)
    levels = (
        (QuotaEntity(user, client_id), per_both),
        (QuotaEntity(user, DEFAULT), per_both),
        (QuotaEntity(user, None), per_user),
        (QuotaEntity(DEFAULT, client_id), per_both),
        (QuotaEntity(DEFAULT, DEFAULT), per_both),
        (QuotaEntity(DEFAULT, None), per_user),
        (QuotaEntity(None, client_id), per_client),
        (QuotaEntity(None, DEFAULT), per_client),
    )
    for entity, sensor in levels:
        bound = bounds.get(entity)
        if bound is not None:
            return QuotaMatch(entity, bound, sensor)
    return QuotaMatch(None, math.inf, per_client)
