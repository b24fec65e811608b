"""Control records: the COMMIT and ABORT markers a transaction coordinator writes (KIP-98).

A transaction ends in every partition it wrote to with a control batch: attributes with the
control and transactional bits set, the producer's id and epoch, no sequence, and one record
whose key and value are Kafka's ``EndTxnMarker`` (big-endian)::

    key:    version int16 (0), type int16 (0 ABORT, 1 COMMIT)
    value:  version int16 (0), coordinator_epoch int32

For example, producer 7 at epoch 2 committing through coordinator epoch 5 writes a batch
with producer id 7, epoch 2, and the record key ``00 00 00 01`` and value
``00 00 00 00 00 05``. Consumers never see control records; read_committed consumers use
ABORT markers (through the aborted transactions of a Fetch response) to drop the records of
aborted transactions.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from odradek.protocol.records import (
    CorruptRecordError,
    Record,
    RecordBatch,
    build_batch,
)

CONTROL_RECORD_KEY = struct.Struct(">hh")
END_TXN_MARKER_VALUE = struct.Struct(">hi")
CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    commit: bool
    coordinator_epoch: int


def read_end_txn_marker(batch: RecordBatch) -> EndTxnMarker | None:
    """The marker a control batch holds, None for another kind of control record (Kafka
    skips those too); raises ``CorruptRecordError`` for one that cannot be read."""
    records = batch.records()
    if not records or records[0].key is None or len(records[0].key) < CONTROL_RECORD_KEY.size:
        raise CorruptRecordError(f"control batch at offset {batch.base_offset} has no key")
    _, kind = CONTROL_RECORD_KEY.unpack_from(records[0].key)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    value = records[0].value
    if value is None or len(value) < END_TXN_MARKER_VALUE.size:
        raise CorruptRecordError(f"end transaction marker at offset {batch.base_offset} "
                                 f"has no coordinator epoch")
    _, coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(value)
    return EndTxnMarker(kind == ControlRecordType.COMMIT, coordinator_epoch)


def build_end_txn_marker(*, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                         commit: bool, timestamp_ms: int) -> bytes:
    """The control batch ending a transaction, at offset 0 (the leader assigns its offset)."""
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    record = Record(0, timestamp_ms, CONTROL_RECORD_KEY.pack(CONTROL_RECORD_KEY_VERSION, kind),
                    END_TXN_MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch))
    return build_batch([record], producer_id=producer_id, producer_epoch=producer_epoch,
                       is_transactional=True, is_control_batch=True)
