"""Client quotas in the metadata store: each user or client entity's configs
(``/config/users/<user>``, ``/config/clients/<client id>``,
``/config/users/<user>/clients/<client id>`` in ZooKeeper, as in Kafka) hold its quotas next
to its SCRAM credentials. Every broker feeds them to its ``ClientQuotas``, at start and on
each change, so a new quota applies without a restart."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from odradek.metadata.store import (
    MetadataStore,
    entity_path,
    group_of_entity,
    parse_entity_path,
)
from odradek.server.quota_entity import QUOTA_CONFIG_TYPES, QuotaEntity
from odradek.server.quotas import ClientQuotas

log = logging.getLogger(__name__)


def quota_entity(path: str) -> QuotaEntity:
    user, client_id = parse_entity_path(path)
    return QuotaEntity(user, client_id)


def stored_quotas(configs: Mapping[str, str]) -> dict[str, float]:
    """The quotas among an entity's configs, as numbers; an unreadable one is logged and
    left out."""
    quotas = {}
    for key, text in configs.items():
        if key in QUOTA_CONFIG_TYPES:
            try:
                quotas[key] = float(text)
            except ValueError:
                log.error("ignoring quota %s=%r: not a number", key, text)
    return quotas


def apply_quotas(quotas: ClientQuotas, path: str, configs: Mapping[str, str]) -> None:
    if group_of_entity(path) is not None:
        return  # a group's configs, which hold no quota
    try:
        quotas.update(quota_entity(path), stored_quotas(configs))
    except ValueError as exc:
        log.error("ignoring the quotas of %s: %s", path, exc)


def load_quotas(quotas: ClientQuotas, metadata: MetadataStore) -> None:
    for path, configs in metadata.entity_configs().items():
        apply_quotas(quotas, path, configs)


async def store_quotas(metadata: MetadataStore, entity: QuotaEntity,
                       values: Mapping[str, float]) -> None:
    """Replaces ``entity``'s quotas with ``values``; its other configs (SCRAM credentials)
    stay. A LONG quota is written as a whole number, as Kafka writes it."""
    path = entity_path(entity.user, entity.client_id)
    configs = {key: text for key, text in metadata.entity_configs().get(path, {}).items()
               if key not in QUOTA_CONFIG_TYPES}
    for key, value in values.items():
        configs[key] = str(int(value)) if QUOTA_CONFIG_TYPES[key] == "LONG" else repr(value)
    await metadata.set_entity_configs(path, configs)
