"""Record batches: the header view, stamping, walking, the record codec, and interoperability
with kafka-python's independent implementation of the v2 format. Produce validation is the
log validator's (tests/unit/log/test_validator.py)."""

import struct
from types import SimpleNamespace

import cramjam
import kafka.codec
import kafka.record.default_records as kafka_default_records
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from batch_edits import patched, restamp_crc
from odradek.protocol.records import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    CompressionType,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    iter_batches,
    iter_valid_batches,
    valid_prefix_length,
)

CODECS = list(CompressionType)

# -- strategies -------------------------------------------------------------------------------

nullable_bytes = st.none() | st.binary(max_size=64)
headers = st.lists(st.tuples(st.text(max_size=10), nullable_bytes), max_size=3).map(tuple)
timestamps = st.integers(min_value=0, max_value=2**42)


@st.composite
def record_lists(draw, min_size=1, max_size=20):
    """Records at consecutive offsets from 0, as a producer sends them."""
    fields = draw(
        st.lists(st.tuples(timestamps, nullable_bytes, nullable_bytes, headers),
                 min_size=min_size, max_size=max_size)
    )
    return [Record(offset, ts, key, value, hdrs)
            for offset, (ts, key, value, hdrs) in enumerate(fields)]


def simple_records(count=3, key=b"key"):
    return [Record(i, 1_700_000_000_000 + i, key, b"value-%d" % i) for i in range(count)]


# -- the header view ---------------------------------------------------------------------------


@given(
    records=record_lists(),
    codec=st.sampled_from(CODECS),
    producer_id=st.integers(-1, 2**63 - 1),
    producer_epoch=st.integers(-1, 2**15 - 1),
    base_sequence=st.integers(-1, 2**31 - 1),
    is_transactional=st.booleans(),
    is_control_batch=st.booleans(),
    timestamp_type=st.sampled_from(TimestampType),
    partition_leader_epoch=st.integers(-1, 2**31 - 1),
)
@settings(deadline=None)
def test_every_header_field_reads_back_as_built(
    records, codec, producer_id, producer_epoch, base_sequence, is_transactional,
    is_control_batch, timestamp_type, partition_leader_epoch,
):
    data = build_batch(
        records, compression=codec, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, is_transactional=is_transactional,
        is_control_batch=is_control_batch, timestamp_type=timestamp_type,
        partition_leader_epoch=partition_leader_epoch,
    )
    batch = RecordBatch(data)
    assert batch.base_offset == 0
    assert batch.size_in_bytes == len(data) == batch.batch_length + LOG_OVERHEAD
    assert batch.partition_leader_epoch == partition_leader_epoch
    assert batch.magic == 2
    assert batch.compression_type is codec
    assert batch.timestamp_type is timestamp_type
    assert batch.is_transactional is is_transactional
    assert batch.is_control_batch is is_control_batch
    assert batch.last_offset_delta == len(records) - 1
    assert batch.last_offset == len(records) - 1
    assert batch.next_offset == len(records)
    assert batch.base_timestamp == records[0].timestamp
    assert batch.max_timestamp == max(r.timestamp for r in records)
    assert batch.producer_id == producer_id
    assert batch.has_producer_id is (producer_id >= 0)
    assert batch.producer_epoch == producer_epoch
    assert batch.base_sequence == base_sequence
    assert batch.records_count == len(records)
    assert batch.is_valid_crc()
    assert bytes(batch.buffer) == data


def test_a_view_reads_a_batch_in_place_at_its_position():
    first, second = build_batch(simple_records(2)), build_batch(simple_records(5))
    buffer = memoryview(first + second)
    batch = RecordBatch(buffer, len(first))
    assert (batch.position, batch.records_count, batch.is_valid_crc()) == (len(first), 5, True)
    assert bytes(batch.buffer) == second


def test_a_view_over_less_than_a_header_is_corrupt():
    with pytest.raises(CorruptRecordError):
        RecordBatch(build_batch(simple_records())[:RECORD_BATCH_OVERHEAD - 1])


def test_last_sequence_wraps_past_int32_max_as_kafka_does():
    records = simple_records(3)
    assert RecordBatch(build_batch(records, producer_id=1, producer_epoch=0,
                                   base_sequence=10)).last_sequence == 12
    assert RecordBatch(build_batch(records, producer_id=1, producer_epoch=0,
                                   base_sequence=2**31 - 2)).last_sequence == 0
    assert RecordBatch(build_batch(records)).last_sequence == -1


# -- CRC and in-place stamping -------------------------------------------------------------------


@given(data=st.data())
@settings(deadline=None)
def test_flipping_any_bit_under_the_crc_is_detected(data):
    batch = bytearray(build_batch(data.draw(record_lists()),
                                  compression=data.draw(st.sampled_from(CODECS))))
    index = data.draw(st.integers(21, len(batch) - 1))
    batch[index] ^= 1 << data.draw(st.integers(0, 7))
    assert not RecordBatch(batch).is_valid_crc()


