"""DescribeClientQuotas' filter and AlterClientQuotas' checks, as pure functions (KIP-546).

Both work on the quotas as stored, ``Mapping[QuotaEntity, Mapping[str, float]]``, and take
the kio request's parts as they are; the handlers turn the results into responses, and the
metadata store writes what an alteration changed.

**Describe** (Kafka's ``ClientQuotasImage.describe``). Each filter component names an entity
type and how to match it: EXACT (0) an entity whose name of that type is ``match``, DEFAULT
(1) one whose name of that type is ``<default>``, ANY (2, Kafka's MATCH_TYPE_SPECIFIED) one
that has that type at all, ``<default>`` included. An entity is described when it matches
every component; with ``strict`` it must also have no other type, so ``[user ANY]`` strict
lists user quotas only, not (user, client-id) ones. A malformed filter fails the whole
request (:class:`ApiError`): an empty or repeated type, a match string where the match type
takes none or none where it needs one, an unknown match type, ``ip`` together with user or
client-id (INVALID_REQUEST), or a type Kafka does not know (UNSUPPORTED_VERSION). No ``ip``
entity is ever stored here, so a filter on ``ip`` describes nothing.

**Alter** (Kafka's ``ClientQuotaControlManager.alterClientQuotas``). Each entry sets (or, with
``remove``, removes) quotas of one entity; each entity is checked on its own and fails or
succeeds whole, with Kafka's INVALID_REQUEST messages: a repeated quota key, an entity named
twice in the request, an empty entity, an unknown or empty entity type, ``ip`` (odradek has no
connection rate quotas, KIP-612), a key that is not a quota, a value not greater than 0, and
a fractional or out-of-range value for a whole-number quota (``producer_byte_rate``,
``consumer_byte_rate``). Removing a key the entity does not have is no error. Kafka's
controller lets the first of two entries for one entity through while answering the error;
here an entity answered with an error changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.server.handlers.api_error import ApiError
from odradek.server.quota_entity import CLIENT_ID, IP, QUOTA_CONFIG_TYPES, USER, QuotaEntity

# DescribeClientQuotasRequest's match types.
MATCH_TYPE_EXACT = 0
MATCH_TYPE_DEFAULT = 1
MATCH_TYPE_ANY = 2  # Kafka's MATCH_TYPE_SPECIFIED: any entity of the type

# The largest value a LONG quota takes: Java compares the double to Long.MAX_VALUE as a double.
_LONG_MAX = float(2**63 - 1)
# ClientQuotaControlManager.getErrorForIntegralQuotaValue: how far from whole a LONG may be.
_FRACTION_TOLERANCE = 1e-6


def describe_client_quotas(stored: Mapping[QuotaEntity, Mapping[str, float]],
                           components: Iterable[Any], strict: bool
                           ) -> dict[QuotaEntity, Mapping[str, float]]:
    """The entities matching a DescribeClientQuotas filter, with their quotas. ``components``
    have ``entity_type``, ``match_type`` and ``match``."""
    exact: dict[str, str | None] = {}  # entity type -> name, None for <default>
    of_type: set[str] = set()
    for component in components:
        entity_type = component.entity_type
        if not entity_type:
            raise ApiError(ErrorCode.invalid_request, "Invalid empty entity type.")
        if entity_type in exact or entity_type in of_type:
            raise ApiError(ErrorCode.invalid_request, f"Entity type {entity_type} cannot appear "
                                                      f"more than once in the filter.")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise ApiError(ErrorCode.unsupported_version,
                           f"Unsupported entity type {entity_type}")
        if component.match_type == MATCH_TYPE_EXACT:
            if component.match is None:
                raise ApiError(ErrorCode.invalid_request, "Request specified MATCH_TYPE_EXACT, "
                                                          "but set match string to null.")
            exact[entity_type] = component.match
        elif component.match_type == MATCH_TYPE_DEFAULT:
            if component.match is not None:
                raise ApiError(ErrorCode.invalid_request, "Request specified MATCH_TYPE_DEFAULT, "
                                                          "but also specified a match string.")
            exact[entity_type] = None
        elif component.match_type == MATCH_TYPE_ANY:
            if component.match is not None:
                raise ApiError(ErrorCode.invalid_request, "Request specified "
                               "MATCH_TYPE_SPECIFIED, but also specified a match string.")
            of_type.add(entity_type)
        else:
            raise ApiError(ErrorCode.invalid_request,
                           f"Unknown match type {component.match_type}")
    named = exact.keys() | of_type
    if IP in named and named & {USER, CLIENT_ID}:
        raise ApiError(ErrorCode.invalid_request, "Invalid entity filter component combination. "
                       "IP filter component should not be used with user or clientId filter "
                       "component.")

    def matches(entries: dict[str, str | None]) -> bool:
        if strict and len(entries) != len(named):
            return False
        return (all(entity_type in entries and entries[entity_type] == name
                    for entity_type, name in exact.items())
                and all(entity_type in entries for entity_type in of_type))

    return {entity: quotas for entity, quotas in stored.items() if matches(entity.entries())}


@dataclass(frozen=True, slots=True)
class EntityResult:
    """One entity's answer to AlterClientQuotas."""

    entity: Mapping[str, str | None]  # entity_type -> entity_name, as the request named it
    error_code: ErrorCode
    error_message: str | None


