"""Spark's Kafka schema, exactly, so that a job moves between Spark's Kafka connector and
this one by changing the format name.

=============  ============================================  ==============================
column         type                                          meaning
=============  ============================================  ==============================
key            binary                                        record key (null if none)
value          binary                                        record value (null: tombstone)
topic          string
partition      int
offset         long
timestamp      timestamp                                     record or log-append time
timestampType  int                                           0 CreateTime, 1 LogAppendTime
headers        array<struct<key: string, value: binary>>     only with ``includeHeaders``
=============  ============================================  ==============================
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS = ArrayType(StructType([StructField("key", StringType()),
                                StructField("value", BinaryType())]))


def source_schema(include_headers: bool) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects ``read()``'s batches to have for ``schema``."""
    return to_arrow_schema(schema, timezone="UTC")
