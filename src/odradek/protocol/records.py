"""Record batches (magic v2): a zero-copy header view, walking batches, in-place stamping,
and, off the hot path, record decoding and batch building.

The broker stores batches exactly as produced (DESIGN.md decision 3): the produce path
validates the header and CRC (``odradek.log.validator``), stamps the base offset, the
partition leader epoch and, on ``LogAppendTime`` topics, the timestamp, and appends the
bytes; the fetch path serves them. Neither looks at individual records. Record decoding is
here for the cleaner, control batches, the validator's per-record checks (keys on compacted
topics, bounded timestamps), and tests.

A v2 record batch, all integers big-endian (Kafka's ``DefaultRecordBatch``)::

    offset  field                 type    notes
    0       baseOffset            int64   offset of the first record; stamped by the leader
    8       batchLength           int32   bytes after this field (size_in_bytes - 12)
    12      partitionLeaderEpoch  int32   stamped by the leader; not covered by the CRC
    16      magic                 int8    2
    17      crc                   uint32  CRC-32C of bytes 21 .. end of batch
    21      attributes            int16   bits 0-2 compression codec (0 none, 1 gzip,
                                          2 snappy, 3 lz4, 4 zstd); bit 3 timestampType
                                          (1 = LogAppendTime); bit 4 isTransactional;
                                          bit 5 isControlBatch; bit 6 hasDeleteHorizonMs
    23      lastOffsetDelta       int32   last record's offset - baseOffset
    27      baseTimestamp         int64   first record's timestamp
    35      maxTimestamp          int64   largest record timestamp (or the log-append time)
    43      producerId            int64   -1 without idempotence
    51      producerEpoch         int16
    53      baseSequence          int32   -1 without idempotence
    57      recordsCount          int32
    61      records                       compressed as one unit when the codec is not none

With hasDeleteHorizonMs (KIP-534) baseTimestamp holds the batch's *delete horizon*
instead of the first record's timestamp: the time from which the log cleaner may remove its
tombstones or its transaction marker. Record timestamps are still baseTimestamp plus their
deltas, so a cleaner stamping a horizon rewrites the deltas against it (Kafka's
``MemoryRecordsBuilder`` with a ``deleteHorizonMs``).

Because baseOffset and partitionLeaderEpoch sit before the CRC'd range, the leader stamps
them without recomputing the CRC. For example a batch produced with baseOffset 0 and
lastOffsetDelta 4, appended when the log end offset is 50, is stamped baseOffset 50 and
holds offsets 50..54; its next_offset is 55.

Each record (Kafka's ``DefaultRecord``), varints zigzag-encoded::

    length varint, attributes int8 (unused), timestampDelta varlong, offsetDelta varint,
    keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
    headerCount varint, then per header: keyLength varint, key (UTF-8), valueLength varint
    (-1 = null), value

Views are not thread-safe and do not own their buffer: a `RecordBatch` reads the header once
when it is made, and only stamping through the view keeps it in step with the buffer.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from crc32c import crc32c
from kio.schema.errors import ErrorCode
from kio.serial.errors import DecodeError
from kio.serial.readers import read_signed_varint, read_signed_varlong

from odradek.protocol.compression import CompressionError, CompressionType, compress, decompress

Buffer = bytes | bytearray | memoryview

# The header as one struct; the number is the field's index in the unpacked tuple.
_HEADER = struct.Struct(
    ">"
    "q"  # 0 baseOffset
    "i"  # 1 batchLength
    "i"  # 2 partitionLeaderEpoch
    "b"  # 3 magic
    "I"  # 4 crc
    "h"  # 5 attributes
    "i"  # 6 lastOffsetDelta
    "q"  # 7 baseTimestamp
    "q"  # 8 maxTimestamp
    "q"  # 9 producerId
    "h"  # 10 producerEpoch
    "i"  # 11 baseSequence
    "i"  # 12 recordsCount
)
RECORD_BATCH_OVERHEAD = _HEADER.size  # 61: a batch with no records
LOG_OVERHEAD = 12  # baseOffset + batchLength: what precedes the length-counted bytes
MAGIC_V2 = 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

# Field offsets used for stamping and the CRC.
_BASE_OFFSET_OFFSET = 0
_LENGTH_OFFSET = 8
_PARTITION_LEADER_EPOCH_OFFSET = 12
_MAGIC_OFFSET = 16
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_CODEC_MASK = 0x07  # attributes bits 0-2
_TIMESTAMP_TYPE_FLAG = 0x08
_TRANSACTIONAL_FLAG = 0x10
_CONTROL_FLAG = 0x20
_DELETE_HORIZON_FLAG = 0x40

# Kafka's ByteBufferLogInputStream rejects a length smaller than the smallest legacy (v0)
# message, 14 bytes after the length field, before it even reads the magic byte.
_MIN_BATCH_LENGTH = 14
_MAX_INT32 = 2**31 - 1

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class RecordsError(Exception):
    """Records a client sent (or a log holds) that the broker refuses; ``error_code`` is
    what the client gets back."""

    error_code: ClassVar[ErrorCode]


class CorruptRecordError(RecordsError):
    error_code = ErrorCode.corrupt_message


class InvalidRecordError(RecordsError):
    error_code = ErrorCode.invalid_record


class RecordTooLargeError(RecordsError):
    """A batch larger than the topic's ``max.message.bytes``."""

    error_code = ErrorCode.message_too_large


