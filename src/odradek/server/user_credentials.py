"""Users' SCRAM credentials in the metadata store: each user's entity configs
(``/config/users/<user>`` in ZooKeeper) hold one credential per mechanism, under the
mechanism's name, in Kafka's text form (see ``security.scram``)."""

from __future__ import annotations

import logging

from odradek.metadata.store import MetadataStore, entity_path, parse_entity_path
from odradek.security.scram import ScramCredential, ScramMechanism

log = logging.getLogger(__name__)


def scram_credential(metadata: MetadataStore | None, user: str,
                     mechanism: ScramMechanism) -> ScramCredential | None:
    """The user's credential for ``mechanism``; None when it has none (or no store yet)."""
    if metadata is None:
        return None
    text = metadata.entity_configs().get(entity_path(user=user), {}).get(mechanism.mechanism_name)
    if text is None:
        return None
    try:
        return ScramCredential.from_kafka_string(text)
    except ValueError:
        log.error("user %r has an unreadable %s credential in the metadata store", user,
                  mechanism.mechanism_name)
        return None


def scram_users(metadata: MetadataStore) -> dict[str, dict[ScramMechanism, int]]:
    """Every user with a SCRAM credential: mechanism -> iterations."""
    users: dict[str, dict[ScramMechanism, int]] = {}
    for entity, configs in metadata.entity_configs().items():
        user, client_id = parse_entity_path(entity)
        if not isinstance(user, str) or client_id is not None:
            continue  # a client entity, or the <default> user, holds no credential
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            text = configs.get(mechanism.mechanism_name)
            if text is not None:
                try:
                    iterations = ScramCredential.from_kafka_string(text).iterations
                except ValueError:
                    continue
                users.setdefault(user, {})[mechanism] = iterations
    return users


async def alter_scram_credentials(metadata: MetadataStore, user: str,
                                  changes: dict[ScramMechanism, ScramCredential | None]) -> None:
    """Sets (or, for None, removes) some of ``user``'s credentials; the user's other configs
    (quotas) stay."""
    entity = entity_path(user=user)
    configs = metadata.entity_configs().get(entity, {})
    for mechanism, credential in changes.items():
        if credential is None:
            configs.pop(mechanism.mechanism_name, None)
        else:
            configs[mechanism.mechanism_name] = credential.to_kafka_string()
    await metadata.set_entity_configs(entity, configs)