@dataclass(frozen=True, slots=True)
class QuotaAlterations:
    """What an AlterClientQuotas request answers, and what it changes if not validate_only."""

    results: tuple[EntityResult, ...]  # one per entity, in request order
    # Each entity changed, with all its quotas after the request (empty: none left).
    changed: Mapping[QuotaEntity, Mapping[str, float]]


def alter_client_quotas(stored: Mapping[QuotaEntity, Mapping[str, float]],
                        entries: Iterable[Any]) -> QuotaAlterations:
    """Checks an AlterClientQuotas request's ``entries`` (each with ``entity``, a list of
    ``entity_type``/``entity_name``, and ``ops``, a list of ``key``/``value``/``remove``)
    against the stored quotas."""
    outcomes: dict[tuple[tuple[str, str | None], ...], EntityResult] = {}
    changed: dict[QuotaEntity, Mapping[str, float]] = {}
    for entry in entries:
        # Kafka reads the entity into a map: a type named twice keeps its last name.
        named = {part.entity_type: part.entity_name for part in entry.entity}
        identity = tuple(sorted(named.items(), key=lambda item: item[0]))
        try:
            if identity in outcomes:
                if outcomes[identity].error_code == ErrorCode.none:
                    changed.pop(_entity(named), None)
                raise ApiError(ErrorCode.invalid_request,
                               f"Ignoring duplicate entity {_entity_text(named)}")
            alterations: dict[str, float | None] = {}
            for op in entry.ops:
                if op.key in alterations:
                    raise ApiError(ErrorCode.invalid_request,
                                   f"Duplicate quota key {op.key} not updating quota for this "
                                   f"entity {_entity_text(named)}")
                alterations[op.key] = None if op.remove else float(op.value)
            entity = _entity(named)
            before = dict(stored.get(entity, {}))
            quotas = dict(before)
            for key, value in alterations.items():
                if value is None:
                    quotas.pop(key, None)
                else:
                    _check_quota(key, value)
                    quotas[key] = value
            if quotas != before:
                changed[entity] = quotas
            outcome = EntityResult(named, ErrorCode.none, None)
        except ApiError as error:
            outcome = EntityResult(named, error.error_code, error.message)
        outcomes[identity] = outcome
    return QuotaAlterations(tuple(outcomes.values()), changed)


def _entity(named: Mapping[str, str | None]) -> QuotaEntity:
    """ClientQuotaControlManager.validateEntity and configKeysForEntityType."""
    if not named:
        raise ApiError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    for entity_type, name in named.items():
        if entity_type not in (USER, CLIENT_ID, IP):
            raise ApiError(ErrorCode.invalid_request,
                           f"Unhandled client quota entity type: {entity_type}")
        if name == "":
            raise ApiError(ErrorCode.invalid_request, f"Empty {entity_type} not supported")
    if IP in named:
        if len(named) > 1:
            # Kafka's message, its missing space included.
            raise ApiError(ErrorCode.invalid_request, "Invalid quota entity combination, IP "
                           "entity shouldnot be combined with User or ClientId")
        raise ApiError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {IP}")
    return QuotaEntity.from_entries(named)


def _check_quota(key: str, value: float) -> None:
    """ClientQuotaControlManager.validateQuotaKeyValue."""
    config_type = QUOTA_CONFIG_TYPES.get(key)
    if config_type is None:
        raise ApiError(ErrorCode.invalid_request, f"Invalid configuration key {key}")
    if not value > 0:
        raise ApiError(ErrorCode.invalid_request, f"Quota {key} must be greater than 0")
    if config_type == "LONG":
        if value > _LONG_MAX:
            raise ApiError(ErrorCode.invalid_request,
                           f"Proposed value for {key} is too large for a LONG.")
        if abs(math.fmod(value, 1.0)) > _FRACTION_TOLERANCE:
            raise ApiError(ErrorCode.invalid_request, f"{key} cannot be a fractional value.")


def _entity_text(named: Mapping[str, str | None]) -> str:
    """Kafka's ClientQuotaEntity.toString (its HashMap lists client-id before user)."""
    order = {CLIENT_ID: 0, USER: 1}
    parts = sorted(named.items(), key=lambda item: (order.get(item[0], 2), item[0]))
    entries = ", ".join(f"{entity_type}={'null' if name is None else name}"
                        for entity_type, name in parts)
    return f"ClientQuotaEntity(entries={{{entries}}})"
