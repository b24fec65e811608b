"""Where every pipeline reads and writes: topics on odradek, through the ``odradek`` Spark
data source, with the options of Spark's Kafka connector.

A pipeline is a function from the records of its input topic (the connector's columns:
``key``, ``value``, ``topic``, ``partition``, ``offset``, ``timestamp``, ``timestampType``)
to ``key``/``value`` rows for its output topic; :func:`start` wires one to the two topics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

W = TypeVar("W", "DataFrameWriter", "DataStreamWriter")

OutputMode = Literal["append", "update"]

DEFAULT_TRIGGER_SECONDS = 5.0


@dataclass(frozen=True)
class StreamSettings:
    """What every pipeline run needs besides its own options.

    ``trigger`` is passed to ``DataStreamWriter.trigger`` as keyword arguments:
    ``{"processingTime": "5 seconds"}`` for a running pipeline, ``{"availableNow": True}``
    to process what the input topic holds and stop. With ``to_console`` the output rows are
    printed instead of written to ``output_topic``. ``sink_id`` must stay the same across
    runs on one checkpoint (see ``odradek.spark.exactly_once``).
    """

    bootstrap_servers: str
    input_topic: str
    output_topic: str
    checkpoint_location: str
    trigger: Mapping[str, object] = field(
        default_factory=lambda: {"processingTime": f"{DEFAULT_TRIGGER_SECONDS} seconds"})
    starting_offsets: str = "earliest"
    to_console: bool = False
    query_name: str | None = None
    # Writes exactly-once for read_committed readers through the odradek sink's
    # ``exactlyOnce`` option, with this as its ``sinkId``; at-least-once when None.
    sink_id: str | None = None


def read_topic(spark: SparkSession, settings: StreamSettings) -> DataFrame:
    _register(spark)
    return (spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", settings.bootstrap_servers)
            .option("subscribe", settings.input_topic)
            .option("startingOffsets", settings.starting_offsets)
            .load())


def write_topic(rows: DataFrame, settings: StreamSettings,
                output_mode: OutputMode) -> StreamingQuery:
    """Starts the query writing ``rows`` (``key``, ``value``) to the output topic.

    Spark lets a sink written as a Python data source take only appended rows (its
    ``PythonWriteBuilder`` does not implement ``SupportsStreamingUpdateAsAppend``), so in
    update mode each micro-batch's rows are written by a batch write from ``foreachBatch``.
    Both are at-least-once: a micro-batch that fails after writing part of its rows is
    written again, as with Spark's Kafka sink. With ``settings.sink_id`` both are
    exactly-once for read_committed readers: Spark gives the batch writes of
    ``foreachBatch`` the micro-batch id too.
    """
    if settings.to_console:
        rows = rows.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
    writer = rows.writeStream.outputMode(output_mode).trigger(**settings.trigger).option(
        "checkpointLocation", settings.checkpoint_location)
    if settings.query_name:
        writer = writer.queryName(settings.query_name)
    if settings.to_console:
        return writer.format("console").option("truncate", "false").start()
    if output_mode == "update":
        return writer.foreachBatch(
            lambda batch, _batch_id: _to_topic(batch.write.mode("append"), settings).save()
        ).start()
    return _to_topic(writer, settings).start()


def _to_topic(writer: W, settings: StreamSettings) -> W:
    writer = (writer.format("odradek")
              .option("kafka.bootstrap.servers", settings.bootstrap_servers)
              .option("topic", settings.output_topic))
    if settings.sink_id is None:
        return writer
    return writer.option("exactlyOnce", "true").option("sinkId", settings.sink_id)


def start(spark: SparkSession, settings: StreamSettings,
          transform: Callable[[DataFrame], DataFrame], output_mode: OutputMode) -> StreamingQuery:
    """Reads the input topic, applies ``transform`` and writes what it returns."""
    return write_topic(transform(read_topic(spark, settings)), settings, output_mode)


def _register(spark: SparkSession) -> None:
    from odradek.spark import register

    register(spark)
