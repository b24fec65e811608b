"""A uniform sample of the stream kept as streaming state (seed: "Reservoir Sampling").

All records go to one group (the sample is of the whole stream, not per key), whose state
is the :class:`~odradek.pipelines.reservoir.Reservoir`: how many records were seen and the
``size`` slots. Each micro-batch offers its records to the reservoir in order and emits the
slots it wrote, keyed by slot number, to a compacted output topic: the topic's latest value
per key is the sample. Values are the sampled records' values, unchanged.

The random source of a micro-batch is seeded with ``seed`` and the number of records seen
before it, so a micro-batch that Spark runs again after a failure, from the same state,
makes the same sample instead of a second, different one.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from odradek.pipelines import reservoir, streams
from odradek.pipelines.streams import StreamSettings

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.streaming.state import GroupState

DEFAULT_SIZE = 10
DEFAULT_SEED = 0

# The slots are one BINARY rather than ARRAY<BINARY>: PySpark's workers cannot read an
# array in the state schema of applyInPandasWithState (StructType.fromJson fails with
# KeyError 'elementType'). Layout: per slot, in slot order, its value's length (int32,
# big-endian) and then the value's bytes.
STATE_SCHEMA = "seen LONG, slots BINARY"
_SLOT_LENGTH = struct.Struct(">i")
OUTPUT_SCHEMA = "key BINARY, value BINARY"

def batch_rng(seed: int, seen: int) -> random.Random:
    """The random source of the micro-batch that starts after ``seen`` records."""
    return random.Random(f"{seed}/{seen}")


def pack_slots(slots: Sequence[bytes]) -> bytes:
    return b"".join(_SLOT_LENGTH.pack(len(value)) + value for value in slots)


def unpack_slots(packed: bytes) -> tuple[bytes, ...]:
    slots = []
    position = 0
    while position < len(packed):
        [length] = _SLOT_LENGTH.unpack_from(packed, position)
        position += _SLOT_LENGTH.size
        slots.append(bytes(packed[position:position + length]))
        position += length
    return tuple(slots)


def reservoir_sample(records: DataFrame, size: int = DEFAULT_SIZE,
                     seed: int = DEFAULT_SEED) -> DataFrame:
    """``key``/``value`` rows: each slot written in a micro-batch, keyed by its number."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    def update(_group: tuple, batches: Iterator[pd.DataFrame],
               state: GroupState) -> Iterator[pd.DataFrame]:
        import pandas as pd

        seen, packed = state.get if state.exists else (0, b"")
        before = reservoir.Reservoir(size, seen, unpack_slots(packed))
        values = (value for batch in batches for value in batch["value"])
        after = reservoir.offer(before, values, batch_rng(seed, seen))
        state.update((after.seen, pack_slots(after.slots)))
        changed = sorted(after.changed)
        yield pd.DataFrame({"key": [str(slot).encode() for slot in changed],
                            "value": [after.slots[slot] for slot in changed]})

    # One group, so one state: a constant column to group by.
    return (records.select(F.lit(0).alias("reservoir"), "value")
            .groupBy("reservoir")
            .applyInPandasWithState(update, OUTPUT_SCHEMA, STATE_SCHEMA, "update",
                                    GroupStateTimeout.NoTimeout))


def start(spark: SparkSession, settings: StreamSettings, size: int = DEFAULT_SIZE,
          seed: int = DEFAULT_SEED) -> StreamingQuery:
    return streams.start(spark, settings,
                         lambda records: reservoir_sample(records, size, seed), "update")
