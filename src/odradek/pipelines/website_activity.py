"""Page views per page and tumbling event-time window (seed: "Logging User Web Activity").

Input: the ``website-activity`` demo records, JSON ``{"user_id", "page", "ts"}`` with ``ts``
the view's event time in milliseconds. Output: one JSON record per page and window, keyed by
the page: ``{"page", "window_start", "window_end", "views", "users"}`` (times in ms), with
``users`` the distinct users who viewed the page in the window.

Windows are on event time, so a view that arrives late still counts in the window it
happened in, as long as it is within the watermark of the latest event time seen; later
than that, it is dropped and the window's state is freed. In ``update`` mode (the default)
a window's record is written again each time a micro-batch changes its counts, so the
latest record per page and window is the answer so far; in ``append`` mode it is written
once, when the watermark passes the window's end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.pipelines import streams
from odradek.pipelines.streams import OutputMode, StreamSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

DEFAULT_WINDOW = "1 minute"
DEFAULT_WATERMARK = "10 seconds"
# approx_count_distinct is HyperLogLog++; at a relative standard deviation of 1% it keeps
# 2^14 registers (12 KiB of state per page and window), and for the few hundred users a page
# sees in a window it is linear counting over them, which gives the exact number unless two
# users share a register.
DISTINCT_USERS_RSD = 0.01

PAGE_VIEW_SCHEMA = "user_id STRING, page STRING, ts LONG"


def page_view_counts(records: DataFrame, window: str = DEFAULT_WINDOW,
                     watermark: str = DEFAULT_WATERMARK) -> DataFrame:
    """``key``/``value`` rows counting the views and distinct users of each page per window."""
    from pyspark.sql import functions as F

    views = (records
             .select(F.from_json(F.col("value").cast("string"), PAGE_VIEW_SCHEMA).alias("view"))
             .select("view.*")
             .where(F.col("page").isNotNull() & F.col("ts").isNotNull())
             .withColumn("event_time", F.timestamp_millis("ts")))
    counts = (views.withWatermark("event_time", watermark)
              .groupBy(F.window("event_time", window), "page")
              .agg(F.count(F.lit(1)).alias("views"),
                   F.approx_count_distinct("user_id", DISTINCT_USERS_RSD).alias("users")))
    return counts.select(
        F.col("page").cast("binary").alias("key"),
        F.to_json(F.struct(
            "page",
            F.unix_millis("window.start").alias("window_start"),
            F.unix_millis("window.end").alias("window_end"),
            "views", "users",
        )).cast("binary").alias("value"))


def start(spark: SparkSession, settings: StreamSettings, window: str = DEFAULT_WINDOW,
          watermark: str = DEFAULT_WATERMARK, output_mode: OutputMode = "update"
          ) -> StreamingQuery:
    return streams.start(spark, settings,
                         lambda records: page_view_counts(records, window, watermark),
                         output_mode)
