"""Kafka's config formats: one definition row per config key, and how Kafka reads values.

This module knows what a config is and how its text is read (typed values, listener lists,
`server.properties` files); `odradek.server.config` knows where a value comes from.

Names, types, defaults, validators and the topic -> broker synonyms follow Apache Kafka 3.9
(the last release with ZooKeeper mode, which is the cluster model odradek follows), taken from
`LogConfig`, `ServerLogConfigs`, `ServerTopicConfigSynonyms`, `SocketServerConfigs`,
`ReplicationConfigs`, `GroupCoordinatorConfig` and `TransactionLogConfigs`. Configs that
Kafka 4.0 removed (`message.format.version`, `message.downconversion.enable`) are left out.
Documentation strings are short paraphrases of Kafka's.

Rules of this file:

1. A config is a row in `TOPIC_CONFIGS` or `BROKER_CONFIGS`; behaviour that differs per key
   (range, allowed strings, synonyms, dynamic update) is a field of the row, never an `if` on
   the key's name elsewhere.
2. Parsing and the error messages copy Kafka's `ConfigDef.parseType` and validators, so a
   client sees "Invalid value x for configuration retention.ms: Not a number of type LONG"
   exactly as from a Kafka broker.
3. Parsed values are Python values: BOOLEAN -> bool, INT/SHORT/LONG -> int, DOUBLE -> float,
   LIST -> tuple[str, ...], STRING/CLASS/PASSWORD -> str; None where Kafka's value is null.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from odradek.metadata.model import Endpoint

INT_MAX = 2**31 - 1  # Java's Integer.MAX_VALUE: Kafka's "no limit" for INT configs
LONG_MAX = 2**63 - 1  # Java's Long.MAX_VALUE: Kafka's "no limit" for LONG configs
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS


class ConfigType(enum.IntEnum):
    """`DescribeConfigsResponse.ConfigType`: the ids are what DescribeConfigs v3+ sends."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """`DescribeConfigsResponse.ConfigSource`, as sent in DescribeConfigs v1+."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigError(Exception):
    """A config name or value Kafka rejects; INVALID_CONFIG (40) at the protocol edge.

    The message is Kafka's own and reads well on a terminal, so the CLI prints it as is.
    """

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name

    @classmethod
    def invalid_value(cls, name: str, value: object, reason: str | None = None) -> ConfigError:
        """Kafka's `ConfigException(name, value, message)` wording."""
        suffix = "" if reason is None else f": {reason}"
        return cls(f"Invalid value {java_str(value)} for configuration {name}{suffix}", name)


# -- validators ----------------------------------------------------------------------------


class Validator(Protocol):
    def check(self, name: str, value: Any) -> None:
        """Raises ConfigError when the parsed `value` is not allowed for config `name`."""


@dataclass(frozen=True)
class Range:
    """`ConfigDef.Range`; `also` admits one value outside the range (gzip's -1 = default)."""

    min: float | None = None
    max: float | None = None
    also: int | None = None

    def check(self, name: str, value: Any) -> None:
        if value is None or value == self.also:
            return
        if self.also is not None and not self.min <= value <= self.max:
            reason = f"Value must be between {self.min} and {self.max} or equal to {self.also}"
            raise ConfigError.invalid_value(name, value, reason)
        if self.min is not None and value < self.min:
            raise ConfigError.invalid_value(name, value, f"Value must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise ConfigError.invalid_value(name, value, f"Value must be no more than {self.max}")


@dataclass(frozen=True)
class OneOf:
    """`ConfigDef.ValidString.in` for a STRING, `ValidList.in` (each element) for a LIST."""

    values: tuple[str, ...]

    def check(self, name: str, value: Any) -> None:
        for item in value if isinstance(value, tuple) else (value,):
            if item is not None and item not in self.values:
                reason = "String must be one of: " + ", ".join(self.values)
                raise ConfigError.invalid_value(name, item, reason)


class ThrottledReplicas:
    """`ThrottledReplicaListValidator`: "*" or a list of partitionId:brokerId."""

    _ENTRY = re.compile(r"([0-9]+:[0-9]+)?")

    def check(self, name: str, value: Any) -> None:
        entries = [item.strip() for item in value]
        if all(self._ENTRY.fullmatch(e) for e in entries) or "".join(entries) == "*":
            return
        reason = (
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )
        raise ConfigError.invalid_value(name, value, reason)


# -- definitions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Synonym:
    """A broker config whose value is a topic config's default, scaled to the topic's unit."""

    name: str
    scale: int = 1  # log.retention.hours -> retention.ms multiplies by HOUR_MS


@dataclass(frozen=True)
class ConfigDef:
    """One Kafka config key.

    `dynamic` (broker configs only) means AlterConfigs may change it at runtime; Kafka reports
    every other broker config as read-only. `per_broker` configs (listeners) can be altered
    only for one broker id, not at the cluster-default level. `synonyms` (topic configs only)
    are the broker keys the topic default comes from, highest priority first; a negative
    value taken from them becomes `unlimited` when that is set (Kafka does this for retention
    only, in `KafkaConfig.logRetentionTimeMillis`).
    """

    name: str
    type: ConfigType
    default: Any
    documentation: str
    validator: Validator | None = None
    dynamic: bool = False
    per_broker: bool = False
    synonyms: tuple[Synonym, ...] = ()
    unlimited: int | None = None

    @property
    def sensitive(self) -> bool:
        """Kafka never returns the value of a PASSWORD config."""
        return self.type is ConfigType.PASSWORD

    def parse(self, value: str) -> Any:
        """The typed value of `value`, validated; ConfigError names this key when it is bad."""
        parsed = parse_value(self.name, self.type, value)
        if self.validator is not None:
            self.validator.check(self.name, parsed)
        return parsed

    def to_string(self, value: Any) -> str | None:
        """Kafka's `ConfigDef.convertToString`: the wire form of a parsed value."""
        if isinstance(value, tuple):
            return ",".join(value)
        return None if value is None else java_str(value)


_INTEGER_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}
_JAVA_WHITESPACE = "".join(map(chr, range(0x21)))  # String.trim() strips every char <= ' '
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?))[dDfF]?")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


