"""Compression codecs for the records section of a v2 record batch.

Kafka compresses the records of a batch as one unit, after the 61-byte header; the codec is
named by bits 0-2 of the batch attributes. The broker stores and serves compressed batches
as produced (DESIGN.md decision 3), so these functions run only off the hot path: when the
broker builds its own batches, when a compacted topic needs every record's key, and in the
cleaner.

Each codec speaks exactly the framing that Kafka clients write and read:

- gzip: an RFC 1952 stream (a multi-member stream decompresses to the concatenation).
- snappy: Java producers wrap snappy in xerial's block framing (``SnappyOutputStream``),
  librdkafka writes one raw snappy block. We write raw snappy, which every client reads
  (xerial's ``SnappyInputStream`` falls back to raw when the magic is missing), and read both.
- lz4: the LZ4 *frame* format (KIP-57), with independent blocks: Java's
  ``KafkaLZ4BlockInputStream`` refuses a linked-block frame ("Dependent block stream is
  unsupported"), which is cramjam's default.
- zstd: a zstd frame (KIP-110); several concatenated frames decompress to their concatenation.
"""

from __future__ import annotations

import enum
import struct

import cramjam
from kio.schema.errors import ErrorCode


class CompressionType(enum.IntEnum):
    """The codec ids of attribute bits 0-2, as in Kafka's ``CompressionType``."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class CompressionError(Exception):
    """Compressed data that does not decode: the client gets CORRUPT_MESSAGE."""

    error_code = ErrorCode.corrupt_message


# xerial's SnappyOutputStream stream header: a marker byte, "SNAPPY", a NUL pad, then two
# big-endian int32 (version, compatible version). The version fields are ignored on read, as
# librdkafka and kafka-python do, because some producers write them little-endian.
XERIAL_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")


def compress(codec: CompressionType, data: bytes | bytearray | memoryview) -> bytes:
    """Compress ``data`` (a records section) the way Kafka clients expect to read it."""
    codec = CompressionType(codec)
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec is CompressionType.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec is CompressionType.LZ4:
        # content_checksum off, as Kafka's own KafkaLZ4BlockOutputStream writes it.
        compressor = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
        compressor.compress(bytes(data))  # the streaming compressor takes only bytes
        return bytes(compressor.finish())
    return bytes(cramjam.zstd.compress(data))


def decompress(codec: CompressionType, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress a records section; raise `CompressionError` if it does not decode."""
    codec = CompressionType(codec)
    try:
        if codec is CompressionType.NONE:
            return bytes(data)
        if codec is CompressionType.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec is CompressionType.SNAPPY:
            return _snappy_decompress(memoryview(data))
        if codec is CompressionType.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise CompressionError(f"{codec.name} data does not decompress: {e}") from e


def _snappy_decompress(data: memoryview) -> bytes:
    if data[: len(XERIAL_SNAPPY_MAGIC)] != XERIAL_SNAPPY_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(data))
    # xerial framing: after the header, blocks of (int32 length, raw snappy block).
    out = bytearray()
    position = _XERIAL_HEADER_SIZE
    end = len(data)
    if position > end:
        raise CompressionError("xerial snappy stream shorter than its header")
    while position < end:
        if position + _XERIAL_BLOCK_LENGTH.size > end:
            raise CompressionError("xerial snappy stream ends inside a block length")
        (length,) = _XERIAL_BLOCK_LENGTH.unpack_from(data, position)
        position += _XERIAL_BLOCK_LENGTH.size
        if length < 0 or position + length > end:
            raise CompressionError(f"xerial snappy block length {length} overruns the stream")
        out += cramjam.snappy.decompress_raw(data[position : position + length])
        position += length
    return bytes(out)