def test_stamping_the_base_offset_and_leader_epoch_keeps_the_crc_valid():
    # Produced at offset 0, appended when the log end offset is 50: offsets 50..54.
    buffer = bytearray(build_batch(simple_records(5)))
    batch = RecordBatch(buffer)
    batch.set_base_offset(50)
    batch.set_partition_leader_epoch(7)
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (50, 54, 55)
    assert batch.partition_leader_epoch == 7
    reread = RecordBatch(buffer)
    assert (reread.base_offset, reread.partition_leader_epoch) == (50, 7)
    assert reread.is_valid_crc()
    assert [r.offset for r in reread.records()] == [50, 51, 52, 53, 54]


def test_stamping_works_through_a_writable_memoryview_of_a_larger_buffer():
    head = build_batch(simple_records(1))
    buffer = bytearray(head + build_batch(simple_records(2)))
    RecordBatch(memoryview(buffer), len(head)).set_base_offset(9)
    assert RecordBatch(buffer, len(head)).base_offset == 9
    assert RecordBatch(buffer).base_offset == 0


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_log_append_time_restamps_the_crc_and_becomes_every_records_timestamp(codec):
    buffer = bytearray(build_batch(simple_records(3), compression=codec))
    batch = RecordBatch(buffer)
    batch.set_log_append_time(1_800_000_000_000)
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == 1_800_000_000_000
    assert batch.compression_type is codec  # the other attribute bits are kept
    assert RecordBatch(buffer).is_valid_crc()
    assert {r.timestamp for r in RecordBatch(buffer).records()} == {1_800_000_000_000}


def test_stamping_a_read_only_buffer_is_refused():
    with pytest.raises(TypeError):
        RecordBatch(build_batch(simple_records())).set_base_offset(1)


# -- walking batches -----------------------------------------------------------------------------


@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=5), data=st.data())
@settings(deadline=None)
def test_iter_batches_stops_cleanly_at_a_partial_trailing_batch(sizes, data):
    batches = [build_batch(simple_records(n)) for n in sizes]
    complete, partial = b"".join(batches[:-1]), batches[-1]
    cut = data.draw(st.integers(0, len(partial) - 1))
    walked = list(iter_batches(complete + partial[:cut]))
    assert [b.records_count for b in walked] == sizes[:-1]
    assert [b.position for b in walked] == [sum(map(len, batches[:i])) for i in range(len(walked))]
    assert valid_prefix_length(complete + partial[:cut]) == len(complete)


def test_iter_batches_starts_at_a_position():
    first, second = build_batch(simple_records(1)), build_batch(simple_records(2))
    assert [b.records_count for b in iter_batches(first + second, len(first))] == [2]


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        ((">i", 8, 13), CorruptRecordError),  # shorter than the smallest legacy message
        ((">i", 8, 40), CorruptRecordError),  # long enough for v0 but not a v2 header
        ((">b", 16, 1), InvalidRecordError),  # a legacy magic v1 message set
        ((">b", 16, 3), CorruptRecordError),  # a magic no Kafka version wrote
    ],
    ids=["length-13", "length-40", "magic-1", "magic-3"],
)
def test_iter_batches_refuses_a_batch_it_cannot_walk_past(edit, error):
    batch = patched(build_batch(simple_records()), *edit, fix_crc=False)
    with pytest.raises(error):
        list(iter_batches(batch))


def test_recovery_keeps_the_valid_prefix_up_to_the_first_bad_crc():
    batches = [bytearray(build_batch(simple_records(n))) for n in (1, 2, 3)]
    batches[1][-1] ^= 0xFF
    log = b"".join(batches)
    assert [b.records_count for b in iter_valid_batches(log)] == [1]
    assert valid_prefix_length(log) == len(batches[0])


def test_recovery_stops_at_an_unwalkable_length_without_raising():
    good = build_batch(simple_records(2))
    assert valid_prefix_length(good + struct.pack(">qi", 0, 3) + bytes(50)) == len(good)
    assert valid_prefix_length(good, len(good)) == 0


# -- the record codec ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@given(records=record_lists())
@settings(deadline=None)
def test_records_round_trip_through_every_codec(codec, records):
    assert RecordBatch(build_batch(records, compression=codec)).records() == records


def test_a_batch_keeps_its_records_original_offsets_with_gaps_as_the_cleaner_leaves_them():
    kept = [Record(3, 10, b"a", b"1"), Record(7, 12, b"b", None), Record(9, 11, b"c", b"3")]
    batch = RecordBatch(build_batch(kept, base_offset=2))
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (2, 9, 3)
    assert batch.records() == kept


