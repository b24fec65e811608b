"""The connector's options, with the names and meanings of Spark's Kafka connector.

Spark hands a data source its options as strings in a case-insensitive map. They are
parsed here once, on the driver, into :class:`SourceOptions` and :class:`SinkOptions`, and
every mistake is reported as :class:`OptionError` naming the option, before any query runs.

Where to start and stop reading is an :class:`OffsetRequest`, resolved against the cluster
later (``offsets.py``): ``"earliest"`` or ``"latest"`` for every partition, explicit offsets
per partition (``{"topic": {"0": 23, "1": -2}}``, -2 for earliest and -1 for latest), one
timestamp for every partition (``startingTimestamp``), or a timestamp per partition
(``startingOffsetsByTimestamp``). The timestamp forms win over offsets, as in Spark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

EARLIEST = -2
LATEST = -1

OffsetKind = Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]


class OptionError(ValueError):
    """An option is missing, unknown in combination, or malformed."""


# Spark's spelling of each option, for messages: Spark hands them over case-insensitively.
_NAMES = {name.lower(): name for name in (
    "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
    "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp", "maxOffsetsPerTrigger", "minPartitions", "failOnDataLoss",
    "includeHeaders", "kafkaConsumer.pollTimeoutMs", "exactlyOnce", "sinkId")}


def _display(name: str) -> str:
    return repr(_NAMES.get(name, name))


@dataclass(frozen=True)
class OffsetRequest:
    """Where to start (or end) reading: see the module docstring."""

    kind: OffsetKind
    # "offsets": {(topic, partition): offset, EARLIEST or LATEST}
    # "timestamps": {(topic, partition): timestamp in ms}
    per_partition: Mapping[tuple[str, int], int] = field(default_factory=dict)
    timestamp_ms: int | None = None  # "timestamp"
    # what a timestamp that no record reaches means: fail ("error") or the log end ("latest")
    timestamp_strategy: Literal["error", "latest"] = "error"


@dataclass(frozen=True)
class SourceOptions:
    client_config: Mapping[str, str]  # the kafka.* options, without the prefix
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    assign: Mapping[str, tuple[int, ...]] | None
    starting: OffsetRequest
    ending: OffsetRequest
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    group_id_prefix: str
    commit_group: str | None  # the group each finished micro-batch's end offsets go to
    poll_timeout_ms: int

    @property
    def bootstrap_servers(self) -> str:
        return self.client_config["bootstrap.servers"]

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is one this source reads (Kafka's pattern subscription matches
        the whole name and leaves out internal topics)."""
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.assign is not None:
            return topic in self.assign
        return not topic.startswith("__") and re.fullmatch(self.subscribe_pattern, topic) is not None


@dataclass(frozen=True)
class SinkOptions:
    client_config: Mapping[str, str]
    topic: str | None  # overrides the topic column when given
    include_headers: bool
    # with exactlyOnce: the name of the sink's transactional ids and marker groups
    # (``exactly_once.py``); None for the at-least-once sink
    sink_id: str | None = None


