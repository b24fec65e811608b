"""Streaming pipelines on Spark over odradek topics, and the demo data they run on.

Nothing here imports pyspark at module level: the registry is read by ``odradek pipeline
list`` and ``--help``, which should not start loading Spark.
"""
