"""Payments the fraud model scores above a threshold, the seed's KSQL example::

    CREATE STREAM fraudulent_payments AS
      SELECT * FROM payments WHERE fraudProbability > 0.8;

Each matching record is copied as it is: same key, same JSON value. A value that is not
JSON or has no numeric ``fraudProbability`` does not match.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.pipelines import streams
from odradek.pipelines.streams import StreamSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

DEFAULT_THRESHOLD = 0.8


def fraudulent_payments(payments: DataFrame, threshold: float = DEFAULT_THRESHOLD) -> DataFrame:
    from pyspark.sql import functions as F

    probability = F.get_json_object(F.col("value").cast("string"), "$.fraudProbability")
    return payments.where(probability.cast("double") > threshold).select("key", "value")


def start(spark: SparkSession, settings: StreamSettings,
          threshold: float = DEFAULT_THRESHOLD) -> StreamingQuery:
    return streams.start(spark, settings,
                         lambda payments: fraudulent_payments(payments, threshold), "append")
