"""PartitionLog against a model: a list of the batches the log should hold, the leader
epochs it should know and what each idempotent producer wrote.

Hypothesis drives random appends as leader (some from idempotent producers, some retries of
their recent batches) and as follower (batches carrying their own offsets and epochs, with
gaps as a compacted leader sends them), with tiny segments, tiny indexes and a short
segment.ms so that rolls of every kind happen; rolls, truncations at arbitrary offsets,
full truncations, DeleteRecords, retention, flushes, checkpoints of the recovery point,
clean reopens, crashes (a reopen without close, from the last checkpointed recovery point)
with and without a torn tail. It checks every read, ListOffsets lookup and offset, the
leader epoch cache (its entries and OffsetsForLeaderEpoch's answer for every epoch) and the
producer state against the model. Two open descriptors at most are shared by every segment,
so they are evicted and reopened all the time.
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
    UnexpectedAppendOffsetError,
)
from odradek.log.context import StandaloneLogContext
from odradek.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry
from odradek.log.producer_state import NUM_BATCHES_TO_RETAIN
from odradek.protocol.records import NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE, Record, build_batch

PRODUCER_IDS = (1000, 1001)


@dataclass(frozen=True)
class ModelBatch:
    base_offset: int
    last_offset: int
    data: bytes  # as stored: stamped with its offset and leader epoch
    timestamps: tuple[int, ...]  # of its records, at base_offset, base_offset + 1, ...
    epoch: int
    producer_id: int | None = None
    first_seq: int = NO_SEQUENCE
    last_seq: int = NO_SEQUENCE


records_strategy = st.lists(
    st.tuples(st.integers(0, 80), st.integers(0, 10_000)),  # (value size, timestamp)
    min_size=1,
    max_size=6,
)


def make_batch(records, *, base_offset: int = 0, epoch: int = NO_PARTITION_LEADER_EPOCH,
               producer_id: int | None = None, first_seq: int = NO_SEQUENCE,
               trailing_gap: int = 0) -> bytearray:
    """A batch of (value size, timestamp) records at ``base_offset``.., its last offset
    ``trailing_gap`` beyond its last record's (the cleaner removed the records there)."""
    last_offset = base_offset + len(records) - 1 + trailing_gap
    producer = {} if producer_id is None else {
        "producer_id": producer_id, "producer_epoch": 0, "base_sequence": first_seq}
    return bytearray(build_batch(
        [Record(base_offset + i, ts, b"key", b"v" * size) for i, (size, ts) in enumerate(records)],
        base_offset=base_offset, partition_leader_epoch=epoch, last_offset=last_offset,
        **producer,
    ))


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
        self.epochs: list[EpochEntry] = []  # what the leader epoch cache should hold
        self.next_seq = dict.fromkeys(PRODUCER_IDS, 0)
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.files = OpenFiles(capacity=2)
        self.checkpointed_recovery_point = 0
        self.log = self._open(had_clean_shutdown=False)

    def _open(self, *, had_clean_shutdown: bool) -> PartitionLog:
        log = PartitionLog.open(
            self.directory, self.config, now_ms=self.now_ms,
            log_start_offset=self.log_start_offset,
            recovery_point=self.checkpointed_recovery_point,
            had_clean_shutdown=had_clean_shutdown,
            context=StandaloneLogContext(self.files),
        )
        # No high watermark checkpoint: it opens at the log start offset, and the broker,
        # the whole ISR, raises it to the log end offset.
        assert log.high_watermark == log.log_start_offset
        log.update_high_watermark(log.log_end_offset)
        self._truncate_epochs_from_end(self.log_end_offset)
        self._truncate_epochs_from_start(self.log_start_offset)
        return log

    def teardown(self):
        if hasattr(self, "log"):
            self.log.close()
            self.files.close_all()
            shutil.rmtree(self.tmp)

    # -- the leader epoch cache's rules, as Kafka states them ------------------------------

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        assert not self.epochs or epoch >= self.epochs[-1].epoch, "the model writes in order"
        if self.epochs and self.epochs[-1].epoch == epoch:
            return
        # Start offsets increase strictly: an epoch that wrote nothing before this one's
        # start (DeleteRecords moved it up to the log start offset) is replaced.
        while self.epochs and self.epochs[-1].start_offset >= start_offset:
            self.epochs.pop()
        self.epochs.append(EpochEntry(epoch, start_offset))

    def _truncate_epochs_from_end(self, end_offset: int) -> None:
        self.epochs = [entry for entry in self.epochs if entry.start_offset < end_offset]

    def _truncate_epochs_from_start(self, start_offset: int) -> None:
        below = [entry for entry in self.epochs if entry.start_offset <= start_offset]
        if below:
            self.epochs = [EpochEntry(below[-1].epoch, start_offset)] + [
                entry for entry in self.epochs if entry.start_offset > start_offset]

    def _expected_end_offset_for(self, epoch: int) -> tuple[int, int]:
        if epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self.epochs and self.epochs[-1].epoch == epoch:
            return epoch, self.log_end_offset
        higher = [entry for entry in self.epochs if entry.epoch > epoch]
        if not higher:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        lower = [entry for entry in self.epochs if entry.epoch <= epoch]
        return (lower[-1].epoch if lower else epoch), higher[0].start_offset

    # -- the producer state ------------------------------------------------------------

    def _batches_of(self, producer_id: int) -> list[ModelBatch]:
        return [b for b in self.batches if b.producer_id == producer_id]

    def _recent_batches_known(self, producer_id: int) -> list[ModelBatch]:
        """The producer's last batches the state must know: among its last five, those a
        rebuild replays whatever snapshot it starts from (at or after the log start)."""
        recent = self._batches_of(producer_id)[-NUM_BATCHES_TO_RETAIN:]
        return [b for b in recent if b.base_offset >= self.log_start_offset]

    def _next_sequence(self, producer_id: int) -> int:
        # A producer continues from what the partition answers it knows (after a truncation
        # the state may know less than the model: the producer then starts afresh).
        entry = self.log.producer_state.entry(producer_id)
        return entry.last_seq + 1 if entry is not None else self.next_seq[producer_id]

    # -- rules -----------------------------------------------------------------------------

    @rule(batches=st.lists(records_strategy, min_size=1, max_size=3),
          producer_id=st.sampled_from((None, *PRODUCER_IDS)))
    def append_as_leader(self, batches, producer_id):
        """A client's batches; the first from an idempotent producer when ``producer_id``."""
        first_seq = NO_SEQUENCE if producer_id is None else self._next_sequence(producer_id)
        produced = [make_batch(batches[0], producer_id=producer_id, first_seq=first_seq)]
        produced += [make_batch(records) for records in batches[1:]]
        records = bytearray(b"".join(produced))
        if len(records) > self.config.segment_bytes:
            try:
                self.log.append_as_leader(records, leader_epoch=self.leader_epoch,
                                          now_ms=self.now_ms)
            except RecordBatchTooLargeError:
                return
            raise AssertionError("an append larger than a segment was accepted")
        info = self.log.append_as_leader(records, leader_epoch=self.leader_epoch,
                                         now_ms=self.now_ms)
        assert info.first_offset == self.log_end_offset
        position = 0
        for i, (batch_records, batch) in enumerate(zip(batches, produced)):
            base_offset = self.log_end_offset
            last_offset = base_offset + len(batch_records) - 1
            stored = bytes(records[position : position + len(batch)])
            position += len(batch)
            idempotent = i == 0 and producer_id is not None
            self.batches.append(ModelBatch(
                base_offset, last_offset, stored, tuple(t for _, t in batch_records),
                self.leader_epoch, producer_id if idempotent else None,
                first_seq if idempotent else NO_SEQUENCE,
                first_seq + len(batch_records) - 1 if idempotent else NO_SEQUENCE,
            ))
            self.log_end_offset = last_offset + 1
        if producer_id is not None:
            self.next_seq[producer_id] = self.batches[-len(batches)].last_seq + 1
        self._assign_epoch(self.leader_epoch, info.first_offset)
        assert info.last_offset == self.log_end_offset - 1
        self.log.update_high_watermark(self.log.log_end_offset)

    @rule(data=st.data())
    def append_as_follower(self, data):
        """Batches as the leader holds them: their offsets (with gaps where its cleaner
        removed records) and epochs (never lower than what the log holds)."""
        epoch = max([0, *(e.epoch for e in self.epochs), *(b.epoch for b in self.batches[-1:])])
        offset = self.log_end_offset
        produced, model = [], []
        for _ in range(data.draw(st.integers(1, 3), label="batches")):
            offset += data.draw(st.sampled_from([0, 0, 0, 1, 5]), label="gap")
            epoch += data.draw(st.sampled_from([0, 0, 1, 2]), label="epoch step")
            batch_records = data.draw(records_strategy, label="records")
            trailing_gap = data.draw(st.sampled_from([0, 0, 2]), label="trailing gap")
            producer_id = data.draw(st.sampled_from((None, *PRODUCER_IDS)), label="producer")
            first_seq = NO_SEQUENCE
            if producer_id is not None:
                first_seq = self.next_seq[producer_id]
                self.next_seq[producer_id] += len(batch_records) + trailing_gap
            batch = make_batch(batch_records, base_offset=offset, epoch=epoch,
                               producer_id=producer_id, first_seq=first_seq,
                               trailing_gap=trailing_gap)
            last_offset = offset + len(batch_records) - 1 + trailing_gap
            produced.append(batch)
            model.append(ModelBatch(
                offset, last_offset, bytes(batch), tuple(t for _, t in batch_records), epoch,
                producer_id, first_seq,
                NO_SEQUENCE if producer_id is None else first_seq + last_offset - offset,
            ))
            offset = last_offset + 1
        records = bytearray(b"".join(produced))
        if len(records) > self.config.segment_bytes:
            try:
                self.log.append_as_follower(records, now_ms=self.now_ms)
            except RecordBatchTooLargeError:
                return
            raise AssertionError("an append larger than a segment was accepted")
        info = self.log.append_as_follower(records, now_ms=self.now_ms)
        assert (info.first_offset, info.last_offset) == (model[0].base_offset,
                                                         model[-1].last_offset)
        assert bytes(records) == b"".join(b.data for b in model)  # stored as they came
        for batch in model:
            self.batches.append(batch)
            self._assign_epoch(batch.epoch, batch.base_offset)
        self.log_end_offset = model[-1].last_offset + 1
        self.leader_epoch = max(self.leader_epoch, epoch)
        self.log.update_high_watermark(self.log.log_end_offset)

    @precondition(lambda self: self.log_end_offset > 0)
    @rule(data=st.data())
    def append_as_follower_below_the_log_end_is_refused(self, data):
        base_offset = data.draw(st.integers(0, self.log_end_offset - 1))
        try:
            self.log.append_as_follower(make_batch([(1, 0)], base_offset=base_offset, epoch=0),
                                        now_ms=self.now_ms)
        except UnexpectedAppendOffsetError:
            return
        raise AssertionError(f"a replicated batch at {base_offset} was appended below the "
                             f"log end offset {self.log_end_offset}")

    @precondition(lambda self: any(self._recent_batches_known(p) for p in PRODUCER_IDS))
    @rule(data=st.data())
    def a_retry_gets_the_original_offsets(self, data):
        candidates = [b for p in PRODUCER_IDS for b in self._recent_batches_known(p)]
        original = data.draw(st.sampled_from(candidates))
        retry = make_batch([(1, 0)] * (original.last_seq - original.first_seq + 1),
                           producer_id=original.producer_id, first_seq=original.first_seq)
        info = self.log.append_as_leader(retry, leader_epoch=self.leader_epoch,
                                         now_ms=self.now_ms)
        assert (info.first_offset, info.last_offset) == (original.base_offset,
                                                         original.last_offset)
        assert self.log.log_end_offset == self.log_end_offset  # not written again

    @rule(ms=st.integers(0, 700))
    def time_passes(self, ms):
        self.now_ms += ms

    @rule()
    def roll(self):
        self.log.roll()

    @rule(data=st.data())
    def truncate_to(self, data):
        offset = data.draw(st.integers(0, self.log_end_offset + 2))
        base_offsets = [s.base_offset for s in self.log.segments]
        self.log.truncate_to(offset)
        self.leader_epoch += 1
        if offset >= self.log_end_offset:
            return
        if offset < base_offsets[0]:  # nothing left: the log starts afresh at the offset
            self._start_afresh_at(offset)
            return
        # The batch holding the offset goes whole. The segment holding it stays, even if
        # that leaves nothing in it: the log then ends at its base offset (after a gap in
        # replicated offsets, that is beyond the last batch, as Kafka's truncateTo leaves
        # its log end offset at the target).
        self.batches = [b for b in self.batches if b.last_offset < offset]
        active_base_offset = max(base for base in base_offsets if base <= offset)
        self.log_end_offset = max(
            self.batches[-1].last_offset + 1 if self.batches else active_base_offset,
            active_base_offset,
        )
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self._truncate_epochs_from_end(self.log_end_offset)
        assert all(o <= self.log_end_offset for o in self.log.producer_state.snapshot_offsets())

    @rule(data=st.data())
    def truncate_fully_and_start_at(self, data):
        """A follower whose log does not overlap its leader's starts again at the leader's
        log start offset, below or above its own log end offset."""
        offset = data.draw(st.integers(0, self.log_end_offset + 50))
        self.log.truncate_fully_and_start_at(offset)
        self.leader_epoch += 1
        self._start_afresh_at(offset)
        assert self.log.producer_state.snapshot_offsets() == []
        assert [s.base_offset for s in self.log.segments] == [offset]

    def _start_afresh_at(self, offset: int) -> None:
        self.batches = []
        self.epochs = []
        self.log_start_offset = self.log_end_offset = offset

    @rule(data=st.data())
    def delete_records_before(self, data):
        offset = data.draw(st.integers(0, self.log_end_offset))
        assert self.log.delete_records_before(offset) == max(offset, self.log_start_offset)
        self.log_start_offset = max(offset, self.log_start_offset)
        self._truncate_epochs_from_start(self.log_start_offset)

    @rule()
    def apply_retention(self):
        self.log.delete_old_segments(self.now_ms)
        # Whole segments go, from the oldest, never reaching past the high watermark.
        first_base_offset = self.log.segments[0].base_offset
        assert first_base_offset <= self.log.high_watermark
        self.log_start_offset = max(self.log_start_offset, first_base_offset)
        self._truncate_epochs_from_start(self.log_start_offset)

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
            garbage = bytes(make_batch([(garbage, 0)]))[: garbage]
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
        segment_bases = [s.base_offset for s in self.log.segments]
        expected, size, previous_last_offset = [], 0, None
        for batch in (b for b in self.batches if b.last_offset >= fetch_offset):
            if batch.last_offset >= upper:
                break
            if previous_last_offset is not None and any(
                    previous_last_offset < base <= batch.base_offset for base in segment_bases):
                break  # a read returns data from one segment
            if size + len(batch.data) > max_bytes and (expected or not min_one_batch):
                break
            expected.append(batch.data)
            size += len(batch.data)
            previous_last_offset = batch.last_offset
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

    @invariant()
    def the_leader_epoch_cache_matches_the_model(self):
        if not hasattr(self, "log"):
            return
        cache = self.log.leader_epoch_cache
        assert cache.entries == self.epochs
        for epoch in range(UNDEFINED_EPOCH, self.leader_epoch + 2):
            assert cache.end_offset_for(epoch, self.log_end_offset) \
                == self._expected_end_offset_for(epoch), epoch
        # Every batch from the first entry on was written in the epoch the cache names.
        for batch in self.batches:
            holding = [e for e in self.epochs if e.start_offset <= batch.base_offset]
            if holding and batch.base_offset >= self.log_start_offset:
                assert holding[-1].epoch == batch.epoch, (batch.base_offset, self.epochs)

    @invariant()
    def the_producer_state_matches_the_model(self):
        """The state knows some of each producer's batches below the log end offset, in
        order, its last one among them: all of its last five at or after the log start
        offset (those before it only if a snapshot kept them)."""
        if not hasattr(self, "log"):
            return
        for producer_id in PRODUCER_IDS:
            written = [(b.first_seq, b.last_seq, b.base_offset, b.last_offset)
                       for b in self._batches_of(producer_id)]
            entry = self.log.producer_state.entry(producer_id)
            known = [] if entry is None else [
                (m.first_seq, m.last_seq, m.first_offset, m.last_offset) for m in entry.batches]
            remaining = iter(written)
            assert all(batch in remaining for batch in known), (known, written)
            must = [(b.first_seq, b.last_seq, b.base_offset, b.last_offset)
                    for b in self._recent_batches_known(producer_id)]
            assert known[len(known) - len(must):] == must, (known, must)


PartitionLogMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestPartitionLogAgainstModel = PartitionLogMachine.TestCase
