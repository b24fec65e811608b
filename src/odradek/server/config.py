"""Broker and topic configuration, resolved and described the way a Kafka broker does it.

A broker config value comes from, highest priority first: a dynamic per-broker override
(AlterConfigs on resource "<node id>", DYNAMIC_BROKER_CONFIG), a dynamic cluster default
(resource "", DYNAMIC_DEFAULT_BROKER_CONFIG), `server.properties` plus `--set` overrides
(STATIC_BROKER_CONFIG), or the definition's default (DEFAULT_CONFIG).

A topic config value comes from the topic's own override (DYNAMIC_TOPIC_CONFIG), else from
its broker synonyms through the same layers (`retention.ms` <- `log.retention.ms` <-
`log.retention.minutes` <- `log.retention.hours`, converted to milliseconds), else from the
topic default. This is `KafkaConfigSchema.resolveEffectiveTopicConfig` (KIP-226 synonyms).

Kafka's ZooKeeper-mode DescribeConfigs (`ConfigHelper`) drops the synonyms of a topic config
when its first broker synonym is unset, so a topic inheriting `log.retention.hours=24` is shown
as DEFAULT_CONFIG with no synonyms although its value is 86400000. We report the source the
value really came from, as Kafka's KRaft controller does; broker entries keep Kafka's rule.

`BrokerConfig` is not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.log.config import LogConfig
from odradek.server.config_defs import (
    BROKER_CONFIGS,
    GROUP_CONFIGS,
    MINUTE_MS,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    Endpoint,
    SecurityProtocol,
    broker_config_def,
    csv_list,
    endpoints,
    listener_config_name,
    parse_properties,
)
from odradek.server.listeners import (
    INTER_BROKER_LISTENER_NAME,
    INTER_BROKER_SECURITY_PROTOCOL,
    PROTOCOL_MAP,
    check_listeners,
    inter_broker_listener_name,
    security_protocol_map,
)

__all__ = [
    "BROKER_CONFIGS",
    "GROUP_CONFIGS",
    "TOPIC_CONFIGS",
    "AlterConfigOp",
    "BrokerConfig",
    "ConfigDef",
    "ConfigEntry",
    "ConfigError",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "Endpoint",
    "ResolvedConfig",
    "SecurityProtocol",
    "apply_incremental",
    "describe_overrides",
    "describe_topic_config",
    "effective_topic_config",
    "parse_properties",
    "to_log_config",
    "validate_topic_overrides",
]

_log = logging.getLogger(__name__)

# Priority order of the layers that can hold a broker config value.
_LAYERS = (
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG,
)

# DynamicBrokerConfig.brokerConfigSynonyms: a broker key's synonyms are the group of broker
# keys that feed the same topic config (log.retention.ms | .minutes | .hours).
_BROKER_SYNONYMS = {
    synonym.name: tuple(s.name for s in topic.synonyms)
    for topic in TOPIC_CONFIGS.values()
    for synonym in topic.synonyms
}


class AlterConfigOp(enum.IntEnum):
    """IncrementalAlterConfigs `ConfigOperation` (KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None  # None for sensitive configs
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs result entry; handlers drop synonyms/documentation if not asked."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    type: ConfigType
    documentation: str | None

    @property
    def is_default(self) -> bool:
        """DescribeConfigs v0's flag, which Kafka derives from the source."""
        return self.source is ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True)
class ResolvedConfig:
    """A topic default taken from the broker: its value, where it came from, and the chain."""

    value: Any
    source: ConfigSource
    synonyms: tuple[ConfigSynonym, ...]


# -- broker config -------------------------------------------------------------------------


