"""Record batches as a producer sends them, for the log tests (importable by the Hypothesis
state machine, which cannot use fixtures)."""

from __future__ import annotations

from collections.abc import Sequence

from odradek.protocol.records import Record, build_batch


def produce_batch(
    values: Sequence[bytes] = (b"value",),
    *,
    timestamp: int = 1_000,
    timestamps: Sequence[int] | None = None,
    key: bytes | None = b"key",
) -> bytearray:
    """A batch as a producer sends it: base offset 0, offsets 0..n-1."""
    if timestamps is None:
        timestamps = [timestamp] * len(values)
    records = [Record(i, ts, key, value) for i, (value, ts) in enumerate(zip(values, timestamps))]
    return bytearray(build_batch(records, base_offset=0))
