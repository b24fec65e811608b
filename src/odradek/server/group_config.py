"""Group configs (Kafka's ``GroupConfig``, KIP-848 and KIP-932): what one consumer or share
group sets for itself, with IncrementalAlterConfigs or AlterConfigs on a GROUP resource, and
what DescribeConfigs shows of it::

    odradek configs alter --group orders --set share.auto.offset.reset=earliest

A group's values are kept with the cluster metadata, under Kafka's ``/config`` layout as
users' and clients' quotas are (``groups/<group id>``): in the local store on one broker, in
ZooKeeper on a cluster, so that every broker sees them and they outlive restarts. A group
need not exist to have configs, as in Kafka. A key the group has not set takes the value of
its broker synonym (``share.record.lock.duration.ms`` <- ``group.share.record.lock.duration.ms``),
and the bounds a group's value must keep are broker configs too (Kafka's
``GroupConfig.validateValues``).

The coordinators read a group's value each time they use it (a heartbeat's interval, a
share-partition's lock duration, where a new share-partition starts), so a change applies to
what they do next without restarting anything.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from odradek.metadata.store import (
    EntityConfigsChanged,
    MetadataEvent,
    MetadataStore,
    group_of_entity,
)
from odradek.server.config import BrokerConfig, ConfigEntry, ConfigSource, describe_overrides
from odradek.server.config_defs import GROUP_CONFIGS, ConfigError, group_config_synonym

log = logging.getLogger(__name__)

# (group config, broker configs bounding it below and above)
_BOUNDS = (
    ("consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms",
     "group.consumer.max.session.timeout.ms"),
    ("consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
     "group.consumer.max.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms",
     "group.share.max.session.timeout.ms"),
    ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms",
     "group.share.max.heartbeat.interval.ms"),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
     "group.share.max.record.lock.duration.ms"),
)
_SESSIONS = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
             ("share.session.timeout.ms", "share.heartbeat.interval.ms"))


def validate_group_overrides(overrides: Mapping[str, str],
                             broker: BrokerConfig) -> dict[str, Any]:
    """A group's overrides checked as Kafka's ``GroupConfig.validate`` does; returns them
    parsed. ConfigError (INVALID_CONFIG) names the first bad key."""
    for name in overrides:
        if name not in GROUP_CONFIGS:
            raise ConfigError(f"Unknown group config name: {name}", name)
    parsed = {name: GROUP_CONFIGS[name].parse(value) for name, value in overrides.items()}

    def value_of(name: str) -> Any:
        return parsed[name] if name in parsed else broker.get(group_config_synonym(name))

    for name, low, high in _BOUNDS:
        if value_of(name) < broker.get(low):
            raise ConfigError(f"{name} must be greater than or equal to {low}", name)
        if value_of(name) > broker.get(high):
            raise ConfigError(f"{name} must be less than or equal to {high}", name)
    for session, interval in _SESSIONS:
        if value_of(session) <= value_of(interval):
            raise ConfigError(f"{session} must be greater than {interval}", session)
    return parsed


def describe_group_config(overrides: Mapping[str, str], broker: BrokerConfig,
                          names: Iterable[str] | None = None) -> list[ConfigEntry]:
    """DescribeConfigs entries of a group: every group config, the group's own value
    (GROUP_CONFIG) above its broker synonym's."""
    parsed = {name: GROUP_CONFIGS[name].parse(value) for name, value in overrides.items()
              if name in GROUP_CONFIGS}
    return describe_overrides(GROUP_CONFIGS, parsed, broker, names, ConfigSource.GROUP_CONFIG)


class GroupConfigs:
    """Every group's own configs, kept in step with the metadata store; ``get`` is what the
    coordinators call. Not thread-safe: the broker's event loop owns it."""

    def __init__(self, broker: BrokerConfig) -> None:
        self._broker = broker
        self._overrides: dict[str, dict[str, Any]] = {}

    def attach(self, store: MetadataStore) -> None:
        """Reads the groups' configs from ``store`` and follows their changes."""
        for entity, configs in store.entity_configs().items():
            self._on_event(EntityConfigsChanged(entity, configs))
        store.subscribe(self._on_event)

    def get(self, group_id: str, name: str) -> Any:
        """The value of group config ``name`` for ``group_id``: its own, else the broker's."""
        own = self._overrides.get(group_id)
        if own is not None and name in own:
            return own[name]
        return self._broker.get(group_config_synonym(name))

    def _on_event(self, event: MetadataEvent) -> None:
        if not isinstance(event, EntityConfigsChanged):
            return
        group_id = group_of_entity(event.entity)
        if group_id is None:
            return
        parsed = {}
        for name, value in event.configs.items():
            try:
                parsed[name] = GROUP_CONFIGS[name].parse(value)
            except (KeyError, ConfigError):  # written by a broker that knows more keys
                log.warning("group %s: ignoring its config %s=%r", group_id, name, value)
        if parsed:
            self._overrides[group_id] = parsed
        else:
            self._overrides.pop(group_id, None)