def source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = _lower(options)
    client_config = _client_config(opts)
    strategies = [name for name in ("subscribe", "subscribepattern", "assign") if name in opts]
    if len(strategies) != 1:
        raise OptionError("exactly one of the options 'subscribe', 'subscribePattern' or "
                          f"'assign' must be given (got {len(strategies) or 'none'})")
    subscribe = subscribe_pattern = assign = None
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("'subscribe' names no topic")
    elif "subscribepattern" in opts:
        subscribe_pattern = opts["subscribepattern"].strip()
        try:
            re.compile(subscribe_pattern)
        except re.error as e:
            raise OptionError(f"'subscribePattern' is not a valid regular expression: {e}")
    else:
        assign = {topic: tuple(partitions) for topic, partitions in
                  _json_object(opts, "assign", list).items()}
        for topic, partitions in assign.items():
            if not all(isinstance(p, int) and p >= 0 for p in partitions):
                raise OptionError(f"'assign' lists a partition of {topic!r} that is not a "
                                  "non-negative integer")

    if streaming and ("endingoffsets" in opts or "endingtimestamp" in opts
                      or "endingoffsetsbytimestamp" in opts):
        raise OptionError("'endingOffsets' can only be used in batch queries")

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError("'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'")
    starting = _offset_request(opts, "starting", default="latest" if streaming else "earliest",
                               timestamp_strategy=strategy)
    ending = _offset_request(opts, "ending", default="latest", timestamp_strategy="latest")
    if not streaming and starting.kind == "latest":
        raise OptionError("'startingOffsets' can't be 'latest' in a batch query")
    if ending.kind == "earliest" or (ending.kind == "offsets"
                                     and EARLIEST in ending.per_partition.values()):
        raise OptionError("'endingOffsets' can't be 'earliest' (-2)")
    if starting.kind == "offsets" and LATEST in starting.per_partition.values() and not streaming:
        raise OptionError("'startingOffsets' can't be 'latest' (-1) in a batch query")

    group_id_prefix = opts.get("groupidprefix",
                               "spark-kafka-source" if streaming else "spark-kafka-relation")
    return SourceOptions(
        client_config=client_config,
        subscribe=subscribe,
        subscribe_pattern=subscribe_pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_positive_int(opts, "maxoffsetspertrigger"),
        min_partitions=_positive_int(opts, "minpartitions"),
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        include_headers=_bool(opts, "includeheaders", False),
        group_id_prefix=group_id_prefix,
        commit_group=opts.get("commitoffsetstogroup") or client_config.get("group.id"),
        poll_timeout_ms=_positive_int(opts, "kafkaconsumer.polltimeoutms") or 120_000,
    )


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    client_config = _client_config(opts)
    topic = opts.get("topic") or None
    sink_id = opts.get("sinkid", "").strip() or None
    if _bool(opts, "exactlyonce", False):
        if sink_id is None:
            raise OptionError("'exactlyOnce' needs the option 'sinkId': a name for the sink "
                              "that stays the same when the query restarts from its "
                              "checkpoint")
        if topic is None:
            raise OptionError("'exactlyOnce' needs the option 'topic': each task records the "
                              "micro-batches it committed on that topic's partition 0, so "
                              "rows can't choose their topic")
        if "transactional.id" in client_config:
            raise OptionError("'kafka.transactional.id' can't be set with 'exactlyOnce': "
                              "each task's transactional id is '<sinkId>-<partition id>'")
    elif sink_id is not None:
        raise OptionError("'sinkId' is only used with 'exactlyOnce' set to true")
    return SinkOptions(client_config=client_config, topic=topic,
                       include_headers=_bool(opts, "includeheaders", False), sink_id=sink_id)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _client_config(opts: Mapping[str, str]) -> dict[str, str]:
    config = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    if not config.get("bootstrap.servers"):
        raise OptionError("option 'kafka.bootstrap.servers' must be given")
    return config


def _offset_request(opts: Mapping[str, str], which: str, *, default: str,
                    timestamp_strategy: str) -> OffsetRequest:
    by_timestamp = f"{which}offsetsbytimestamp"
    if f"{which}timestamp" in opts:
        return OffsetRequest("timestamp", timestamp_ms=_int(opts, f"{which}timestamp"),
                             timestamp_strategy=timestamp_strategy)
    if by_timestamp in opts:
        return OffsetRequest("timestamps", per_partition=_per_partition(opts, by_timestamp),
                             timestamp_strategy=timestamp_strategy)
    value = opts.get(f"{which}offsets", default).strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetRequest(value.lower())
    per_partition = _per_partition(opts, f"{which}offsets")
    if any(offset < EARLIEST for offset in per_partition.values()):
        raise OptionError(f"'{which}Offsets' has an offset below -2")
    return OffsetRequest("offsets", per_partition=per_partition)


def _per_partition(opts: Mapping[str, str], name: str) -> dict[tuple[str, int], int]:
    result = {}
    for topic, partitions in _json_object(opts, name, dict).items():
        for partition, value in partitions.items():
            if not (str(partition).isdigit() and isinstance(value, int)):
                raise OptionError(f"{_display(name)} must map each topic to {{partition: integer}}")
            result[(topic, int(partition))] = value
    return result


def _json_object(opts: Mapping[str, str], name: str, value_type: type) -> dict:
    try:
        parsed = json.loads(opts[name])
    except json.JSONDecodeError as e:
        raise OptionError(f"{_display(name)} is not valid JSON: {e}") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, value_type) for v in parsed.values()):
        raise OptionError(f"{_display(name)} must be a JSON object of topic to "
                          f"{'partitions' if value_type is list else 'offsets'}")
    return parsed


def _int(opts: Mapping[str, str], name: str) -> int:
    try:
        return int(opts[name])
    except ValueError:
        raise OptionError(f"{_display(name)} must be an integer, not {opts[name]!r}") from None


def _positive_int(opts: Mapping[str, str], name: str) -> int | None:
    if name not in opts:
        return None
    value = _int(opts, name)
    if value <= 0:
        raise OptionError(f"{_display(name)} must be positive, not {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    value = opts.get(name)
    if value is None:
        return default
    if value.lower() not in ("true", "false"):
        raise OptionError(f"{_display(name)} must be true or false, not {value!r}")
    return value.lower() == "true"
