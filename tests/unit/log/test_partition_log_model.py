"""PartitionLog against a model: a list of the batches the log should hold.

Hypothesis drives random appends (tiny segments, tiny indexes and a short segment.ms so that
rolls of every kind happen), rolls, truncations, DeleteRecords, retention, flushes,
checkpoints of the recovery point, clean reopens, crashes (a reopen without close, from the
last checkpointed recovery point) with and without a torn tail, and checks every read,
ListOffsets lookup and offset against the model. Two open descriptors at most are shared by
every segment, so they are evicted and reopened all the time.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from odradek.log import (
    LogConfig,
    OffsetOutOfRangeError,
    OpenFiles,
    PartitionLog,
    RecordBatchTooLargeError,
)
from odradek.log.context import StandaloneLogContext
from producer_batches import produce_batch


@dataclass(frozen=True)
class ModelBatch:
    base_offset: int
    last_offset: int
    data: bytes  # as stored: stamped with its offset and leader epoch
    timestamps: tuple[int, ...]


records_strategy = st.lists(
    st.tuples(st.integers(0, 80), st.integers(0, 10_000)),  # (value size, timestamp)
    min_size=1,
    max_size=6,
)


class PartitionLogMachine(RuleBasedStateMachine):
    @initialize(
        segment_bytes=st.integers(300, 3_000),
        index_interval_bytes=st.sampled_from([0, 100, 4096]),
        segment_index_bytes=st.sampled_from([24, 120, 10_485_760]),
        retention_ms=st.sampled_from([-1, 5_000]),
        retention_bytes=st.sampled_from([-1, 2_000]),
    )
    def open_log(
        self, segment_bytes, index_interval_bytes, segment_index_bytes, retention_ms,
        retention_bytes,
    ):
        self.tmp = Path(tempfile.mkdtemp())
        self.directory = self.tmp / "orders-0"
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            segment_ms=1_000,
            index_interval_bytes=index_interval_bytes,
            segment_index_bytes=segment_index_bytes,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
        )
        self.now_ms = 0
        self.leader_epoch = 0
        self.batches: list[ModelBatch] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.files = OpenFiles(capacity=2)
        self.checkpointed_recovery_point = 0
        self.log = self._open(had_clean_shutdown=False)

    def _open(self, *, had_clean_shutdown: bool) -> PartitionLog:
        return PartitionLog.open(
            self.directory, self.config, now_ms=self.now_ms,
            log_start_offset=self.log_start_offset,
            recovery_point=self.checkpointed_recovery_point,
            had_clean_shutdown=had_clean_shutdown,
            context=StandaloneLogContext(self.files),
        )

    def teardown(self):
        if hasattr(self, "log"):
            self.log.close()
            self.files.close_all()
            shutil.rmtree(self.tmp)

    # -- rules -----------------------------------------------------------------------------

    @rule(batches=st.lists(records_strategy, min_size=1, max_size=3))
    def append(self, batches):
        produced = [
            produce_batch([b"v" * size for size, _ in records], timestamps=[t for _, t in records])
            for records in batches
        ]
        records = bytearray(b"".join(produced))
        if len(records) > self.config.segment_bytes:
            try:
                self.log.append(records, leader_epoch=self.leader_epoch, now_ms=self.now_ms)
            except RecordBatchTooLargeError:
                return
            raise AssertionError("an append larger than a segment was accepted")
        info = self.log.append(records, leader_epoch=self.leader_epoch, now_ms=self.now_ms)
        assert info.first_offset == self.log_end_offset
        position = 0
        for batch_records, batch in zip(batches, produced):
            base_offset = self.log_end_offset
            stored = bytes(records[position : position + len(batch)])
            position += len(batch)
            self.batches.append(ModelBatch(
                base_offset, base_offset + len(batch_records) - 1, stored,
                tuple(t for _, t in batch_records),
            ))
            self.log_end_offset += len(batch_records)
        assert info.last_offset == self.log_end_offset - 1
        self.log.high_watermark = self.log.log_end_offset

    @rule(ms=st.integers(0, 700))
    def time_passes(self, ms):
        self.now_ms += ms

    @rule()
    def roll(self):
        self.log.roll()

    @rule(data=st.data())
    def truncate_to(self, data):
        offset = data.draw(st.integers(0, self.log_end_offset + 2))
        first_base_offset = self.log.segments[0].base_offset
        self.log.truncate_to(offset)
        self.leader_epoch += 1
        if offset >= self.log_end_offset:
            return
        if offset < first_base_offset:  # nothing left: the log starts afresh at the offset
            self.batches = []
            self.log_start_offset = self.log_end_offset = offset
            return
        # The batch holding the offset goes whole.
        self.batches = [b for b in self.batches if b.last_offset < offset]
        self.log_end_offset = (
            self.batches[-1].last_offset + 1 if self.batches else first_base_offset
        )
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)

    @rule(data=st.data())
    def delete_records_before(self, data):
        offset = data.draw(st.integers(0, self.log_end_offset))
        assert self.log.delete_records_before(offset) == max(offset, self.log_start_offset)
        self.log_start_offset = max(offset, self.log_start_offset)

    @rule()
    def apply_retention(self):
        self.log.delete_old_segments(self.now_ms)
        # Whole segments go, from the oldest, never reaching past the high watermark.
        first_base_offset = self.log.segments[0].base_offset
        assert first_base_offset <= self.log.high_watermark
        self.log_start_offset = max(self.log_start_offset, first_base_offset)

    @rule()
    def flush(self):
        self.log.flush_to(self.log.log_end_offset)
        assert self.log.recovery_point == self.log_end_offset

    @rule()
    def checkpoint_the_recovery_point(self):
        self.checkpointed_recovery_point = self.log.recovery_point

    @rule()
    def clean_shutdown_then_reopen(self):
        self.log.close()
        self.log = self._open(had_clean_shutdown=True)
        assert self.log.recovery_point == self.log_end_offset

    @rule()
    def crash_then_reopen(self):
        """The process dies: nothing is closed and index entries not yet written are lost;
        the restart recovers from the last checkpointed recovery point."""
        self.files.close_all()
        self.log = self._open(had_clean_shutdown=False)

    @rule(garbage=st.one_of(st.binary(min_size=1, max_size=300), st.integers(1, 200)))
    def crash_with_a_torn_tail_then_reopen(self, garbage):
        """A crash mid-write leaves a partial batch or garbage after the last whole batch."""
        if isinstance(garbage, int):
            garbage = bytes(produce_batch([b"x" * garbage]))[: garbage]
        path = self.log.segments[-1].log_path
        self.files.close_all()
        with open(path, "ab") as f:
            f.write(garbage)
        self.log = self._open(had_clean_shutdown=False)

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def read(self, data):
        fetch_offset = data.draw(st.integers(self.log_start_offset, self.log_end_offset))
        max_bytes = data.draw(st.integers(0, 1_500))
        max_offset = data.draw(st.none() | st.integers(0, self.log_end_offset + 1))
        min_one_batch = data.draw(st.booleans())
        info = self.log.read(
            fetch_offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch
        )
        expected = self._expected_read(fetch_offset, max_bytes, max_offset, min_one_batch)
        assert info.records == expected
        assert (info.log_start_offset, info.log_end_offset) == (
            self.log_start_offset, self.log_end_offset
        )

    def _expected_read(self, fetch_offset, max_bytes, max_offset, min_one_batch) -> bytes:
        upper = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        segment_bases = {s.base_offset for s in self.log.segments}
        expected, size = [], 0
        for batch in (b for b in self.batches if b.last_offset >= fetch_offset):
            if batch.last_offset >= upper:
                break
            if expected and batch.base_offset in segment_bases:
                break  # a read returns data from one segment
            if size + len(batch.data) > max_bytes and (expected or not min_one_batch):
                break
            expected.append(batch.data)
            size += len(batch.data)
        return b"".join(expected)

    @rule(data=st.data())
    def read_out_of_range(self, data):
        fetch_offset = data.draw(
            st.integers(-5, self.log_start_offset - 1) | st.integers(self.log_end_offset + 1, 10**6)
        )
        try:
            self.log.read(fetch_offset, 1_000)
        except OffsetOutOfRangeError:
            return
        raise AssertionError(f"read at {fetch_offset} was not out of range")

    @rule(timestamp=st.integers(-1, 10_001))
    def offset_for_timestamp(self, timestamp):
        expected = next(
            (
                (offset, ts)
                for batch in self.batches
                for offset, ts in enumerate(batch.timestamps, start=batch.base_offset)
                if offset >= self.log_start_offset and ts >= timestamp
            ),
            None,
        )
        assert self.log.offset_for_timestamp(timestamp) == expected

    @precondition(lambda self: self.batches)
    @rule()
    def max_timestamp_and_offset(self):
        records = [
            (ts, offset)
            for batch in self.batches
            for offset, ts in enumerate(batch.timestamps, start=batch.base_offset)
            if offset >= self.log.segments[0].base_offset
        ]
        if records and records[0][1] >= self.log_start_offset:
            max_timestamp = max(ts for ts, _ in records)
            offset = min(offset for ts, offset in records if ts == max_timestamp)
            if offset >= self.log_start_offset:
                assert self.log.max_timestamp_and_offset() == (offset, max_timestamp)

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def offsets_match_the_model(self):
        if not hasattr(self, "log"):
            return
        assert self.log.log_end_offset == self.log_end_offset
        assert self.log.log_start_offset == self.log_start_offset
        assert self.log.high_watermark <= self.log.log_end_offset
        assert self.log.recovery_point <= self.log.log_end_offset
        assert len(self.files) <= 2

    @invariant()
    def segments_are_ordered_and_within_their_limits(self):
        if not hasattr(self, "log"):
            return
        segments = self.log.segments
        assert [s.base_offset for s in segments] == sorted({s.base_offset for s in segments})
        assert segments[0].base_offset <= self.log_start_offset
        for segment in segments:
            assert segment.size <= self.config.segment_bytes
        for segment, following in zip(segments, segments[1:]):
            assert segment.next_offset <= following.base_offset


PartitionLogMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestPartitionLogAgainstModel = PartitionLogMachine.TestCase
