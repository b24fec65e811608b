"""Offsets on the driver: which partitions a source reads, where each range starts and ends,
and how a micro-batch is cut to a rate limit.

A source's position is ``{topic: {partition: offset}}`` (:data:`Positions`), the form Spark
checkpoints for its Kafka connector: partition numbers are strings there, because the
position travels as JSON. :class:`Cluster` asks the brokers, through one confluent-kafka
AdminClient, which partitions exist and what their earliest and latest offsets are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import confluent_kafka
import confluent_kafka.admin
from pyspark.sql.datasource import InputPartition

from odradek.spark.options import EARLIEST, LATEST, OffsetRequest, OptionError, SourceOptions

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Positions = dict[str, dict[str, int]]  # {topic: {"partition": offset}}, as checkpointed

ADMIN_TIMEOUT_SECONDS = 30.0

DATA_LOSS_HINT = ("Some data may have been lost because it is not available in the topic any "
                  "more: either retention deleted it or the topic was deleted before all its "
                  "data was processed. If you don't want the query to fail in such cases, set "
                  "the source option 'failOnDataLoss' to 'false'.")


class DataLossError(RuntimeError):
    pass


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Records ``[start, end)`` of one partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_positions(offsets: Mapping[TopicPartition, int]) -> Positions:
    positions: Positions = {}
    for (topic, partition), offset in sorted(offsets.items()):
        positions.setdefault(topic, {})[str(partition)] = offset
    return positions


def from_positions(positions: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {(topic, int(partition)): offset
            for topic, partitions in positions.items() for partition, offset in partitions.items()}


def data_loss(options: SourceOptions, message: str) -> None:
    """Fails with ``message`` when ``failOnDataLoss`` is true, else logs it."""
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}. {DATA_LOSS_HINT}")
    log.warning("%s; skipping it ('failOnDataLoss' is false)", message)


class Cluster:
    """What the brokers say about the source's partitions. Not thread-safe; one per reader."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._admin = confluent_kafka.admin.AdminClient(dict(options.client_config))

    def partitions(self) -> list[TopicPartition]:
        """The partitions the source reads now, sorted; ``assign`` names its own."""
        if self.options.assign is not None:
            return sorted((t, p) for t, ps in self.options.assign.items() for p in ps)
        metadata = self._admin.list_topics(timeout=ADMIN_TIMEOUT_SECONDS)
        return sorted((name, p) for name, topic in metadata.topics.items()
                      if topic.error is None and self.options.matches(name)
                      for p in topic.partitions)

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets({tp: confluent_kafka.admin.OffsetSpec.earliest()
                                   for tp in partitions})

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets({tp: confluent_kafka.admin.OffsetSpec.latest()
                                   for tp in partitions})

    def for_timestamps(self, timestamps: Mapping[TopicPartition, int]
                       ) -> dict[TopicPartition, int]:
        """The first offset at or after each timestamp; -1 where no record is that late."""
        return self._list_offsets({tp: confluent_kafka.admin.OffsetSpec.for_timestamp(ts)
                                   for tp, ts in timestamps.items()})

    def resolve(self, request: OffsetRequest, partitions: list[TopicPartition]
                ) -> dict[TopicPartition, int]:
        """Concrete offsets for ``partitions`` from an option's request."""
        if request.kind == "earliest":
            return self.earliest(partitions)
        if request.kind == "latest":
            return self.latest(partitions)
        if request.kind == "offsets":
            wanted = _covering(request.per_partition, partitions, "Offsets")
            resolved = dict(wanted)
            for value, lookup in ((EARLIEST, self.earliest), (LATEST, self.latest)):
                resolved.update(lookup(tp for tp, offset in wanted.items() if offset == value))
            return resolved
        timestamps = ({tp: request.timestamp_ms for tp in partitions} if request.kind == "timestamp"
                      else _covering(request.per_partition, partitions, "OffsetsByTimestamp"))
        found = self.for_timestamps(timestamps)
        missing = [tp for tp, offset in found.items() if offset < 0]
        if missing and request.timestamp_strategy == "error":
            raise OptionError(f"no record at or after the requested timestamp in {missing}; set "
                              "'startingOffsetsByTimestampStrategy' to 'latest' to start at the "
                              "end of such partitions")
        found.update(self.latest(missing))
        return found

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Stores ``offsets`` as ``group``'s committed offsets, as a consumer would."""
        request = confluent_kafka.ConsumerGroupTopicPartitions(
            group, [confluent_kafka.TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        for future in self._admin.alter_consumer_group_offsets([request]).values():
            result = future.result(ADMIN_TIMEOUT_SECONDS)
            failed = [tp for tp in result.topic_partitions if tp.error is not None]
            if failed:
                raise confluent_kafka.KafkaException(failed[0].error)

    def _list_offsets(self, specs: Mapping[TopicPartition, object]) -> dict[TopicPartition, int]:
        if not specs:
            return {}
        futures = self._admin.list_offsets(
            {confluent_kafka.TopicPartition(t, p): spec for (t, p), spec in specs.items()},
            request_timeout=ADMIN_TIMEOUT_SECONDS)
        return {(tp.topic, tp.partition): future.result(ADMIN_TIMEOUT_SECONDS).offset
                for tp, future in futures.items()}


def _covering(per_partition: Mapping[TopicPartition, int], partitions: list[TopicPartition],
              what: str) -> dict[TopicPartition, int]:
    """Spark requires explicit offsets to name exactly the partitions being read."""
    missing = sorted(set(partitions) - set(per_partition))
    if missing:
        raise OptionError(f"'starting{what}' or 'ending{what}' must name every partition "
                          f"read; missing: {missing}")
    return {tp: per_partition[tp] for tp in partitions}


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """One range per partition, or, when ``minPartitions`` asks for more, large ranges cut
    into pieces in proportion to their size (Spark's KafkaOffsetRangeCalculator)."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    result = []
    for r in ranges:
        pieces = max(1, round(r.size / total * min_partitions))
        bounds = [r.start + r.size * i // pieces for i in range(pieces + 1)]
        result.extend(OffsetRange(r.topic, r.partition, lo, hi)
                      for lo, hi in zip(bounds, bounds[1:]) if hi > lo)
    return result


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               max_rows: int) -> dict[TopicPartition, int]:
    """Where each partition's micro-batch ends when it may read ``max_rows`` records in all,
    shared in proportion to what each partition has waiting (Spark's ``rateLimit``)."""
    waiting = {tp: latest[tp] - start[tp] for tp in latest if latest[tp] > start[tp]}
    total = sum(waiting.values())
    if total <= max_rows:
        return dict(latest)
    end = dict(latest)
    for tp, size in waiting.items():
        share = max_rows * size / total
        end[tp] = start[tp] + (int(share) if share >= 1 else 1)
    return end