class BrokerConfig:
    """The broker's configuration: static properties plus dynamic overrides.

    `get("log.retention.check.interval.ms")` is the way to read any config; the properties
    below are the values that need parsing or combining beyond that.
    """

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        static = dict(props or {})
        # KafkaConfig.populateSynonyms: node.id and broker.id stand in for each other.
        for name, other in (("broker.id", "node.id"), ("node.id", "broker.id")):
            if name in static and other not in static:
                static[other] = static[name]
        self._raw: dict[ConfigSource, dict[str, str]] = {source: {} for source in _LAYERS}
        self._parsed: dict[ConfigSource, dict[str, Any]] = {source: {} for source in _LAYERS}
        self._raw[ConfigSource.STATIC_BROKER_CONFIG] = static
        self._parsed[ConfigSource.STATIC_BROKER_CONFIG] = _parse_broker_props(static)
        unknown = sorted(name for name in static if broker_config_def(name) is None)
        if unknown:
            _log.warning("These configurations '%s' were supplied but are not used yet.", unknown)
        self._check()

    @classmethod
    def load(
        cls, path: str | os.PathLike[str] | None, overrides: Mapping[str, str] | None = None
    ) -> BrokerConfig:
        """`server.properties` at `path` (if any) with `--set` overrides on top.

        The file is read as UTF-8 (Java reads ISO-8859-1; ASCII files read the same).
        OSError propagates for an unreadable file; ConfigError for a bad value.
        """
        props = parse_properties(Path(path).read_text(encoding="utf-8")) if path else {}
        props.update(overrides or {})
        return cls(props)

    # -- reading -----------------------------------------------------------------------

    def get(self, name: str) -> Any:
        """The effective parsed value of a broker config (the raw string for an unknown key)."""
        for source in _LAYERS:
            if name in self._parsed[source]:
                return self._parsed[source][name]
        if name in BROKER_CONFIGS:
            return BROKER_CONFIGS[name].default
        raise KeyError(name)

    def listener_config(self, listener: str, name: str, mechanism: str | None = None) -> Any:
        """The value of ``name`` for one listener: the listener's own value
        (``listener.name.<listener>.[<mechanism>.]<name>``, from any layer) when set, else the
        broker's. This is Kafka's ``valuesWithPrefixOverride``: the listener's value wins
        over the broker's whatever layers they come from."""
        prefixed = [listener_config_name(listener, name, mechanism)] if mechanism else []
        prefixed.append(listener_config_name(listener, name))
        for key in prefixed:
            for source in _LAYERS:
                if key in self._parsed[source]:
                    return self._parsed[source][key]
        return self.get(name)

    def topic_default(self, topic_config: str) -> ResolvedConfig:
        """The value a topic without an override gets for `topic_config`, and its origin."""
        return self.synonym_default(TOPIC_CONFIGS[topic_config])

    def synonym_default(self, definition: ConfigDef) -> ResolvedConfig:
        """The value of a topic or group config without an override: its broker synonyms'
        (``definition.synonyms``), else the definition's default; and its origin."""
        chain = self._synonym_chain([s.name for s in definition.synonyms], definition.sensitive)
        if not chain or chain[0].source is ConfigSource.DEFAULT_CONFIG:
            return ResolvedConfig(definition.default, ConfigSource.DEFAULT_CONFIG, chain)
        head = chain[0]
        value = self._parsed[head.source][head.name]
        scale = next(s.scale for s in definition.synonyms if s.name == head.name)
        if scale != 1:
            value *= scale
        if definition.unlimited is not None and value < 0:
            value = definition.unlimited
        if definition.validator is not None:
            # Kafka builds its default LogConfig from these values at startup, so a broker
            # value a topic could not hold (log.roll.ms=0) is rejected; name the broker key.
            definition.validator.check(head.name, value)
        return ResolvedConfig(value, head.source, chain)

    @property
    def node_id(self) -> int:
        return self.get("node.id")

    @property
    def cluster_id(self) -> str | None:
        """None when unset: the metadata store then generates one and keeps it."""
        return self.get("cluster.id")

    @property
    def listeners(self) -> tuple[Endpoint, ...]:
        return endpoints("listeners", self.get("listeners"), self.listener_security_protocol_map)

    @property
    def advertised_listeners(self) -> tuple[Endpoint, ...]:
        """`advertised.listeners`, or `listeners` when unset, as Kafka does: when set, a
        listener it leaves out is advertised to nobody."""
        advertised = self.get("advertised.listeners")
        if advertised is None:
            return self.listeners
        return endpoints("advertised.listeners", advertised,
                         self.listener_security_protocol_map, False)

    @property
    def listener_security_protocol_map(self) -> dict[str, SecurityProtocol]:
        return security_protocol_map(self.get(PROTOCOL_MAP))

    @property
    def inter_broker_listener_name(self) -> str:
        return inter_broker_listener_name(
            self.get(INTER_BROKER_LISTENER_NAME), self.get(INTER_BROKER_SECURITY_PROTOCOL),
            INTER_BROKER_SECURITY_PROTOCOL in self._raw[ConfigSource.STATIC_BROKER_CONFIG],
            self.listener_security_protocol_map)

    @property
    def log_dirs(self) -> tuple[Path, ...]:
        """`log.dirs`, else `log.dir`: comma-separated, empty entries ignored."""
        return tuple(Path(d) for d in csv_list(self.get("log.dirs") or self.get("log.dir") or ""))

    @property
    def num_partitions(self) -> int:
        return self.get("num.partitions")

    @property
    def default_replication_factor(self) -> int:
        return self.get("default.replication.factor")

    @property
    def auto_create_topics_enable(self) -> bool:
        return self.get("auto.create.topics.enable")

    @property
    def message_max_bytes(self) -> int:
        return self.get("message.max.bytes")

    @property
    def socket_request_max_bytes(self) -> int:
        return self.get("socket.request.max.bytes")

    @property
    def retention_ms(self) -> int:
        """log.retention.ms > log.retention.minutes > log.retention.hours; -1 is unlimited."""
        return self.topic_default("retention.ms").value

    @property
    def offsets_retention_ms(self) -> int:
        return self.get("offsets.retention.minutes") * MINUTE_MS

    @property
    def zookeeper_connect(self) -> str | None:
        """None (unset or empty) runs the embedded local metadata store."""
        return self.get("zookeeper.connect") or None

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        timeout = self.get("zookeeper.connection.timeout.ms")
        return self.get("zookeeper.session.timeout.ms") if timeout is None else timeout

    # -- dynamic overrides -------------------------------------------------------------

    def dynamic_configs(self, *, per_broker: bool = True) -> dict[str, str]:
        """The current dynamic overrides, the base for IncrementalAlterConfigs."""
        return dict(self._raw[_dynamic_source(per_broker)])

    def validate_dynamic(self, props: Mapping[str, str], *, per_broker: bool = True) -> None:
        """Raises ConfigError if `props` may not replace the dynamic overrides."""
        self._with_dynamic(props, per_broker)

    def set_dynamic(self, props: Mapping[str, str], *, per_broker: bool = True) -> None:
        """Replace the per-broker (or cluster-default) dynamic overrides with `props`."""
        candidate = self._with_dynamic(props, per_broker)
        self._raw, self._parsed = candidate._raw, candidate._parsed

    def _with_dynamic(self, props: Mapping[str, str], per_broker: bool) -> BrokerConfig:
        # DynamicBrokerConfig.validateConfigs; keys Kafka does not know are allowed dynamically.
        defined = {name: broker_config_def(name) for name in sorted(props)}
        static_only = [name for name, d in defined.items() if d is not None and not d.dynamic]
        if static_only:
            raise ConfigError(f"Cannot update these configs dynamically: {_scala_set(static_only)}")
        broker_only = [name for name, d in defined.items() if d is not None and d.per_broker]
        if broker_only and not per_broker:
            raise ConfigError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_scala_set(broker_only)}"
            )
        source = _dynamic_source(per_broker)
        candidate = copy.copy(self)
        candidate._raw = {**self._raw, source: dict(props)}
        candidate._parsed = {**self._parsed, source: _parse_broker_props(props)}
        candidate._check()
        return candidate

    # -- DescribeConfigs ---------------------------------------------------------------

    def describe(
        self, names: Iterable[str] | None = None, *, cluster_default: bool = False
    ) -> list[ConfigEntry]:
        """Entries for resource "<node id>" (every config), or "" (cluster defaults set)."""
        if cluster_default:
            keys = set(self._raw[ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG])
        else:
            keys = set(BROKER_CONFIGS).union(*self._raw.values())
        if names is not None:
            keys &= set(names)
        return [self._entry(name, cluster_default) for name in sorted(keys)]

    def _entry(self, name: str, cluster_default: bool) -> ConfigEntry:
        # ConfigHelper.createBrokerConfigEntry. An undefined key's type is unknown, and
        # Kafka treats a config of unknown type as sensitive.
        definition = broker_config_def(name)
        sensitive = definition is None or definition.sensitive
        chain = self._synonym_chain(_BROKER_SYNONYMS.get(name, (name,)), sensitive)
        # Synonyms of higher priority than `name` itself describe another key: drop them.
        while chain and chain[0].name != name:
            chain = chain[1:]
        if cluster_default:
            default_source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            chain = tuple(s for s in chain if s.source is default_source)
        value = None
        if not sensitive:
            value = definition.to_string(
                self._parsed[ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG][name]
                if cluster_default
                else self.get(name)
            )
        return ConfigEntry(
            name=name,
            value=value,
            source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
            read_only=definition is None or not definition.dynamic,
            sensitive=sensitive,
            synonyms=chain,
            type=definition.type if definition else ConfigType.UNKNOWN,
            documentation=definition.documentation if definition else None,
        )

    def _synonym_chain(self, names: Iterable[str], sensitive: bool) -> tuple[ConfigSynonym, ...]:
        """ConfigHelper.configSynonyms: by layer, then by synonym priority; defaults last."""
        names = tuple(names)
        chain = [
            ConfigSynonym(name, None if sensitive else self._raw[source][name], source)
            for source in _LAYERS
            for name in names
            if name in self._raw[source]
        ]
        for name in names:
            definition = BROKER_CONFIGS.get(name)
            if definition is not None and definition.default is not None:
                value = None if sensitive else definition.to_string(definition.default)
                chain.append(ConfigSynonym(name, value, ConfigSource.DEFAULT_CONFIG))
        return tuple(chain)

    # -- invariants ----------------------------------------------------------------------

    def _check(self) -> None:
        """The cross-key checks of KafkaConfig.validateValues that concern odradek."""
        if self.get("node.id") != self.get("broker.id"):
            raise ConfigError("You must set `node.id` to the same value as `broker.id`.", "node.id")
        if not self.log_dirs:
            raise ConfigError("At least one log directory must be defined via log.dirs or log.dir.")
        retention = self.retention_ms
        if retention < 1 and retention != -1:
            raise ConfigError(
                "log.retention.ms must be unlimited (-1) or, greater than or equal to 1",
                "log.retention.ms",
            )
        check_listeners(self.listeners, self.advertised_listeners, self.inter_broker_listener_name)
        if any(e.host == "0.0.0.0" for e in self.advertised_listeners):
            raise ConfigError(
                "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                "Use a routable IP address.",
                "advertised.listeners",
            )
        wait = self.get("replica.fetch.wait.max.ms")
        if wait > self.get("replica.socket.timeout.ms"):
            raise ConfigError(
                "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms "
                "to prevent unnecessary socket timeouts"
            )
        if wait > self.get("replica.lag.time.max.ms"):
            raise ConfigError(
                "replica.fetch.wait.max.ms should always be less than or equal to "
                "replica.lag.time.max.ms to prevent frequent changes in ISR"
            )
        defaults = {name: self.topic_default(name).value for name in TOPIC_CONFIGS}
        _check_compaction_lags(defaults.__getitem__)
        self._check_consumer_group_timeouts()

    def _check_consumer_group_timeouts(self) -> None:
        """Kafka's ``GroupCoordinatorConfig`` requirements on the consumer protocol and on
        share groups."""
        for protocol in ("consumer", "share"):
            for kind in ("session.timeout", "heartbeat.interval"):
                name = f"group.{protocol}.{kind}.ms"
                low, high = (self.get(f"group.{protocol}.{b}.{kind}.ms") for b in ("min", "max"))
                if not low <= self.get(name) <= high:
                    raise ConfigError(f"{name} must be between group.{protocol}.min.{kind}.ms "
                                      f"({low}) and group.{protocol}.max.{kind}.ms ({high})",
                                      name)
        lock = "group.share.record.lock.duration.ms"
        low, high = (self.get(f"group.share.{b}.record.lock.duration.ms") for b in ("min", "max"))
        if not low <= self.get(lock) <= high:
            raise ConfigError(f"{lock} must be between group.share.min.record.lock.duration.ms "
                              f"({low}) and group.share.max.record.lock.duration.ms ({high})",
                              lock)
        for protocol in ("consumer", "share"):
            interval = f"group.{protocol}.heartbeat.interval.ms"
            session = f"group.{protocol}.session.timeout.ms"
            if self.get(interval) >= self.get(session):
                raise ConfigError(f"{interval} must be less than {session}", interval)