def parse_value(name: str, type_: ConfigType, value: str) -> Any:
    """Kafka's `ConfigDef.parseType` for a string value."""
    trimmed = value.strip(_JAVA_WHITESPACE)
    if type_ is ConfigType.BOOLEAN:
        if trimmed.lower() in ("true", "false"):
            return trimmed.lower() == "true"
        raise ConfigError.invalid_value(name, value, "Expected value to be either true or false")
    if type_ in _INTEGER_BITS:
        limit = 2 ** (_INTEGER_BITS[type_] - 1)
        if _JAVA_INTEGER.fullmatch(trimmed) and -limit <= int(trimmed) < limit:
            return int(trimmed)
        raise ConfigError.invalid_value(name, value, f"Not a number of type {type_.name}")
    if type_ is ConfigType.DOUBLE:
        if _JAVA_DOUBLE.fullmatch(trimmed):
            return float(trimmed.rstrip("dDfF"))
        raise ConfigError.invalid_value(name, value, "Not a number of type DOUBLE")
    if type_ is ConfigType.LIST:
        return tuple(_LIST_SEPARATOR.split(trimmed)) if trimmed else ()
    return trimmed


def java_str(value: Any) -> str:
    """A value as Java's toString prints it, which is what Kafka's messages show."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def _java_double(value: float) -> str:
    """`Double.toString`: plain decimals in [1e-3, 1e7), else "1.0E7" notation."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)  # shortest round-trip digits, always with a decimal point here
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    significant = "".join(map(str, digits)).rstrip("0")
    mantissa = f"{significant[0]}.{significant[1:] or '0'}"
    return f"{'-' if sign else ''}{mantissa}E{exponent + len(digits) - 1}"


# -- text formats: server.properties and listener lists ----------------------------------

_NATURAL_LINE = re.compile(r"\r\n|\r|\n")
_PROPERTIES_WHITESPACE = " \t\f"
_PROPERTIES_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text as `java.util.Properties.load` does.

    `key=value`, `key: value` or `key value`; lines starting with `#` or `!` are comments; an
    odd number of trailing backslashes continues the line (leading whitespace of the next line
    is dropped); `\\t \\n \\r \\f \\uXXXX` are escapes and any other escaped char stands for
    itself. A later duplicate key wins.
    """
    props: dict[str, str] = {}
    pending: list[str] = []
    for natural in _NATURAL_LINE.split(text):
        line = natural.lstrip(_PROPERTIES_WHITESPACE)
        if not pending and (not line or line[0] in "#!"):
            continue  # a comment line never continues onto the next one
        if (len(line) - len(line.rstrip("\\"))) % 2:
            pending.append(line[:-1])
            continue
        key, value = _split_property("".join([*pending, line]))
        props[key] = value
        pending = []
    if pending:
        key, value = _split_property("".join(pending))
        props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str]:
    """The key ends at the first unescaped '=', ':' or whitespace; one separator is skipped."""
    end, escaped = 0, False
    while end < len(line):
        char = line[end]
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "=:" or char in _PROPERTIES_WHITESPACE:
            break
        end += 1
    start, has_separator = end + 1, end < len(line) and line[end] in "=:"
    while start < len(line):
        char = line[start]
        if not has_separator and char in "=:":
            has_separator = True
        elif char not in _PROPERTIES_WHITESPACE:
            break
        start += 1
    return _unescape(line[:end]), _unescape(line[start:])


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char, i = text[i], i + 1
        if char != "\\" or i == len(text):
            out.append(char)
            continue
        char, i = text[i], i + 1
        if char == "u":
            digits = text[i : i + 4]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ConfigError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_PROPERTIES_ESCAPES.get(char, char))
    # Java strings are UTF-16: \ud83d\ude00 is one character, so join surrogate pairs.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


class SecurityProtocol(enum.StrEnum):
    """Kafka's `SecurityProtocol`, in its declaration order (the order of its messages)."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


_LISTENER = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


def endpoints(
    config: str, value: str, protocols: Mapping[str, str], distinct_ports: bool = True
) -> tuple[Endpoint, ...]:
    """SocketServerConfigs.listenerListToEndPoints and CoreUtils' checks."""
    result = []
    for entry in csv_list(value):
        match = _LISTENER.fullmatch(entry)
        if match is None:
            raise ConfigError(f"Unable to parse {entry} to a broker endpoint", config)
        name = match[1].upper()  # ListenerName.normalised
        if name not in protocols:
            raise ConfigError(f"No security protocol defined for listener {name}", config)
        result.append(Endpoint(name, match[2], int(match[3])))
    if len({e.name for e in result}) != len(result):
        raise ConfigError(f"Each listener must have a different name, {config}: {value}", config)
    ports = [e.port for e in result if e.port != 0]  # port 0: an ephemeral port each
    if distinct_ports and len(set(ports)) != len(ports):
        # Kafka also allows one IPv4 and one IPv6 listener on a port; odradek does not.
        raise ConfigError(f"Each listener must have a different port, {config}: {value}", config)
    return tuple(result)


def csv_list(value: str) -> list[str]:
    """Kafka's `Csv.parseCsvList`: comma-separated, whitespace around commas and empties dropped."""
    return [item for item in _LIST_SEPARATOR.split(value.strip()) if item]


