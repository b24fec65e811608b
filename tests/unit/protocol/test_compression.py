"""Compression codecs: round trips, and the exact framing Kafka clients write and read."""

import gzip
import struct
from types import SimpleNamespace

import cramjam
import kafka.codec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from odradek.protocol.compression import (
    XERIAL_SNAPPY_MAGIC,
    CompressionError,
    CompressionType,
    compress,
    decompress,
)

CODECS = list(CompressionType)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@given(data=st.binary(max_size=100_000))
@settings(deadline=None, max_examples=50)
def test_every_codec_round_trips_any_bytes(codec, data):
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_codecs_accept_memoryviews_and_plain_ints(codec):
    data = b"abc" * 1000
    assert decompress(int(codec), memoryview(compress(int(codec), bytearray(data)))) == data


def test_gzip_output_is_a_standard_gzip_stream():
    assert gzip.decompress(compress(CompressionType.GZIP, b"kafka" * 100)) == b"kafka" * 100


def test_concatenated_gzip_members_and_zstd_frames_decompress_to_their_concatenation():
    gzipped = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(CompressionType.GZIP, gzipped) == b"first second"
    zstd = compress(CompressionType.ZSTD, b"first ") + compress(CompressionType.ZSTD, b"second")
    assert decompress(CompressionType.ZSTD, zstd) == b"first second"


def test_lz4_is_a_frame_with_independent_blocks_as_kafkas_java_reader_requires():
    frame = compress(CompressionType.LZ4, b"kafka" * 10_000)
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little-endian 0x184D2204
    flg = frame[4]
    assert flg >> 6 == 1  # frame version 01
    assert flg & 0x20  # block independence: KafkaLZ4BlockInputStream refuses linked blocks


def test_lz4_frames_with_linked_blocks_are_still_read():
    data = b"kafka" * 10_000
    assert decompress(CompressionType.LZ4, bytes(cramjam.lz4.compress(data))) == data


def test_snappy_is_written_raw_as_librdkafka_does():
    data = b"kafka" * 1000
    compressed = compress(CompressionType.SNAPPY, data)
    assert not compressed.startswith(XERIAL_SNAPPY_MAGIC)
    assert bytes(cramjam.snappy.decompress_raw(compressed)) == data


def test_snappy_in_xerial_framing_from_java_producers_is_read(monkeypatch):
    # kafka-python's xerial framer is an independent implementation of the Java framing;
    # it only needs a raw snappy block compressor.
    raw_snappy = SimpleNamespace(compress=lambda chunk: bytes(cramjam.snappy.compress_raw(chunk)))
    monkeypatch.setattr(kafka.codec, "snappy", raw_snappy)
    data = bytes(range(256)) * 400  # 100 KiB: several 32 KiB xerial blocks
    framed = kafka.codec.snappy_encode(data, xerial_compatible=True, xerial_blocksize=32 * 1024)
    assert framed.startswith(XERIAL_SNAPPY_MAGIC)
    assert decompress(CompressionType.SNAPPY, framed) == data


def test_xerial_version_fields_are_ignored_because_some_producers_write_them_little_endian():
    block = bytes(cramjam.snappy.compress_raw(b"hello"))
    framed = XERIAL_SNAPPY_MAGIC + struct.pack("<ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert decompress(CompressionType.SNAPPY, framed) == b"hello"


@pytest.mark.parametrize(
    "stream",
    [
        XERIAL_SNAPPY_MAGIC + b"\x00\x00",  # header cut short
        XERIAL_SNAPPY_MAGIC + bytes(8) + b"\x00\x00",  # block length cut short
        XERIAL_SNAPPY_MAGIC + bytes(8) + struct.pack(">i", 100) + b"abc",  # block overruns
        XERIAL_SNAPPY_MAGIC + bytes(8) + struct.pack(">i", -1),  # negative block length
    ],
    ids=["header", "block-length", "block-overrun", "negative-length"],
)
def test_a_malformed_xerial_stream_is_a_corrupt_message(stream):
    with pytest.raises(CompressionError) as raised:
        decompress(CompressionType.SNAPPY, stream)
    assert raised.value.error_code is ErrorCode.corrupt_message


@pytest.mark.parametrize(
    "codec", [c for c in CODECS if c is not CompressionType.NONE], ids=lambda c: c.name
)
def test_undecodable_data_is_a_corrupt_message(codec):
    with pytest.raises(CompressionError) as raised:
        decompress(codec, b"this is not compressed by anything \xff\xfe\xfd")
    assert raised.value.error_code is ErrorCode.corrupt_message


@pytest.mark.parametrize(
    "codec", [c for c in CODECS if c is not CompressionType.NONE], ids=lambda c: c.name
)
def test_truncated_compressed_data_is_a_corrupt_message(codec):
    compressed = compress(codec, bytes(range(256)) * 64)
    with pytest.raises(CompressionError):
        decompress(codec, compressed[: len(compressed) // 2])