def test_building_needs_records_in_increasing_offset_order():
    with pytest.raises(ValueError):
        build_batch([])
    with pytest.raises(ValueError):
        build_batch([Record(1, 0, None, b"x"), Record(1, 0, None, b"y")])


def test_a_record_whose_length_disagrees_with_its_fields_is_an_invalid_record():
    batch = bytearray(build_batch([Record(0, 5, b"k", b"v")]))
    batch[RECORD_BATCH_OVERHEAD] += 2  # the record's length varint (zigzag: +1)
    with pytest.raises(InvalidRecordError):
        RecordBatch(restamp_crc(batch)).records()


def test_a_records_count_above_what_the_batch_holds_is_an_invalid_record():
    batch = patched(build_batch(simple_records(2)), ">i", 57, 3)
    with pytest.raises(InvalidRecordError):
        RecordBatch(batch).records()


def test_undecodable_compressed_records_are_a_corrupt_message():
    batch = bytearray(build_batch(simple_records(), compression=CompressionType.ZSTD))
    batch[RECORD_BATCH_OVERHEAD:] = b"\x00" * (len(batch) - RECORD_BATCH_OVERHEAD)
    with pytest.raises(CorruptRecordError):
        RecordBatch(restamp_crc(batch)).records()


# -- interoperability with kafka-python ------------------------------------------------------------


@pytest.fixture
def kafka_python_codecs(monkeypatch):
    """Give kafka-python snappy, lz4 and zstd through cramjam: only gzip is installed for it.

    Its batch framing, record encoding and xerial snappy framing stay its own, so these tests
    still compare two implementations of the v2 format.
    """
    raw_snappy = SimpleNamespace(compress=lambda d: bytes(cramjam.snappy.compress_raw(d)),
                                 decompress=lambda d: bytes(cramjam.snappy.decompress_raw(d)))
    monkeypatch.setattr(kafka.codec, "snappy", raw_snappy)
    monkeypatch.setattr(kafka.codec, "lz4", SimpleNamespace())
    monkeypatch.setattr(kafka.codec, "zstd", SimpleNamespace())
    monkeypatch.setattr(kafka_default_records, "lz4_encode",
                        lambda d: bytes(cramjam.lz4.compress(bytes(d))))
    monkeypatch.setattr(kafka_default_records, "lz4_decode",
                        lambda d: bytes(cramjam.lz4.decompress(d)))
    monkeypatch.setattr(kafka_default_records, "zstd_encode",
                        lambda d: bytes(cramjam.zstd.compress(d)))
    monkeypatch.setattr(kafka_default_records, "zstd_decode",
                        lambda d: bytes(cramjam.zstd.decompress(d)))


def compressible_records(count=20):
    return [
        Record(i, 1_700_000_000_000 + i * 3, None if i % 5 == 0 else b"key-%d" % (i % 3),
               None if i % 7 == 6 else b"value " * 20, (("trace", b"abc"), ("empty", None)))
        for i in range(count)
    ]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_we_read_batches_built_by_kafka_python(kafka_python_codecs, codec):
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=True, producer_id=77,
        producer_epoch=2, base_sequence=100, batch_size=1 << 20,
    )
    records = compressible_records()
    for r in records:
        builder.append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value,
                       headers=list(r.headers))
    data = bytes(builder.build())
    batch = RecordBatch(data)
    assert batch.is_valid_crc() and batch.size_in_bytes == len(data)
    assert batch.compression_type is codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 2, 100)
    assert batch.is_transactional and batch.records_count == len(records)
    assert batch.max_timestamp == records[-1].timestamp
    assert batch.records() == records


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_kafka_python_reads_batches_we_build_and_stamp(kafka_python_codecs, codec):
    records = compressible_records()
    buffer = bytearray(build_batch(records, compression=codec, producer_id=5, producer_epoch=1,
                                   base_sequence=0)
                       + build_batch(records[:2], compression=codec))
    second = RecordBatch(buffer, len(buffer) - len(build_batch(records[:2], compression=codec)))
    second.set_base_offset(20)
    second.set_log_append_time(1_800_000_000_000)

    theirs = MemoryRecords(bytes(buffer))
    first_batch, second_batch = theirs.next_batch(), theirs.next_batch()
    assert theirs.next_batch() is None
    assert first_batch.validate_crc() and second_batch.validate_crc()
    assert first_batch.compression_type == codec
    assert (first_batch.producer_id, first_batch.base_sequence, first_batch.last_sequence) == (
        5, 0, 19)
    read = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in first_batch]
    assert read == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]
    assert [(r.offset, r.timestamp) for r in second_batch] == [
        (20, 1_800_000_000_000), (21, 1_800_000_000_000)]
