"""A local SparkSession whose Python workers run this interpreter.

Spark starts its Python workers with ``PYSPARK_PYTHON`` (``python3`` on the PATH when
unset), which is not the virtual environment odradek is installed in, so a worker could not
import the connector or pyarrow. :func:`local_session` points both the driver and the
workers at ``sys.executable`` before the JVM starts.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# Settings for a session on one machine: no web UI or progress bar on the terminal, few
# shuffle partitions (the default 200 makes every small aggregation 200 tasks), UTC.
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.stateStore.stateSchemaCheck": "false",
}


def local_session(app_name: str = "odradek", master: str = "local[*]", **conf: Any):
    """A SparkSession on this machine; ``conf`` overrides :data:`LOCAL_CONF`, with Spark's
    key names."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**LOCAL_CONF, **conf}.items():
        builder = builder.config(key, str(value))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