def _parse_broker_props(props: Mapping[str, str]) -> dict[str, Any]:
    return {
        name: definition.parse(value) if (definition := broker_config_def(name)) else value
        for name, value in props.items()
    }


def _dynamic_source(per_broker: bool) -> ConfigSource:
    if per_broker:
        return ConfigSource.DYNAMIC_BROKER_CONFIG
    return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG


def _scala_set(names: list[str]) -> str:
    return "Set(" + ", ".join(names) + ")"


# -- topic config --------------------------------------------------------------------------


def _parse_topic_overrides(overrides: Mapping[str, str]) -> dict[str, Any]:
    for name in overrides:
        if name not in TOPIC_CONFIGS:
            raise ConfigError(f"Unknown topic config name: {name}", name)
    return {name: TOPIC_CONFIGS[name].parse(value) for name, value in overrides.items()}


def _check_compaction_lags(value_of: Callable[[str], Any]) -> None:
    """LogConfig.validateValues."""
    min_lag, max_lag = value_of("min.compaction.lag.ms"), value_of("max.compaction.lag.ms")
    if min_lag > max_lag:
        raise ConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
            f"max.compaction.lag.ms ({max_lag})",
            "min.compaction.lag.ms",
        )


def validate_topic_overrides(
    overrides: Mapping[str, str], broker: BrokerConfig | None = None
) -> dict[str, Any]:
    """Check a topic's overrides as CreateTopics/AlterConfigs do; returns them parsed.

    Without `broker`, cross-checks compare against Kafka's topic defaults.
    """
    parsed = _parse_topic_overrides(overrides)

    def value_of(name: str) -> Any:
        if name in parsed:
            return parsed[name]
        return broker.topic_default(name).value if broker else TOPIC_CONFIGS[name].default

    _check_compaction_lags(value_of)
    if parsed.get("remote.storage.enable"):
        # LogConfig.validateRemoteStorageOnlyIfSystemEnabled: odradek has no tiered storage.
        raise ConfigError(
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage.",
            "remote.storage.enable",
        )
    return parsed


