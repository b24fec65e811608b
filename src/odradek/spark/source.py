"""The ``odradek`` data source: Spark reads and writes topics with it, batch and streaming.

Spark calls a data source's methods in different processes. The driver's Python worker
plans: it parses the options, asks the cluster for offsets (:class:`Cluster`) and cuts the
work into :class:`OffsetRange` partitions. Each executor task gets a fresh reader built from
the pickled data source and reads its one range (``reader.py``). So readers connect to the
cluster lazily, in the method that needs it, never in ``__init__``.

A streaming query's position is ``{topic: {partition: offset}}``, checkpointed by Spark.
Each micro-batch reads from the previous end to the latest offsets, cut by
``maxOffsetsPerTrigger``; partitions that appear later are read from their earliest offset.
With ``commitOffsetsToGroup`` (or ``kafka.group.id``), each finished micro-batch's end
offsets are committed to that consumer group, so lag tools see how far the query is behind.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from odradek.spark.offsets import (
    Cluster,
    OffsetRange,
    Positions,
    TopicPartition,
    data_loss,
    from_positions,
    rate_limit,
    split_ranges,
    to_positions,
)
from odradek.spark.options import OptionError, sink_options, source_options
from odradek.spark.reader import read_range
from odradek.spark.schema import arrow_schema, source_schema
from odradek.spark.writer import BatchWriter, StreamWriter, check_sink_schema


class OdradekDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        return source_schema(str(self.options.get("includeHeaders", "false")).lower() == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        options = sink_options(self.options)
        check_sink_schema(schema, options)
        return BatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        options = sink_options(self.options)
        check_sink_schema(schema, options)
        return StreamWriter(options)


class BatchReader(DataSourceReader):
    def __init__(self, options, schema: StructType) -> None:
        self.options = source_options(options, streaming=False)
        self.arrow_schema = arrow_schema(schema)

    def partitions(self) -> list[OffsetRange]:
        cluster = Cluster(self.options)
        partitions = cluster.partitions()
        start = cluster.resolve(self.options.starting, partitions)
        end = cluster.resolve(self.options.ending, partitions)
        backwards = [tp for tp in partitions if end[tp] < start[tp]]
        if backwards:
            raise OptionError(f"the ending offset is before the starting offset in {backwards}")
        start = _check_available(self.options, start, cluster.earliest(partitions), end)
        ranges = [OffsetRange(t, p, start[(t, p)], end[(t, p)]) for t, p in partitions]
        return split_ranges(ranges, self.options.min_partitions)

    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.options, self.arrow_schema)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Not thread-safe; Spark calls a source from one thread."""

    def __init__(self, options, schema: StructType) -> None:
        self.options = source_options(options, streaming=True)
        self.arrow_schema = arrow_schema(schema)
        self._cluster: Cluster | None = None
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow's end
        self._committed: Positions | None = None  # last offsets committed to the group
        self._latest: Positions | None = None  # what latestOffset found, before the limit

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.options)
        return self._cluster

    def initialOffset(self) -> Positions:
        partitions = self.cluster.partitions()
        return to_positions(self.cluster.resolve(self.options.starting, partitions))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_offsets_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.cluster.latest(self.cluster.partitions())

    def latestOffset(self, start: Positions, limit: ReadLimit) -> Positions:
        # Spark plans a micro-batch only once the one before it has finished, so ``start``
        # is finished work. Spark's own commit() of a batch comes when the next one is
        # planned, and never for the last batch of a Trigger.AvailableNow query.
        self.commit(start)
        begin = self._with_new_partitions(from_positions(start))
        if self._target is not None:
            latest = {tp: max(begin.get(tp, 0), offset) for tp, offset in self._target.items()}
        else:
            latest = self.cluster.latest(begin)
        self._latest = to_positions(latest)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return to_positions({**begin, **latest})

    def reportLatestOffset(self) -> Positions | None:
        return self._latest  # Spark asks right after latestOffset, which just looked

    def partitions(self, start: Positions, end: Positions) -> list[OffsetRange]:
        begin, finish = from_positions(start), from_positions(end)
        gone = sorted(set(begin) - set(finish))
        if gone:
            data_loss(self.options, f"partitions {gone} are no longer read (deleted?)")
        earliest = self.cluster.earliest(finish)
        for tp in finish.keys() - begin.keys():
            if earliest[tp] > 0:
                data_loss(self.options, f"added partition {tp[0]}-{tp[1]} starts at offset "
                                        f"{earliest[tp]} instead of 0")
            begin[tp] = earliest[tp]
        begin = _check_available(self.options, begin, earliest, finish)
        ranges = [OffsetRange(t, p, begin[(t, p)], finish[(t, p)]) for t, p in sorted(finish)]
        return split_ranges(ranges, self.options.min_partitions)

    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.options, self.arrow_schema)

    def commit(self, end: Positions) -> None:
        if self.options.commit_group is not None and end != self._committed:
            self.cluster.commit(self.options.commit_group, from_positions(end))
            self._committed = end

    def stop(self) -> None:
        self._cluster = None

    def _with_new_partitions(self, begin: dict[TopicPartition, int]
                             ) -> dict[TopicPartition, int]:
        """``begin`` plus the partitions that appeared since, from their earliest offset."""
        added = [tp for tp in self.cluster.partitions() if tp not in begin]
        return {**begin, **self.cluster.earliest(added)}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_cluster": None}


def _read(partition, options, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    # With nothing to read, Spark still runs one task, with a bare InputPartition.
    if not isinstance(partition, OffsetRange):
        return iter(())
    return read_range(partition, options, schema)


def _check_available(options, start: dict[TopicPartition, int],
                     earliest: dict[TopicPartition, int], end: dict[TopicPartition, int]
                     ) -> dict[TopicPartition, int]:
    """``start`` moved up to each partition's log start (``earliest``) where retention or
    DeleteRecords removed records not read yet (or the query fails, with
    ``failOnDataLoss``)."""
    available = dict(start)
    for tp, first in earliest.items():
        if start[tp] < first and end[tp] > start[tp]:
            data_loss(options, f"offsets {start[tp]}..{first - 1} of {tp[0]}-{tp[1]} were "
                               "deleted before they were read")
            available[tp] = min(first, end[tp])
    return available
