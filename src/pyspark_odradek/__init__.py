"""Lets Spark find the ``odradek`` data source by itself: at the first use of a Python
data source, Spark imports every top-level ``pyspark_*`` module that has a ``DefaultSource``
and registers it under its ``name()``."""

from odradek.spark.source import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]
