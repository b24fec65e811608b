"""The log cleaner and transactions (KIP-98, KIP-534): nothing from the last stable offset on
is cleaned, the records of aborted transactions go and supersede nothing, markers stay while
their transaction has data, then carry a delete horizon and go delete.retention.ms later,
the transaction index keeps what read_committed consumers need, and producers keep what
rebuilding their state needs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_cleaner import COMPACT, produce, stored_batches

from odradek.log import AbortedTxn, LogManager, PartitionLog
from odradek.log.cleaner import LogCleaner, clean
from odradek.protocol.control_records import build_end_txn_marker, read_end_txn_marker
from odradek.protocol.records import Record, RecordBatch, build_batch

DELETE_RETENTION_MS = COMPACT.delete_retention_ms


class TransactionalProducer:
    """Writes one-record batches to ``log`` as a transactional producer does, each verified
    with the coordinator (the partition's verification guard); :meth:`end` appends the
    marker the coordinator writes. Every append is replicated at once."""

    def __init__(self, log: PartitionLog, producer_id: int) -> None:
        self.log = log
        self.producer_id = producer_id
        self.epoch = 0
        self.sequence = 0

    def send(self, key: bytes, value: bytes | None) -> int:
        batch = build_batch([Record(0, 1_000, key, value)], base_offset=0,
                            producer_id=self.producer_id, producer_epoch=self.epoch,
                            base_sequence=self.sequence, is_transactional=True)
        guard = self.log.producer_state.verification_guard(self.producer_id)
        info = self.log.append_as_leader(bytearray(batch), leader_epoch=0, now_ms=1_000,
                                         verification_guard=guard)
        self.log.update_high_watermark(self.log.log_end_offset)
        self.sequence += 1
        return info.first_offset

    def end(self, *, commit: bool, bump_epoch: bool = False) -> int:
        """The marker's offset. ``bump_epoch``: transactions v2, which end every transaction
        with the next epoch."""
        epoch = self.epoch + 1 if bump_epoch else self.epoch
        marker = build_end_txn_marker(producer_id=self.producer_id, producer_epoch=epoch,
                                      coordinator_epoch=0, commit=commit, timestamp_ms=1_000)
        info = self.log.append_as_leader(bytearray(marker), leader_epoch=0, now_ms=1_000)
        self.log.update_high_watermark(self.log.log_end_offset)
        if bump_epoch:
            self.epoch, self.sequence = epoch, 0
        return info.first_offset


def fill(log: PartitionLog, count: int = 4) -> None:
    """Records of a key of their own, enough to roll what came before out of the active
    segment."""
    for i in range(count):
        produce(log, b"filler", b"%d" % i)


def consume(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of what a read_uncommitted consumer gets from the log start:
    every record but the markers."""
    return [(r.offset, r.key, r.value) for batch in stored_batches(log)
            if not batch.is_control_batch for r in batch.records()]


def read_committed(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of what a read_committed consumer gets from the log start: up to
    the last stable offset, without the records of the aborted transactions the fetch
    names, dropped as Kafka's consumer does (a producer's batches from its aborted
    transaction's first offset until its ABORT marker)."""
    last_stable_offset = log.last_stable_offset
    pending = sorted(log.collect_aborted_transactions(log.log_start_offset, last_stable_offset),
                     key=lambda txn: txn.first_offset)
    aborted_producers: set[int] = set()
    records = []
    for batch in stored_batches(log):
        if batch.base_offset >= last_stable_offset:
            break
        while pending and pending[0].first_offset <= batch.last_offset:
            aborted_producers.add(pending.pop(0).producer_id)
        if batch.is_control_batch:
            if batch.records_count and not read_end_txn_marker(batch).commit:
                aborted_producers.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in aborted_producers:
            continue
        records += [(r.offset, r.key, r.value) for r in batch.records()]
    return records


def markers(log: PartitionLog) -> dict[int, int | None]:
    """Marker offset -> its delete horizon (None before the cleaner stamped one)."""
    return {b.base_offset: b.delete_horizon_ms for b in stored_batches(log) if b.is_control_batch}


def aborted_index(log: PartitionLog) -> list[AbortedTxn]:
    return [txn for segment in log.segments for txn in segment.txn_index.entries]


def test_a_delete_horizon_takes_the_base_timestamps_place_and_record_timestamps_stay():
    stamped = RecordBatch(build_batch([Record(5, 1_000, b"k", None), Record(6, 1_200, b"j", b"v")],
                                      delete_horizon_ms=50_000))
    assert stamped.delete_horizon_ms == 50_000 and stamped.attributes & 0x40
    assert [(r.offset, r.timestamp) for r in stamped.records()] == [(5, 1_000), (6, 1_200)]
    assert stamped.max_timestamp == 1_200 and stamped.is_valid_crc()
    assert RecordBatch(build_batch([Record(0, 1_000, b"k", b"v")])).delete_horizon_ms is None


def test_aborted_records_go_committed_ones_are_compacted_and_markers_go_after_a_horizon(
        open_log):
    log = open_log(COMPACT)
    p7, p8 = TransactionalProducer(log, 7), TransactionalProducer(log, 8)
    produce(log, b"x", b"x-plain")                    # 0
    p7.send(b"x", b"x-aborted")                       # 1: supersedes nothing
    abort = p7.end(commit=False)                      # 2
    p8.send(b"b", b"b-old")                           # 3
    old_commit = p8.end(commit=True)                  # 4
    p7.send(b"c", b"c-committed")                     # 5
    c_commit = p7.end(commit=True)                    # 6
    p8.send(b"b", b"b-new")                           # 7: supersedes 3
    b_commit = p8.end(commit=True)                    # 8
    fill(log)                                         # 9..12
    assert log.segments[-1].base_offset > b_commit
    assert aborted_index(log) == [AbortedTxn(7, 1, abort, abort + 1)]
    committed = [(0, b"x", b"x-plain"), (3, b"b", b"b-old"), (5, b"c", b"c-committed"),
                 (7, b"b", b"b-new")]
    assert read_committed(log)[:4] == committed

    first = clean(log, 0, now_ms=10_000)
    assert first is not None and first.deletes_due_ms is None
    # The aborted record is gone and did not remove the plain one; the old committed "b"
    # is compacted away like any other record.
    kept = [(0, b"x", b"x-plain"), (5, b"c", b"c-committed"), (7, b"b", b"b-new")]
    assert consume(log)[:3] == kept
    assert read_committed(log) == consume(log)
    # Every marker's transaction had data this round: all stay, unstamped, and the abort
    # keeps its index entry.
    assert markers(log) == {abort: None, old_commit: None, c_commit: None, b_commit: None}
    assert aborted_index(log) == [AbortedTxn(7, 1, abort, abort + 1)]

    fill(log)
    second = clean(log, first.end_offset, now_ms=20_000)
    # The abort and the old commit have no data left: stamped now + delete.retention.ms;
    # the abort's entry goes with its data.
    horizon = 20_000 + DELETE_RETENTION_MS
    assert markers(log) == {abort: horizon, old_commit: horizon, c_commit: None,
                            b_commit: None}
    assert second.deletes_due_ms == horizon
    assert aborted_index(log) == []
    stamped = next(b for b in stored_batches(log) if b.base_offset == abort)
    assert not read_end_txn_marker(stamped).commit and stamped.is_valid_crc()
    assert stamped.records()[0].timestamp == 1_000
    assert read_committed(log)[:3] == kept

    # Nothing dirty and the horizon not reached: no round. At the horizon, they go.
    assert clean(log, second.end_offset, now_ms=horizon - 1,
                 deletes_due_ms=second.deletes_due_ms) is None
    third = clean(log, second.end_offset, now_ms=horizon, deletes_due_ms=second.deletes_due_ms)
    assert third is not None and third.deletes_due_ms is None
    assert markers(log) == {c_commit: None, b_commit: None}
    assert read_committed(log)[:3] == kept


def test_nothing_from_the_last_stable_offset_on_is_cleaned(open_log):
    log = open_log(COMPACT)
    for i in range(4):
        produce(log, b"k", b"before-%d" % i)          # 0..3
    p7 = TransactionalProducer(log, 7)
    undecided = p7.send(b"k", b"undecided")           # 4
    for i in range(6):
        produce(log, b"k", b"after-%d" % i)           # 5..10
    assert log.last_stable_offset == undecided
    unstable_base = max(s.base_offset for s in log.segments if s.base_offset <= undecided)
    assert 0 < unstable_base < log.segments[-1].base_offset
    before = consume(log)

    first = clean(log, 0, now_ms=10_000)
    assert first is not None and first.end_offset == unstable_base
    after = consume(log)
    # Below the segment of the undecided transaction, compacted; from it on, untouched,
    # the transaction's record included, though later records have its key.
    assert [r for r in after if r[0] < unstable_base] == [(3, b"k", b"before-3")]
    assert [r for r in after if r[0] >= unstable_base] == \
        [r for r in before if r[0] >= unstable_base]
    assert (undecided, b"k", b"undecided") in after

    # Once it commits, the rest is cleaned too.
    p7.end(commit=True)
    fill(log)
    assert clean(log, first.end_offset, now_ms=10_000).end_offset == log.segments[-1].base_offset
    assert (undecided, b"k", b"undecided") not in consume(log)
    assert [r for r in consume(log) if r[1] == b"k"] == [(10, b"k", b"after-5")]


def test_an_abort_whose_marker_is_past_the_round_still_removes_its_records(open_log):
    log = open_log(COMPACT)
    p7 = TransactionalProducer(log, 7)
    produce(log, b"x", b"x-plain")                    # 0
    p7.send(b"x", b"x-aborted")                       # 1
    produce(log, b"y", b"y-plain")                    # 2
    fill(log)
    abort = p7.end(commit=False)                      # in the active segment
    assert log.segments[-1].base_offset <= abort
    p7.send(b"z", b"z-next")                          # the producer goes on: 1 is not its last
    p7.end(commit=True)

    clean(log, 0, now_ms=10_000)
    assert [r for r in consume(log) if r[1] in (b"x", b"y")] == [(0, b"x", b"x-plain"),
                                                                  (2, b"y", b"y-plain")]
    # The marker was not cleaned: its entry stays in its segment.
    assert aborted_index(log) == [AbortedTxn(7, 1, abort, abort + 1)]
    assert read_committed(log) == consume(log)


def test_a_producers_last_batch_stays_empty_even_aborted_and_its_marker_with_it(
        open_log):
    log = open_log(COMPACT)
    p7 = TransactionalProducer(log, 7)
    p7.send(b"a", b"aborted")                         # 0: the producer's last batch
    abort = p7.end(commit=False)                      # 1
    fill(log)
    first = clean(log, 0, now_ms=10_000)
    fill(log)
    clean(log, first.end_offset, now_ms=20_000)

    producer_batches = [b for b in stored_batches(log) if b.producer_id == 7]
    [empty, marker] = producer_batches
    assert (empty.base_offset, empty.records_count, empty.base_sequence) == (0, 0, 0)
    assert empty.is_transactional and not empty.is_control_batch
    # The empty batch is data of the aborted transaction: its marker and entry stay.
    assert (marker.base_offset, marker.delete_horizon_ms) == (abort, None)
    assert aborted_index(log) == [AbortedTxn(7, 0, abort, abort + 1)]
    assert all(key == b"filler" for _, key, _ in read_committed(log))


def test_a_marker_that_is_all_its_producer_wrote_of_its_epoch_outlives_its_horizon(
        open_log, log_dir: Path):
    log = open_log(COMPACT)
    p7 = TransactionalProducer(log, 7)
    p7.send(b"a", b"committed")                       # 0
    commit = p7.end(commit=True, bump_epoch=True)     # 1, at epoch 1: p7 has no batch of it
    produce(log, b"a", b"newer")                      # 2: supersedes 0
    fill(log)
    first = clean(log, 0, now_ms=10_000)
    fill(log)
    second = clean(log, first.end_offset, now_ms=20_000)
    assert markers(log) == {commit: 20_000 + DELETE_RETENTION_MS}
    third = clean(log, second.end_offset, now_ms=30_000, deletes_due_ms=second.deletes_due_ms)
    assert third is not None and third.deletes_due_ms is None  # no round is due for it
    assert markers(log) == {commit: 20_000 + DELETE_RETENTION_MS}
    assert [b.producer_id for b in stored_batches(log) if b.has_producer_id] == [7]

    # The producer state rebuilt from the log alone still knows the producer's epoch.
    log.close()
    for snapshot in log_dir.glob("*.snapshot"):
        snapshot.unlink()
    reopened = open_log(COMPACT, now_ms=30_000)
    assert reopened.producer_state.entry(7).producer_epoch == 1


def test_the_cleaner_comes_back_for_a_marker_when_its_horizon_passes(tmp_path: Path):
    log_dir = tmp_path / "data"
    log_dir.mkdir()
    now = [10_000]
    manager = LogManager([log_dir], clock=lambda: now[0])
    log = manager.get_or_create("orders", 0, COMPACT)
    p7 = TransactionalProducer(log, 7)
    p7.send(b"a", b"aborted")
    abort = p7.end(commit=False)
    p7.send(b"b", b"committed")
    p7.end(commit=True)
    fill(log)

    async def run_in_executor(function, *args):
        return function(*args)

    cleaner = LogCleaner(logs=manager.compacted_logs, log_dirs=[log_dir], clock=lambda: now[0],
                         run_in_executor=run_in_executor, use_process=False)
    try:
        assert asyncio.run(cleaner.clean_logs()) == 1  # the aborted record goes
        fill(log)
        now[0] = 20_000
        assert asyncio.run(cleaner.clean_logs()) == 1  # the abort marker gets its horizon
        assert markers(log)[abort] == 20_000 + DELETE_RETENTION_MS
        now[0] = 20_000 + DELETE_RETENTION_MS - 1
        assert asyncio.run(cleaner.clean_logs()) == 0
        now[0] = 20_000 + DELETE_RETENTION_MS
        assert asyncio.run(cleaner.clean_logs()) == 1  # nothing dirty: the horizon is due
        assert abort not in markers(log)
    finally:
        cleaner.close()
        manager.close_all()