@dataclass(frozen=True, slots=True)
class Record:
    """One record with its absolute offset and timestamp (Kafka's ``Record``)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def _header_field(index: int) -> property:
    """A read-only property over field ``index`` of the unpacked header (see `_HEADER`)."""
    return property(lambda self: self._header[index])


class RecordBatch:
    """A view of the v2 batch header at ``position`` in ``buffer`` (no copy).

    The header is unpacked once, here; reading the records or the CRC'd bytes goes back to the
    buffer. Stamping needs a writable buffer (``bytearray`` or a writable ``memoryview``).
    """

    __slots__ = ("_buffer", "_header", "position")

    def __init__(self, buffer: Buffer, position: int = 0) -> None:
        self._buffer = buffer
        self.position = position
        try:
            self._header = _HEADER.unpack_from(buffer, position)
        except struct.error as e:
            raise CorruptRecordError(f"record batch header at {position} is truncated") from e

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"size_in_bytes={self.size_in_bytes}, position={self.position})"
        )

    base_offset = _header_field(0)
    batch_length = _header_field(1)
    partition_leader_epoch = _header_field(2)
    magic = _header_field(3)
    crc = _header_field(4)
    attributes = _header_field(5)
    last_offset_delta = _header_field(6)
    base_timestamp = _header_field(7)
    max_timestamp = _header_field(8)
    producer_id = _header_field(9)
    producer_epoch = _header_field(10)
    base_sequence = _header_field(11)
    records_count = _header_field(12)

    @property
    def size_in_bytes(self) -> int:
        return self._header[1] + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self._header[0] + self._header[6]

    @property
    def next_offset(self) -> int:
        return self._header[0] + self._header[6] + 1

    @property
    def compression_type(self) -> CompressionType:
        try:
            return CompressionType(self._header[5] & COMPRESSION_CODEC_MASK)
        except ValueError:
            raise CorruptRecordError(f"unknown compression codec in {self._header[5]}") from None

    @property
    def timestamp_type(self) -> TimestampType:
        if self._header[5] & _TIMESTAMP_TYPE_FLAG:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self._header[5] & _TRANSACTIONAL_FLAG)

    @property
    def is_control_batch(self) -> bool:
        return bool(self._header[5] & _CONTROL_FLAG)

    @property
    def delete_horizon_ms(self) -> int | None:
        """KIP-534: when the cleaner may remove this batch's tombstones or marker, None if
        no cleaner has stamped one (Kafka's ``RecordBatch.deleteHorizonMs``)."""
        if self._header[5] & _DELETE_HORIZON_FLAG:
            return self._header[7]
        return None

    @property
    def has_producer_id(self) -> bool:
        return self._header[9] > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        base_sequence = self._header[11]
        if base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap from Integer.MAX_VALUE to 0 (Kafka's DefaultRecordBatch.incrementSequence).
        delta = self._header[6]
        if base_sequence > _MAX_INT32 - delta:
            return delta - (_MAX_INT32 - base_sequence) - 1
        return base_sequence + delta

    @property
    def buffer(self) -> memoryview:
        """This batch's bytes, without copying, e.g. to append to a segment."""
        return memoryview(self._buffer)[self.position : self.position + self.size_in_bytes]

    def compute_checksum(self) -> int:
        start = self.position + _ATTRIBUTES_OFFSET
        return crc32c(memoryview(self._buffer)[start : self.position + self.size_in_bytes])

    def is_valid_crc(self) -> bool:
        return self.compute_checksum() == self._header[4]

    def set_base_offset(self, offset: int) -> None:
        _INT64.pack_into(self._buffer, self.position + _BASE_OFFSET_OFFSET, offset)
        self._header = (offset, *self._header[1:])

    def set_partition_leader_epoch(self, epoch: int) -> None:
        _INT32.pack_into(self._buffer, self.position + _PARTITION_LEADER_EPOCH_OFFSET, epoch)
        self._header = (*self._header[:2], epoch, *self._header[3:])

    def set_log_append_time(self, timestamp_ms: int) -> None:
        """Mark the batch LogAppendTime with ``timestamp_ms`` as its max timestamp.

        Both fields are under the CRC, so it is recomputed, as Kafka's
        ``DefaultRecordBatch.setMaxTimestamp`` does. Consumers then read every record's
        timestamp as ``timestamp_ms``; the record timestamp deltas are left as produced.
        """
        if self.timestamp_type is TimestampType.LOG_APPEND_TIME and (
            self.max_timestamp == timestamp_ms
        ):
            return
        attributes = self.attributes | _TIMESTAMP_TYPE_FLAG
        _INT16.pack_into(self._buffer, self.position + _ATTRIBUTES_OFFSET, attributes)
        _INT64.pack_into(self._buffer, self.position + _MAX_TIMESTAMP_OFFSET, timestamp_ms)
        _UINT32.pack_into(self._buffer, self.position + _CRC_OFFSET, self.compute_checksum())
        self._header = _HEADER.unpack_from(self._buffer, self.position)

    def records(self) -> list[Record]:
        """Decode (and decompress) every record. Off the hot path: the cleaner, control
        batches and the validator's per-record checks."""
        start = self.position + RECORD_BATCH_OVERHEAD
        section = memoryview(self._buffer)[start : self.position + self.size_in_bytes]
        try:
            # Always a bytes copy, even uncompressed: kio's varint readers refuse writable
            # buffers, and decoded keys and values outlive the buffer.
            data = decompress(self.compression_type, section)
        except CompressionError as e:
            raise CorruptRecordError(str(e)) from e
        try:
            return _decode_records(self, data)
        except (DecodeError, ValueError) as e:  # ValueError includes UnicodeDecodeError
            raise InvalidRecordError(f"malformed record in batch {self!r}: {e}") from e


def _decode_records(batch: RecordBatch, data: bytes) -> list[Record]:
    base_offset = batch.base_offset
    base_timestamp = batch.base_timestamp
    # With LogAppendTime every record's timestamp is the batch's (Kafka's DefaultRecord.readFrom).
    log_append_time = (
        batch.max_timestamp if batch.timestamp_type is TimestampType.LOG_APPEND_TIME else None
    )
    records = []
    position = 0
    for _ in range(batch.records_count):
        length, size = read_signed_varint(data, position)
        position += size
        body_start = position
        position += 1  # attributes: unused in v2
        timestamp_delta, size = read_signed_varlong(data, position)
        position += size
        offset_delta, size = read_signed_varint(data, position)
        position += size
        key, position = _read_nullable_bytes(data, position)
        value, position = _read_nullable_bytes(data, position)
        header_count, size = read_signed_varint(data, position)
        position += size
        if header_count < 0:
            raise ValueError(f"negative header count {header_count}")
        headers = []
        for _ in range(header_count):
            header_key, position = _read_nullable_bytes(data, position)
            if header_key is None:
                raise ValueError("null header key")
            header_value, position = _read_nullable_bytes(data, position)
            headers.append((header_key.decode("utf-8"), header_value))
        if position - body_start != length:
            raise ValueError(f"record length {length} but its fields take {position - body_start}")
        timestamp = base_timestamp + timestamp_delta if log_append_time is None else log_append_time
        records.append(Record(base_offset + offset_delta, timestamp, key, value, tuple(headers)))
    if position != len(data):
        raise ValueError(f"{len(data) - position} bytes after the last of {len(records)} records")
    return records


def _read_nullable_bytes(data: bytes, position: int) -> tuple[bytes | None, int]:
    length, size = read_signed_varint(data, position)
    position += size
    if length < 0:
        return None, position
    end = position + length
    if end > len(data):
        raise ValueError(f"field of {length} bytes overruns the records")
    return data[position:end], end


def read_batch(buffer: Buffer, position: int = 0) -> RecordBatch | None:
    """The batch at ``position``, or None if ``buffer`` ends before the batch does.

    Checks only what is needed to walk batches safely, in the order Kafka's
    ``ByteBufferLogInputStream`` does; the CRC is left to the caller.
    """
    remaining = len(buffer) - position
    if remaining < LOG_OVERHEAD:
        return None
    (length,) = _INT32.unpack_from(buffer, position + _LENGTH_OFFSET)
    if length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"record batch length {length} at {position} is too small")
    if remaining < length + LOG_OVERHEAD:
        return None
    magic = buffer[position + _MAGIC_OFFSET]
    if magic != MAGIC_V2:
        if magic in (0, 1):
            # Produce v3+ carries only magic v2 (ProduceRequest.validateRecords), and this
            # broker stores nothing older.
            raise InvalidRecordError(f"record batch magic {magic} at {position}: only v2")
        raise CorruptRecordError(f"invalid magic {magic} at {position}")
    if length + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(f"record batch length {length} is smaller than its header")
    return RecordBatch(buffer, position)


def starts_transactional(records: Buffer) -> bool:
    """Whether the first batch of ``records`` has the transactional attribute (read from the
    header alone; False when there is no whole header)."""
    if len(records) < _ATTRIBUTES_OFFSET + 2:
        return False
    return bool(_INT16.unpack_from(records, _ATTRIBUTES_OFFSET)[0] & _TRANSACTIONAL_FLAG)


def iter_batches(buffer: Buffer, position: int = 0) -> Iterator[RecordBatch]:
    """Walk consecutive batches from ``position``, stopping cleanly at a partial trailing
    batch (a fetch response cut at max bytes, a torn log tail).

    Raises `CorruptRecordError` or `InvalidRecordError` at a batch whose length or magic
    makes the rest unwalkable. CRCs are not checked: see `iter_valid_batches`.
    """
    while (batch := read_batch(buffer, position)) is not None:
        yield batch
        position += batch.size_in_bytes


def iter_valid_batches(buffer: Buffer, position: int = 0) -> Iterator[RecordBatch]:
    """The batches of the longest valid prefix: complete, magic v2, consistent length, CRC
    intact. Stops at the first that is not, as Kafka's ``LogSegment.recover`` truncates there.
    """
    try:
        for batch in iter_batches(buffer, position):
            if not batch.is_valid_crc():
                return
            yield batch
    except RecordsError:
        return


def valid_prefix_length(buffer: Buffer, position: int = 0) -> int:
    """How many bytes from ``position`` form valid batches: where recovery truncates."""
    end = position
    for batch in iter_valid_batches(buffer, position):
        end = batch.position + batch.size_in_bytes
    return end - position


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int | None = None,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control_batch: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    last_offset: int | None = None,
    max_timestamp: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """A complete v2 batch holding ``records`` at their own offsets.

    ``base_offset`` defaults to the first record's offset; later records may leave gaps (the
    cleaner keeps original offsets). ``last_offset`` defaults to the last record's: the
    cleaner keeps the original batch's, beyond its last kept record (Kafka's
    ``overrideLastOffset``). Timestamp deltas are taken from the first record, as Kafka's
    producer does. With no records, ``base_offset``, ``last_offset`` and ``max_timestamp``
    are required and the batch is a header alone with base timestamp -1 (Kafka's
    ``DefaultRecordBatch.writeEmptyHeader``). A ``delete_horizon_ms`` takes the base
    timestamp's place, with the hasDeleteHorizonMs attribute (see the module docstring).
    """
    if not records and None in (base_offset, last_offset, max_timestamp):
        raise ValueError("a record batch with no records needs its offsets and max timestamp")
    if base_offset is None:
        base_offset = records[0].offset
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    else:
        base_timestamp = records[0].timestamp if records else NO_TIMESTAMP
    body = bytearray()
    previous_offset = base_offset - 1
    for record in records:
        if record.offset <= previous_offset:
            raise ValueError(f"record offsets must increase from {base_offset}: {record.offset}")
        previous_offset = record.offset
        _write_record(body, record, base_offset, base_timestamp)
    if last_offset is None:
        last_offset = previous_offset
    elif last_offset < previous_offset:
        raise ValueError(f"last offset {last_offset} is before the last record's")
    if max_timestamp is None:
        max_timestamp = max(record.timestamp for record in records)
    compressed = compress(compression, body)
    attributes = int(compression) | (_TIMESTAMP_TYPE_FLAG if timestamp_type else 0)
    if is_transactional:
        attributes |= _TRANSACTIONAL_FLAG
    if is_control_batch:
        attributes |= _CONTROL_FLAG
    if delete_horizon_ms is not None:
        attributes |= _DELETE_HORIZON_FLAG
    batch = bytearray(RECORD_BATCH_OVERHEAD + len(compressed))
    batch[RECORD_BATCH_OVERHEAD:] = compressed
    _HEADER.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_V2,
        0,  # crc, computed below over what follows it
        attributes,
        last_offset - base_offset,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    _UINT32.pack_into(batch, _CRC_OFFSET, crc32c(memoryview(batch)[_ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def _write_record(out: bytearray, record: Record, base_offset: int, base_timestamp: int) -> None:
    body = bytearray(1)  # attributes: unused in v2
    _write_varint(body, record.timestamp - base_timestamp)
    _write_varint(body, record.offset - base_offset)
    _write_nullable_bytes(body, record.key)
    _write_nullable_bytes(body, record.value)
    _write_varint(body, len(record.headers))
    for header_key, header_value in record.headers:
        _write_nullable_bytes(body, header_key.encode("utf-8"))
        _write_nullable_bytes(body, header_value)
    _write_varint(out, len(body))
    out += body


def _write_nullable_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(value))
        out += value


def _write_varint(out: bytearray, value: int) -> None:
    # Zigzag, then 7 bits a byte, least significant first (protobuf's sint64 encoding).
    unsigned = (value << 1) if value >= 0 else ((-value) << 1) - 1
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