def effective_topic_config(overrides: Mapping[str, str], broker: BrokerConfig) -> dict[str, Any]:
    """Every topic config's parsed value: the override, else the broker's, else the default."""
    parsed = _parse_topic_overrides(overrides)
    return {
        name: parsed[name] if name in parsed else broker.topic_default(name).value
        for name in TOPIC_CONFIGS
    }


def describe_topic_config(
    overrides: Mapping[str, str], broker: BrokerConfig, names: Iterable[str] | None = None
) -> list[ConfigEntry]:
    """DescribeConfigs entries of a topic, in Kafka's definition order."""
    return describe_overrides(TOPIC_CONFIGS, _parse_topic_overrides(overrides), broker, names,
                              ConfigSource.DYNAMIC_TOPIC_CONFIG)


def describe_overrides(
    defs: Mapping[str, ConfigDef], parsed: Mapping[str, Any], broker: BrokerConfig,
    names: Iterable[str] | None, source: ConfigSource,
) -> list[ConfigEntry]:
    """DescribeConfigs entries of a resource whose configs default to broker synonyms (a
    topic, a group): its ``parsed`` overrides at ``source``, above their synonyms' chain."""
    wanted = None if names is None else set(names)
    entries = []
    for name, definition in defs.items():
        if wanted is not None and name not in wanted:
            continue
        resolved = broker.synonym_default(definition)
        value, origin, chain = resolved.value, resolved.source, resolved.synonyms
        if name in parsed:
            value, origin = parsed[name], source
            override = ConfigSynonym(name, definition.to_string(value), source)
            chain = (override, *chain)
        entries.append(
            ConfigEntry(
                name=name,
                value=None if definition.sensitive else definition.to_string(value),
                source=origin,
                read_only=False,  # Kafka never reports a topic or group config as read-only
                sensitive=definition.sensitive,
                synonyms=chain,
                type=definition.type,
                documentation=definition.documentation,
            )
        )
    return entries


