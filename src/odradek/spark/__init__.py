"""Spark's Kafka connector, in Python: the ``odradek`` data source.

``spark.read.format("odradek")``, ``spark.readStream.format("odradek")`` and the matching
writers take the options of Spark's Kafka connector and produce its schema. Spark finds the
source by itself (the top-level ``pyspark_odradek`` package); :func:`register` registers it
explicitly, for sessions where that lookup is off.
"""

from __future__ import annotations

from odradek.spark.source import OdradekDataSource


def register(spark) -> None:
    """Registers the ``odradek`` format with ``spark``."""
    spark.dataSource.register(OdradekDataSource)


__all__ = ["OdradekDataSource", "register"]