_B, _S, _I, _SH, _L, _D, _LI, _P = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.SHORT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)
_CLEANUP_POLICIES = OneOf(("compact", "delete"))
_TIMESTAMP_TYPES = OneOf(("CreateTime", "LogAppendTime"))
# BrokerCompressionType's declaration order, which is the order of Kafka's error message.
_COMPRESSION_TYPES = OneOf(("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))
_GZIP_LEVEL = Range(1, 9, also=-1)  # java.util.zip.Deflater levels; -1 = zlib's default
_LZ4_LEVEL = Range(1, 17)
_ZSTD_LEVEL = Range(-131072, 22)  # Zstd.minCompressionLevel() .. maxCompressionLevel()
_THROTTLED_REPLICAS = ThrottledReplicas()
# The consumer protocol's assignors, by name or by Kafka's class name.
_ASSIGNORS = OneOf(("uniform", "range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                    "org.apache.kafka.coordinator.group.assignor.RangeAssignor"))
_SEGMENT_BYTES_MIN = 14  # LegacyRecord.RECORD_OVERHEAD_V0: a segment must hold one record


def _syn(*names: str | tuple[str, int]) -> tuple[Synonym, ...]:
    return tuple(Synonym(n) if isinstance(n, str) else Synonym(*n) for n in names)


def _table(*rows: ConfigDef) -> dict[str, ConfigDef]:
    return {row.name: row for row in rows}


# LogConfig's define order. Broker synonyms as in ServerTopicConfigSynonyms.
TOPIC_CONFIGS: dict[str, ConfigDef] = _table(
    ConfigDef("segment.bytes", _I, 1024**3, "Size of a segment file; retention and cleaning work on whole segments.", Range(_SEGMENT_BYTES_MIN), synonyms=_syn("log.segment.bytes")),
    ConfigDef("segment.ms", _L, 7 * 24 * HOUR_MS, "Time after which a segment is rolled even if not full, so retention can delete or compact old data.", Range(1), synonyms=_syn("log.roll.ms", ("log.roll.hours", HOUR_MS))),
    ConfigDef("segment.jitter.ms", _L, 0, "Maximum random jitter subtracted from the scheduled segment roll time, to avoid rolling all segments at once.", Range(0), synonyms=_syn("log.roll.jitter.ms", ("log.roll.jitter.hours", HOUR_MS))),
    ConfigDef("segment.index.bytes", _I, 10 * 1024**2, "Size of the index that maps offsets to file positions; preallocated and shrunk when the segment rolls.", Range(4), synonyms=_syn("log.index.size.max.bytes")),
    ConfigDef("flush.messages", _L, LONG_MAX, "Number of messages after which an fsync of the log is forced; by default the OS flushes.", Range(1), synonyms=_syn("log.flush.interval.messages")),
    ConfigDef("flush.ms", _L, LONG_MAX, "Time after which an fsync of the log is forced; by default the OS flushes.", Range(0), synonyms=_syn("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    ConfigDef("retention.bytes", _L, -1, "Maximum size a partition can grow to before old segments are discarded under the delete policy; -1 for no limit.", synonyms=_syn("log.retention.bytes")),
    ConfigDef("retention.ms", _L, 7 * 24 * HOUR_MS, "Maximum time a log is retained before old segments are discarded under the delete policy; -1 for no limit.", Range(-1), synonyms=_syn("log.retention.ms", ("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS)), unlimited=-1),
    ConfigDef("max.message.bytes", _I, 1048588, "Largest record batch size allowed, after compression.", Range(0), synonyms=_syn("message.max.bytes")),
    ConfigDef("index.interval.bytes", _I, 4096, "How often (in bytes of log) an offset index entry is added.", Range(0), synonyms=_syn("log.index.interval.bytes")),
    ConfigDef("delete.retention.ms", _L, 24 * HOUR_MS, "Time to retain delete tombstones on compacted topics.", Range(0), synonyms=_syn("log.cleaner.delete.retention.ms")),
    ConfigDef("min.compaction.lag.ms", _L, 0, "Minimum time a message remains uncompacted in the log.", Range(0), synonyms=_syn("log.cleaner.min.compaction.lag.ms")),
    ConfigDef("max.compaction.lag.ms", _L, LONG_MAX, "Maximum time a message remains ineligible for compaction.", Range(1), synonyms=_syn("log.cleaner.max.compaction.lag.ms")),
    ConfigDef("file.delete.delay.ms", _L, 60000, "Time to wait before deleting a file from the filesystem.", Range(0), synonyms=_syn("log.segment.delete.delay.ms")),
    ConfigDef("min.cleanable.dirty.ratio", _D, 0.5, "Ratio of uncompacted log to total log above which the cleaner compacts the log.", Range(0, 1), synonyms=_syn("log.cleaner.min.cleanable.ratio")),
    ConfigDef("cleanup.policy", _LI, ("delete",), "Retention policy for old segments: delete, compact, or both.", _CLEANUP_POLICIES, synonyms=_syn("log.cleanup.policy")),
    ConfigDef("unclean.leader.election.enable", _B, False, "Whether a replica not in the ISR may become leader as a last resort, at the risk of data loss.", synonyms=_syn("unclean.leader.election.enable")),
    ConfigDef("min.insync.replicas", _I, 1, "Minimum number of in-sync replicas that must acknowledge a write with acks=all.", Range(1), synonyms=_syn("min.insync.replicas")),
    ConfigDef("compression.type", _S, "producer", "Final compression of the topic's batches; 'producer' keeps the producer's codec.", _COMPRESSION_TYPES, synonyms=_syn("compression.type")),
    ConfigDef("compression.gzip.level", _I, -1, "Compression level when compression.type is gzip.", _GZIP_LEVEL, synonyms=_syn("compression.gzip.level")),
    ConfigDef("compression.lz4.level", _I, 9, "Compression level when compression.type is lz4.", _LZ4_LEVEL, synonyms=_syn("compression.lz4.level")),
    ConfigDef("compression.zstd.level", _I, 3, "Compression level when compression.type is zstd.", _ZSTD_LEVEL, synonyms=_syn("compression.zstd.level")),
    ConfigDef("preallocate", _B, False, "Whether to preallocate the file on disk when creating a segment.", synonyms=_syn("log.preallocate")),
    ConfigDef("message.timestamp.type", _S, "CreateTime", "Whether a record's timestamp is the producer's (CreateTime) or the broker's append time (LogAppendTime).", _TIMESTAMP_TYPES, synonyms=_syn("log.message.timestamp.type")),
    ConfigDef("message.timestamp.difference.max.ms", _L, LONG_MAX, "[DEPRECATED] Maximum difference between the broker's clock and a CreateTime timestamp; use the before/after configs.", Range(0), synonyms=_syn("log.message.timestamp.difference.max.ms")),
    ConfigDef("message.timestamp.before.max.ms", _L, LONG_MAX, "How far before the broker's clock a CreateTime timestamp may be.", Range(0), synonyms=_syn("log.message.timestamp.before.max.ms")),
    ConfigDef("message.timestamp.after.max.ms", _L, LONG_MAX, "How far after the broker's clock a CreateTime timestamp may be.", Range(0), synonyms=_syn("log.message.timestamp.after.max.ms")),
    ConfigDef("leader.replication.throttled.replicas", _LI, (), "Replicas (partitionId:brokerId, or *) whose replication is throttled on the leader side.", _THROTTLED_REPLICAS),
    ConfigDef("follower.replication.throttled.replicas", _LI, (), "Replicas (partitionId:brokerId, or *) whose replication is throttled on the follower side.", _THROTTLED_REPLICAS),
    ConfigDef("remote.storage.enable", _B, False, "Whether the topic uses tiered storage (not supported by odradek: only false is accepted)."),
    ConfigDef("local.retention.ms", _L, -2, "Time to keep local segments when tiered storage is on; -2 means retention.ms.", Range(-2), synonyms=_syn("log.local.retention.ms")),
    ConfigDef("local.retention.bytes", _L, -2, "Size of local segments to keep when tiered storage is on; -2 means retention.bytes.", Range(-2), synonyms=_syn("log.local.retention.bytes")),
    ConfigDef("remote.log.copy.disable", _B, False, "Whether tiered data of the topic becomes read only."),
    ConfigDef("remote.log.delete.on.disable", _B, False, "Whether tiered data is deleted when tiered storage is turned off for the topic."),
)  # fmt: skip

# DynamicLogConfig.ReconfigurableConfigs: the first broker synonym of every topic config.
_LOG_RECONFIGURABLE = {d.synonyms[0].name for d in TOPIC_CONFIGS.values() if d.synonyms}
# authorizer.class.name values that turn odradek's ACL authorizer on: Kafka's own authorizers,
# so a server.properties written for Kafka works unchanged; "" is no authorizer.
AUTHORIZER_CLASS_NAMES = ("", "kafka.security.authorizer.AclAuthorizer",
                          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                          "kafka.security.auth.SimpleAclAuthorizer")
_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"

_BROKER_ROWS = (
    # server
    ConfigDef("broker.id", _I, 0, "The broker's id; kept equal to node.id. (Kafka's -1 asks ZooKeeper for one; odradek starts at 0.)", Range(0)),
    ConfigDef("node.id", _I, 0, "The node's id; a synonym of broker.id.", Range(0)),
    ConfigDef("broker.rack", _S, None, "Rack of the broker, used for rack-aware replica assignment and returned in Metadata."),
    ConfigDef("cluster.id", _S, None, "odradek only: the cluster id; the metadata store generates and keeps one when unset."),
    ConfigDef("message.max.bytes", _I, 1048588, "Largest record batch size allowed, after compression; topics override it with max.message.bytes.", Range(0)),
    ConfigDef("num.network.threads", _I, 3, "Accepted for compatibility; odradek serves all connections from one event loop.", Range(1), dynamic=True),
    ConfigDef("num.io.threads", _I, 8, "Accepted for compatibility; odradek serves all requests from one event loop.", Range(1), dynamic=True),
    ConfigDef("delete.topic.enable", _B, True, "Whether DeleteTopics is allowed."),
    ConfigDef("auto.create.topics.enable", _B, True, "Whether Metadata requests for an unknown topic create it."),
    ConfigDef("num.partitions", _I, 1, "Default number of partitions of a new topic.", Range(1)),
    ConfigDef("default.replication.factor", _I, 1, "Default replication factor of a new topic."),
    ConfigDef("compression.type", _S, "producer", "Default final compression of topics; 'producer' keeps the producer's codec.", _COMPRESSION_TYPES),
    ConfigDef("compression.gzip.level", _I, -1, "Default gzip compression level.", _GZIP_LEVEL),
    ConfigDef("compression.lz4.level", _I, 9, "Default lz4 compression level.", _LZ4_LEVEL),
    ConfigDef("compression.zstd.level", _I, 3, "Default zstd compression level.", _ZSTD_LEVEL),
    ConfigDef("fetch.max.bytes", _I, 55 * 1024**2, "Maximum bytes returned for one Fetch request.", Range(1024)),
    # socket server
    ConfigDef("listeners", _S, "PLAINTEXT://:9092", "Comma-separated NAME://host:port to listen on; an empty host binds all interfaces.", dynamic=True, per_broker=True),
    ConfigDef("advertised.listeners", _S, None, "Listeners published to clients in Metadata, when different from listeners.", dynamic=True, per_broker=True),
    ConfigDef("listener.security.protocol.map", _S, _PROTOCOL_MAP, "Listener name to security protocol (odradek serves PLAINTEXT).", dynamic=True, per_broker=True),
    # Kafka's default is 102400; a fixed buffer that small halves a fetch's throughput and
    # doubles its CPU against the kernel's autotuned one (README, Configuration).
    ConfigDef("socket.send.buffer.bytes", _I, -1, "SO_SNDBUF of the server sockets; -1 for the OS default.", Range(-1)),
    ConfigDef("socket.receive.buffer.bytes", _I, -1, "SO_RCVBUF of the server sockets; -1 for the OS default.", Range(-1)),
    ConfigDef("socket.request.max.bytes", _I, 100 * 1024**2, "Largest request accepted, in bytes.", Range(1)),
    ConfigDef("max.connections", _I, INT_MAX, "Maximum connections the broker accepts.", Range(0), dynamic=True),
    ConfigDef("max.connections.per.ip", _I, INT_MAX, "Maximum connections accepted from one IP address.", Range(0), dynamic=True),
    ConfigDef("connections.max.idle.ms", _L, 10 * MINUTE_MS, "Idle connections are closed after this time.", Range(1)),
    ConfigDef("queued.max.request.bytes", _L, -1, "Bytes requests may hold while they are being received, across all connections; -1 for no bound.", Range(-1)),
    # security (SslConfigs, BrokerSecurityConfigs, SaslConfigs). A listener's own value is
    # listener.name.<listener>.<config> (sasl.jaas.config: listener.name.<listener>.<mechanism>.
    # sasl.jaas.config); see BrokerConfig.listener_config.
    ConfigDef("ssl.protocol", _S, "TLSv1.3", "Highest TLS version offered; ssl.enabled.protocols lists the ones allowed.", dynamic=True, per_broker=True),
    ConfigDef("ssl.enabled.protocols", _LI, ("TLSv1.2", "TLSv1.3"), "TLS versions a TLS listener accepts.", OneOf(("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")), dynamic=True, per_broker=True),
    ConfigDef("ssl.cipher.suites", _LI, (), "Cipher suites of TLS 1.2 and earlier a TLS listener accepts (IANA or OpenSSL names); empty for the defaults.", dynamic=True, per_broker=True),
    ConfigDef("ssl.keystore.type", _S, "JKS", "Format of the keystore: PEM or PKCS12 (odradek cannot read JKS).", dynamic=True, per_broker=True),
    ConfigDef("ssl.keystore.location", _S, None, "File of the broker's private key and certificate chain.", dynamic=True, per_broker=True),
    ConfigDef("ssl.keystore.password", _P, None, "Password of a PKCS12 keystore file.", dynamic=True, per_broker=True),
    ConfigDef("ssl.key.password", _P, None, "Password of the private key (an encrypted PEM key, or the key in a PKCS12 keystore).", dynamic=True, per_broker=True),
    ConfigDef("ssl.keystore.key", _P, None, "The broker's private key in PEM, in-line (with ssl.keystore.type=PEM).", dynamic=True, per_broker=True),
    ConfigDef("ssl.keystore.certificate.chain", _P, None, "The broker's certificate chain in PEM, in-line (with ssl.keystore.type=PEM).", dynamic=True, per_broker=True),
    ConfigDef("ssl.truststore.type", _S, "JKS", "Format of the truststore: PEM or PKCS12 (odradek cannot read JKS).", dynamic=True, per_broker=True),
    ConfigDef("ssl.truststore.location", _S, None, "File of the certificate authorities trusted to sign peer certificates.", dynamic=True, per_broker=True),
    ConfigDef("ssl.truststore.password", _P, None, "Password of a PKCS12 truststore file.", dynamic=True, per_broker=True),
    ConfigDef("ssl.truststore.certificates", _P, None, "Trusted certificate authorities in PEM, in-line (with ssl.truststore.type=PEM).", dynamic=True, per_broker=True),
    ConfigDef("ssl.client.auth", _S, "none", "Whether a TLS listener asks clients for a certificate: required, requested or none.", OneOf(("required", "requested", "none")), dynamic=True, per_broker=True),
    ConfigDef("ssl.endpoint.identification.algorithm", _S, "https", "How a broker connecting to another checks its certificate's name: https, or empty for no check.", dynamic=True, per_broker=True),
    ConfigDef("ssl.principal.mapping.rules", _S, "DEFAULT", "Rules mapping a client certificate's distinguished name to a principal name (RULE:pattern/replacement/[LU], DEFAULT).", dynamic=True, per_broker=True),
    ConfigDef("sasl.enabled.mechanisms", _LI, ("GSSAPI",), "SASL mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (odradek has no GSSAPI or OAUTHBEARER).", dynamic=True, per_broker=True),
    ConfigDef("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI", "SASL mechanism brokers use between themselves.", dynamic=True, per_broker=True),
    ConfigDef("sasl.jaas.config", _P, None, "JAAS login context: the PLAIN users (user_<name>=\"<password>\") and the broker's own username and password.", dynamic=True, per_broker=True),
    ConfigDef("authorizer.class.name", _S, "", "The authorizer: Kafka's ACL authorizer class names (kafka.security.authorizer.AclAuthorizer, org.apache.kafka.metadata.authorizer.StandardAuthorizer) turn ACLs on; empty leaves every request authorized.", OneOf(AUTHORIZER_CLASS_NAMES)),
    ConfigDef("super.users", _S, None, "Principals allowed everything whatever the ACLs, separated by ';' (User:admin;User:broker)."),
    ConfigDef("allow.everyone.if.no.acl.found", _B, False, "Whether a resource no ACL names is open to everyone (with an authorizer)."),
    ConfigDef("quota.window.num", _I, 11, "Samples kept in memory to measure a client's rates against its quotas.", Range(1)),
    ConfigDef("quota.window.size.seconds", _I, 1, "Time span of each sample of a client's rates.", Range(1)),
    ConfigDef("connections.max.reauth.ms", _L, 0, "Longest session of an authenticated SASL connection before the client must re-authenticate (KIP-368); 0 for no limit.", Range(0)),
    ConfigDef("connection.failed.authentication.delay.ms", _I, 100, "Delay of the answer to a failed authentication, which slows password guessing.", Range(0)),
    # log
    ConfigDef("log.dir", _S, "/tmp/kafka-logs", "Directory of the log data, used when log.dirs is not set."),
    ConfigDef("log.dirs", _S, None, "Comma-separated directories of the log data; overrides log.dir."),
    ConfigDef("log.segment.bytes", _I, 1024**3, "Maximum size of a segment file.", Range(_SEGMENT_BYTES_MIN)),
    ConfigDef("log.roll.ms", _L, None, "Time after which a segment is rolled; overrides log.roll.hours."),
    ConfigDef("log.roll.hours", _I, 7 * 24, "Time after which a segment is rolled, in hours.", Range(1)),
    ConfigDef("log.roll.jitter.ms", _L, None, "Maximum jitter subtracted from the roll time; overrides log.roll.jitter.hours."),
    ConfigDef("log.roll.jitter.hours", _I, 0, "Maximum jitter subtracted from the roll time, in hours.", Range(0)),
    ConfigDef("log.retention.ms", _L, None, "Time to keep a log segment; overrides log.retention.minutes; -1 for no limit."),
    ConfigDef("log.retention.minutes", _I, None, "Time to keep a log segment in minutes; overrides log.retention.hours."),
    ConfigDef("log.retention.hours", _I, 7 * 24, "Time to keep a log segment, in hours."),
    ConfigDef("log.retention.bytes", _L, -1, "Maximum size of a partition's log before old segments are deleted; -1 for no limit."),
    ConfigDef("log.retention.check.interval.ms", _L, 5 * MINUTE_MS, "How often the log manager looks for segments to delete.", Range(1)),
    ConfigDef("log.cleanup.policy", _LI, ("delete",), "Default retention policy for old segments: delete, compact, or both.", _CLEANUP_POLICIES),
    ConfigDef("log.index.size.max.bytes", _I, 10 * 1024**2, "Maximum size of an offset index file.", Range(4)),
    ConfigDef("log.index.interval.bytes", _I, 4096, "How often (in bytes of log) an offset index entry is added.", Range(0)),
    ConfigDef("log.flush.interval.messages", _L, LONG_MAX, "Messages accumulated in a partition before they are fsynced.", Range(1)),
    ConfigDef("log.flush.interval.ms", _L, None, "Maximum time a message stays unflushed; defaults to log.flush.scheduler.interval.ms."),
    ConfigDef("log.flush.scheduler.interval.ms", _L, LONG_MAX, "How often the flusher checks whether a log needs an fsync."),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", _I, 60000, "How often the recovery points of the logs are written to the recovery-point checkpoint.", Range(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", _I, 60000, "How often the log start offsets are written to the log-start-offset checkpoint.", Range(0)),
    ConfigDef("log.segment.delete.delay.ms", _L, 60000, "Time to wait before deleting a file from the filesystem.", Range(0)),
    ConfigDef("log.preallocate", _B, False, "Whether to preallocate the file on disk when creating a segment."),
    ConfigDef("log.message.timestamp.type", _S, "CreateTime", "Default timestamp type of topics: CreateTime or LogAppendTime.", _TIMESTAMP_TYPES),
    ConfigDef("log.message.timestamp.difference.max.ms", _L, LONG_MAX, "[DEPRECATED] Default of message.timestamp.difference.max.ms.", Range(0)),
    ConfigDef("log.message.timestamp.before.max.ms", _L, LONG_MAX, "Default of message.timestamp.before.max.ms.", Range(0)),
    ConfigDef("log.message.timestamp.after.max.ms", _L, LONG_MAX, "Default of message.timestamp.after.max.ms.", Range(0)),
    ConfigDef("log.local.retention.ms", _L, -2, "Default of local.retention.ms (tiered storage).", Range(-2)),
    ConfigDef("log.local.retention.bytes", _L, -2, "Default of local.retention.bytes (tiered storage).", Range(-2)),
    ConfigDef("min.insync.replicas", _I, 1, "Minimum in-sync replicas that must acknowledge an acks=all write.", Range(1)),
    ConfigDef("unclean.leader.election.enable", _B, False, "Whether a replica outside the ISR may become leader as a last resort."),
    # log cleaner
    ConfigDef("log.cleaner.enable", _B, True, "Whether the log cleaner (compaction) runs."),
    ConfigDef("log.cleaner.backoff.ms", _L, 15000, "Sleep of the cleaner when there is no log to clean.", Range(0), dynamic=True),
    ConfigDef("log.cleaner.min.cleanable.ratio", _D, 0.5, "Default of min.cleanable.dirty.ratio.", Range(0, 1)),
    ConfigDef("log.cleaner.delete.retention.ms", _L, 24 * HOUR_MS, "Default of delete.retention.ms.", Range(0)),
    ConfigDef("log.cleaner.min.compaction.lag.ms", _L, 0, "Default of min.compaction.lag.ms.", Range(0)),
    ConfigDef("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX, "Default of max.compaction.lag.ms.", Range(1)),
    ConfigDef("log.cleaner.dedupe.buffer.size", _L, 128 * 1024 * 1024, "The total memory used for log deduplication across all cleaner threads (24 bytes per key)."),
    ConfigDef("log.cleaner.io.buffer.load.factor", _D, 0.9, "Log cleaner dedupe buffer load factor: the fraction of the dedupe buffer that can become full."),
    # replication
    ConfigDef("replica.lag.time.max.ms", _L, 30000, "A follower that has not caught up for this long leaves the ISR."),
    ConfigDef("replica.socket.timeout.ms", _I, 30000, "Socket timeout of the follower's fetch requests."),
    ConfigDef("replica.fetch.max.bytes", _I, 1024**2, "Bytes a follower fetches per partition.", Range(0)),
    ConfigDef("replica.fetch.min.bytes", _I, 1, "Minimum bytes a follower waits for in a fetch."),
    ConfigDef("replica.fetch.wait.max.ms", _I, 500, "Maximum wait of a follower's fetch."),
    ConfigDef("replica.fetch.backoff.ms", _I, 1000, "Sleep of a follower after a fetch error.", Range(0)),
    ConfigDef("replica.fetch.response.max.bytes", _I, 10 * 1024**2, "Bytes a follower fetches per request.", Range(0)),
    ConfigDef("num.replica.fetchers", _I, 1, "Fetcher tasks per source broker.", dynamic=True),
    ConfigDef("inter.broker.listener.name", _S, None, "Listener the brokers use between themselves; unset: the listener named after security.inter.broker.protocol. Only one of the two may be set."),
    ConfigDef("security.inter.broker.protocol", _S, SecurityProtocol.PLAINTEXT.value, "Security protocol between brokers; only one of this and inter.broker.listener.name may be set.", OneOf(tuple(SecurityProtocol))),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", _L, 5000, "How often high watermarks are saved to disk."),
    # group coordinator
    ConfigDef("group.min.session.timeout.ms", _I, 6000, "Smallest session timeout a consumer may ask for."),
    ConfigDef("group.max.session.timeout.ms", _I, 30 * MINUTE_MS, "Largest session timeout a consumer may ask for."),
    ConfigDef("group.initial.rebalance.delay.ms", _I, 3000, "Wait for more members before the first rebalance of an empty group."),
    ConfigDef("group.max.size", _I, INT_MAX, "Maximum members of one consumer group.", Range(1)),
    # the consumer protocol (KIP-848)
    ConfigDef("group.consumer.session.timeout.ms", _I, 45000, "A consumer-protocol member whose heartbeats stop for this long is removed.", Range(1)),
    ConfigDef("group.consumer.min.session.timeout.ms", _I, 45000, "Smallest group.consumer.session.timeout.ms allowed.", Range(1)),
    ConfigDef("group.consumer.max.session.timeout.ms", _I, 60000, "Largest group.consumer.session.timeout.ms allowed.", Range(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", _I, 5000, "How often consumer-protocol members heartbeat.", Range(1)),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", _I, 5000, "Smallest group.consumer.heartbeat.interval.ms allowed.", Range(1)),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", _I, 15000, "Largest group.consumer.heartbeat.interval.ms allowed.", Range(1)),
    ConfigDef("group.consumer.max.size", _I, INT_MAX, "Maximum members of one consumer-protocol group.", Range(1)),
    ConfigDef("group.consumer.assignors", _LI, ("uniform", "range"), "Server-side assignors (names, or Kafka's class names); the first is the default.", _ASSIGNORS),
    ConfigDef("group.consumer.migration.policy", _S, "bidirectional", "Whether an empty group may change between the classic and the consumer protocol: bidirectional, upgrade, downgrade or disabled.", OneOf(("bidirectional", "upgrade", "downgrade", "disabled"))),
    # share groups (KIP-932)
    ConfigDef("group.share.session.timeout.ms", _I, 45000, "A share group member whose heartbeats stop for this long is removed.", Range(1)),
    ConfigDef("group.share.min.session.timeout.ms", _I, 45000, "Smallest group.share.session.timeout.ms allowed.", Range(1)),
    ConfigDef("group.share.max.session.timeout.ms", _I, 60000, "Largest group.share.session.timeout.ms allowed.", Range(1)),
    ConfigDef("group.share.heartbeat.interval.ms", _I, 5000, "How often share group members heartbeat.", Range(1)),
    ConfigDef("group.share.min.heartbeat.interval.ms", _I, 5000, "Smallest group.share.heartbeat.interval.ms allowed.", Range(1)),
    ConfigDef("group.share.max.heartbeat.interval.ms", _I, 15000, "Largest group.share.heartbeat.interval.ms allowed.", Range(1)),
    ConfigDef("group.share.max.size", _I, 200, "Maximum members of one share group.", Range(1)),
    ConfigDef("group.share.record.lock.duration.ms", _I, 30000, "How long a record delivered to a share group member is its alone; unacknowledged, it is then delivered again.", Range(1)),
    ConfigDef("group.share.min.record.lock.duration.ms", _I, 15000, "Smallest group.share.record.lock.duration.ms allowed.", Range(1)),
    ConfigDef("group.share.max.record.lock.duration.ms", _I, 60000, "Largest group.share.record.lock.duration.ms allowed.", Range(1)),
    ConfigDef("group.share.delivery.count.limit", _I, 5, "Deliveries of a record to a share group after which it is archived, never delivered again.", Range(2, 10)),
    ConfigDef("group.share.partition.max.record.locks", _I, 2000, "Records of one share-partition delivered and not yet acknowledged, at most.", Range(100, 10000)),
    ConfigDef("share.auto.offset.reset", _S, "latest", "Where a share group starts reading a partition it has no state for: latest or earliest.", OneOf(("latest", "earliest"))),
    ConfigDef("share.isolation.level", _S, "read_uncommitted", "Whether share groups read records of transactions not yet committed: read_uncommitted or read_committed.", OneOf(("read_uncommitted", "read_committed"))),
    ConfigDef("share.coordinator.state.topic.num.partitions", _I, 50, "Partitions of __share_group_state.", Range(1)),
    ConfigDef("share.coordinator.state.topic.replication.factor", _SH, 3, "Replication factor of __share_group_state.", Range(1)),
    ConfigDef("share.coordinator.state.topic.min.isr", _SH, 2, "min.insync.replicas of __share_group_state.", Range(1)),
    ConfigDef("share.coordinator.state.topic.segment.bytes", _I, 100 * 1024**2, "Segment size of __share_group_state.", Range(1)),
    ConfigDef("offset.metadata.max.bytes", _I, 4096, "Largest metadata string of an offset commit."),
    ConfigDef("offsets.topic.num.partitions", _I, 50, "Partitions of __consumer_offsets.", Range(1)),
    ConfigDef("offsets.topic.replication.factor", _SH, 3, "Replication factor of __consumer_offsets.", Range(1)),
    ConfigDef("offsets.topic.segment.bytes", _I, 100 * 1024**2, "Segment size of __consumer_offsets.", Range(1)),
    ConfigDef("offsets.retention.minutes", _I, 7 * 24 * 60, "Committed offsets of an empty group are kept this long.", Range(1)),
    ConfigDef("offsets.retention.check.interval.ms", _L, 10 * MINUTE_MS, "How often expired offsets are looked for.", Range(1)),
    ConfigDef("offsets.commit.timeout.ms", _I, 5000, "An offset commit waits this long for the replicas of __consumer_offsets to have it.", Range(1)),
    # transactions and producer state
    ConfigDef("transaction.state.log.num.partitions", _I, 50, "Partitions of __transaction_state.", Range(1)),
    ConfigDef("transaction.state.log.replication.factor", _SH, 3, "Replication factor of __transaction_state.", Range(1)),
    ConfigDef("transaction.state.log.min.isr", _I, 2, "min.insync.replicas of __transaction_state.", Range(1)),
    ConfigDef("transaction.state.log.segment.bytes", _I, 100 * 1024**2, "Segment size of __transaction_state.", Range(1)),
    ConfigDef("transaction.max.timeout.ms", _I, 15 * MINUTE_MS, "Largest transaction timeout a producer may ask for.", Range(1)),
    ConfigDef("transactional.id.expiration.ms", _I, 7 * 24 * HOUR_MS, "A transactional id without transactions for this long expires.", Range(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, 10000, "How often timed-out transactions are aborted.", Range(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", _I, HOUR_MS, "How often expired transactional ids are removed.", Range(1)),
    ConfigDef("producer.id.expiration.ms", _I, 24 * HOUR_MS, "A producer id without writes for this long expires.", Range(1), dynamic=True),
    ConfigDef("producer.id.expiration.check.interval.ms", _I, 10 * MINUTE_MS, "How often expired producer ids are removed.", Range(1)),
    # zookeeper
    ConfigDef("zookeeper.connect", _S, None, "ZooKeeper connection string host:port[,host:port][/chroot]; unset runs the embedded local metadata store."),
    ConfigDef("zookeeper.session.timeout.ms", _I, 18000, "ZooKeeper session timeout."),
    ConfigDef("zookeeper.connection.timeout.ms", _I, None, "Time to wait for a ZooKeeper connection; defaults to zookeeper.session.timeout.ms."),
    # the controller
    ConfigDef("auto.leader.rebalance.enable", _B, True, "Whether the controller moves leadership back to preferred replicas when brokers are imbalanced."),
    ConfigDef("leader.imbalance.per.broker.percentage", _I, 10, "Share of a broker's preferred partitions led elsewhere above which the controller rebalances.", Range(0)),
    ConfigDef("leader.imbalance.check.interval.seconds", _L, 300, "How often the controller checks leader imbalance.", Range(1)),
    ConfigDef("controlled.shutdown.enable", _B, True, "Whether a stopping broker first asks the controller to move its leaderships."),
    ConfigDef("controlled.shutdown.max.retries", _I, 3, "Attempts of a controlled shutdown before stopping anyway.", Range(0)),
    ConfigDef("controlled.shutdown.retry.backoff.ms", _L, 5000, "Wait between controlled shutdown attempts.", Range(0)),
)  # fmt: skip

BROKER_CONFIGS: dict[str, ConfigDef] = _table(
    *(
        dataclasses.replace(row, dynamic=True) if row.name in _LOG_RECONFIGURABLE else row
        for row in _BROKER_ROWS
    )
)



def _group_row(name: str, broker_name: str) -> ConfigDef:
    broker = _BROKER_CONFIG_ROWS[broker_name]
    return ConfigDef(name, broker.type, broker.default, broker.documentation, broker.validator,
                     synonyms=_syn(broker_name))


_BROKER_CONFIG_ROWS = {row.name: row for row in _BROKER_ROWS}
# Kafka's GroupConfig (KIP-848, KIP-932): what one group may set for itself, with
# IncrementalAlterConfigs on a GROUP resource. A group without its own value takes the
# broker config it names as its synonym; the bounds a value must keep are brokers' configs
# too (group_config.validate_group_overrides).
GROUP_CONFIGS: dict[str, ConfigDef] = _table(
    _group_row("consumer.session.timeout.ms", "group.consumer.session.timeout.ms"),
    _group_row("consumer.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms"),
    _group_row("share.session.timeout.ms", "group.share.session.timeout.ms"),
    _group_row("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms"),
    _group_row("share.record.lock.duration.ms", "group.share.record.lock.duration.ms"),
    _group_row("share.auto.offset.reset", "share.auto.offset.reset"),
    _group_row("share.isolation.level", "share.isolation.level"),
)


# (group id, group config) -> the group's value: its own (odradek.server.group_config), else
# its broker synonym's. What the group coordinator and the share-partitions read.
GroupConfigLookup = Callable[[str, str], Any]


def group_config_synonym(name: str) -> str:
    """The broker config a group config takes its value from when the group sets none."""
    return GROUP_CONFIGS[name].synonyms[0].name


def broker_group_config(config: Callable[[str], Any]) -> GroupConfigLookup:
    """Group configs with no group's own values: each is its broker synonym's."""
    return lambda group_id, name: config(group_config_synonym(name))

# A listener's own value of a config: listener.name.<listener>.<config>, and for SASL configs
# per mechanism listener.name.<listener>.<mechanism>.<config> (Kafka's ListenerName.configPrefix
# and saslMechanismConfigPrefix; listener and mechanism in lower case).
LISTENER_PREFIX = "listener.name."


def listener_config_name(listener: str, name: str, mechanism: str | None = None) -> str:
    prefix = f"{LISTENER_PREFIX}{listener.lower()}."
    return f"{prefix}{mechanism.lower()}.{name}" if mechanism else prefix + name


def broker_config_def(name: str) -> ConfigDef | None:
    """The definition of a broker config key: its row, or for a listener's own value the row
    of the config it sets; None for a key Kafka's brokers do not define."""
    if name in BROKER_CONFIGS:
        return BROKER_CONFIGS[name]
    if not name.startswith(LISTENER_PREFIX):
        return None
    _, _, config = name[len(LISTENER_PREFIX):].partition(".")
    if config in BROKER_CONFIGS:
        return BROKER_CONFIGS[config]
    _, _, sasl_config = config.partition(".")
    if sasl_config.startswith("sasl.") and sasl_config in BROKER_CONFIGS:
        return BROKER_CONFIGS[sasl_config]
    return None