def apply_incremental(
    current: Mapping[str, str],
    ops: Iterable[tuple[str, AlterConfigOp | int, str | None]],
    defs: Mapping[str, ConfigDef],
) -> dict[str, str]:
    """ConfigAdminManager.prepareIncrementalConfigs: the overrides after (name, op, value)s.

    The result still has to be validated (`validate_topic_overrides`, `validate_dynamic`).
    APPEND/SUBTRACT start from the current override, else the definition's default (not the
    broker's value: Kafka does the same), and split on "," without trimming. Duplicate names
    and null values for SET/APPEND/SUBTRACT are INVALID_REQUEST, checked by the handler.
    """
    result = dict(current)
    for name, op, value in ops:
        op = AlterConfigOp(op)
        if op is AlterConfigOp.SET:
            result[name] = value
        elif op is AlterConfigOp.DELETE:
            result.pop(name, None)
        else:
            definition = defs.get(name)
            if definition is None or definition.type is not ConfigType.LIST:
                verb = "append" if op is AlterConfigOp.APPEND else "subtract"
                raise ConfigError(f"Config value {verb} is not allowed for config key: {name}", name)
            old = result.get(name, definition.to_string(definition.default) or "")
            items = old.split(",") if old else []
            if op is AlterConfigOp.APPEND:
                items += [v for v in value.split(",") if v not in items]
            else:
                for removed in value.split(","):  # a multiset difference, as Scala's List.diff
                    if removed in items:
                        items.remove(removed)
            result[name] = ",".join(items)
    return result


def to_log_config(effective: Mapping[str, Any]) -> LogConfig:
    """The log layer's `LogConfig` from `effective_topic_config`.

    Fields are matched by name (`segment_bytes` <- `segment.bytes`); list values are joined.
    """
    values = {}
    for field in dataclasses.fields(LogConfig):
        name = field.name.replace("_", ".")
        if name in effective:
            value = effective[name]
            values[field.name] = ",".join(dict.fromkeys(value)) if isinstance(value, tuple) else value
    if effective.get("cleanup.policy") == ():
        # Kafka 3.9 accepts an empty cleanup.policy: neither delete nor compact, so nothing
        # is ever removed. The same log, in LogConfig's terms:
        values.update(cleanup_policy="delete", retention_ms=-1, retention_bytes=-1)
    return LogConfig(**values)

