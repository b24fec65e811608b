"""``SharePartition``: one share group's view of one topic partition (KIP-932; Kafka's
``SharePartition``), without I/O.

The members of a share group do not own partitions, they share them record by record: the
share-partition hands a fetching member the records it got from the log (*acquires* them for
it), the member acknowledges each one, and a record that was released, or whose member went
away or took too long, goes to whichever member fetches next, up to a delivery limit.

Offsets, from the start of the log::

    settled, forgotten  | SPSO   in flight   | SPEO   not fetched by the group yet

* below the share-partition start offset (SPSO) every record is settled (acknowledged or
  archived) and nothing is kept about it;
* from SPSO up to the end offset (SPEO) every record is *in flight*: it has a state, a
  delivery count and, while acquired, the member holding it and its lock's deadline;
* from SPEO on nothing is known yet; the next fetch acquires what it finds there.

A record's states, with Kafka's ids (:class:`RecordState`)::

    AVAILABLE --acquire--> ACQUIRED --ACCEPT--> ACKNOWLEDGED
        ^                   |    |
        +-- RELEASE, lock --+    +--REJECT, GAP--> ARCHIVED
            expired, member gone

Each acquisition is a delivery and raises the delivery count. A record delivered
``delivery_count_limit`` times is ARCHIVED rather than made AVAILABLE again. ACKNOWLEDGED and
ARCHIVED are final: once the records at SPSO are final, SPSO moves past them and they are
dropped. Only new records count against ``max_in_flight_records`` (SPEO - SPSO); records
already in flight are always delivered again.

In-flight records are kept as *runs*: consecutive offsets sharing state, delivery count,
holder and deadline. A fetch of 100,000 records makes one run; acknowledging part of it splits
it at the part's edges (an acknowledgement with a type per offset, where the types differ,
into runs of one offset); neighbours that become alike merge again. Memory therefore follows
the number of distinct stretches in flight, not the number of records.

:meth:`SharePartition.state` is what the share coordinator keeps (``state_records``): SPSO,
and the in-flight runs except AVAILABLE ones never delivered, an ACQUIRED run written as
AVAILABLE. An acquisition does not outlive this share-partition: after a failover the record
is delivered again, and the delivery it was in counts. A record found AVAILABLE though already
delivered ``delivery_count_limit`` times (acquired when the state was written, or the limit
was lowered since) is archived when a fetch reaches it.

Offsets a fetch skipped over hold no record (compacted away, or below the log start): when the
fetched records start past SPEO, the offsets between are archived, or passed over when nothing
is in flight. Acknowledging offsets below SPSO does nothing and is no error, as in Kafka: they
are settled already (their lock expired and another member settled them, or retention deleted
them).

The caller brings time (``clock``, ms), the fetched offsets, the group's membership and the
writing of the state. Not thread-safe: the broker's event loop owns every share-partition.
"""

from __future__ import annotations

import enum
import itertools
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from operator import attrgetter

from kio.schema.errors import ErrorCode

from odradek.coordinator.share.state_records import (
    PERSISTED_STATES,
    RecordState,
    ShareState,
    StateBatch,
    combine_batches,
)

DEFAULT_LOCK_DURATION_MS = 30_000  # group.share.record.lock.duration.ms
DEFAULT_DELIVERY_COUNT_LIMIT = 5  # group.share.delivery.count.limit
DEFAULT_MAX_IN_FLIGHT_RECORDS = 2_000  # group.share.partition.max.record.locks

Clock = Callable[[], int]

_SETTLED = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})


class AcknowledgeType(enum.IntEnum):
    """How a member acknowledges a record, by the ids of ShareFetch and ShareAcknowledge."""

    GAP = 0  # no record at the offset: compacted away, or a transaction marker
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


_ACK_TYPES = frozenset(AcknowledgeType)
_FINAL_STATES = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
}


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """Offsets acquired for a member, as ShareFetch's ``AcquiredRecords`` lists them."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """Offsets ``first_offset..last_offset`` and their :class:`AcknowledgeType`: one for them
    all, or one per offset."""

    first_offset: int
    last_offset: int
    ack_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class InFlightRecords:
    """A stretch of in-flight records alike, as a describe shows it."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None
    lock_deadline_ms: int | None


@dataclass(slots=True)
class _Run:
    """In-flight offsets ``first..last`` alike: one state, one delivery count and, while
    ACQUIRED, one holder and lock deadline."""

    first: int
    last: int
    state: RecordState
    delivery_count: int
    member_id: str | None = None  # while ACQUIRED
    deadline_ms: int | None = None  # while ACQUIRED

    def alike(self, other: _Run) -> bool:
        return ((self.state, self.delivery_count, self.member_id, self.deadline_ms)
                == (other.state, other.delivery_count, other.member_id, other.deadline_ms))

    def acquire(self, member_id: str, deadline_ms: int) -> None:
        self.state = RecordState.ACQUIRED
        self.delivery_count += 1
        self.member_id = member_id
        self.deadline_ms = deadline_ms

    def leave(self, state: RecordState) -> None:
        """Leaves ACQUIRED (or AVAILABLE, when archived) for ``state``."""
        self.state = state
        self.member_id = self.deadline_ms = None


class SharePartition:
    """One share group's in-flight records of one topic partition (the module's docstring).

    The settings are Kafka's group configs, which can change while the group runs; a change
    applies from the next acquisition or release on.
    """

    def __init__(self, clock: Clock, *, lock_duration_ms: int = DEFAULT_LOCK_DURATION_MS,
                 delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT,
                 max_in_flight_records: int = DEFAULT_MAX_IN_FLIGHT_RECORDS) -> None:
        if min(lock_duration_ms, delivery_count_limit, max_in_flight_records) < 1:
            raise ValueError("share-partition settings must be positive")
        self._clock = clock
        self.lock_duration_ms = lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight_records = max_in_flight_records
        self.state_epoch = 0
        self._start_offset = 0
        self._end_offset = 0
        # Contiguous from SPSO to SPEO - 1, in offset order; the first one is not settled.
        self._runs: list[_Run] = []

    @classmethod
    def new(cls, start_offset: int, clock: Clock, **settings: int) -> SharePartition:
        """A share-partition the group never consumed: nothing in flight, the first fetch at
        ``start_offset`` (the caller's choice, by ``share.auto.offset.reset``)."""
        partition = cls(clock, **settings)
        partition._start_offset = partition._end_offset = start_offset
        return partition

    @classmethod
    def from_state(cls, state: ShareState, clock: Clock, **settings: int) -> SharePartition:
        """A share-partition as :meth:`state` left it: what was ACQUIRED is AVAILABLE."""
        partition = cls(clock, **settings)
        partition._restore(state)
        return partition

    def _restore(self, state: ShareState) -> None:
        offset = state.start_offset
        runs: list[_Run] = []
        for batch in state.batches:
            if (batch.first_offset < offset or batch.last_offset < batch.first_offset
                    or batch.delivery_state not in PERSISTED_STATES or batch.delivery_count < 0):
                raise ValueError(f"{batch} in a state continuing at offset {offset}")
            if batch.first_offset > offset:
                runs.append(_Run(offset, batch.first_offset - 1, RecordState.AVAILABLE, 0))
            runs.append(_Run(batch.first_offset, batch.last_offset,
                             RecordState(batch.delivery_state), batch.delivery_count))
            offset = batch.last_offset + 1
        self.state_epoch = state.state_epoch
        self._start_offset = state.start_offset
        self._end_offset = offset
        self._runs = runs
        self._coalesce(0, len(runs))
        self._advance_start()

    # -- what it holds ---------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        """SPSO: every record below it is settled."""
        return self._start_offset

    @property
    def end_offset(self) -> int:
        """SPEO: the first offset the group has not fetched."""
        return self._end_offset

    def in_flight_count(self) -> int:
        return self._end_offset - self._start_offset

    def in_flight(self) -> tuple[InFlightRecords, ...]:
        """The in-flight records from SPSO to SPEO, stretch by stretch."""
        return tuple(InFlightRecords(run.first, run.last, run.state, run.delivery_count,
                                     run.member_id, run.deadline_ms) for run in self._runs)

    def count_by_state(self) -> dict[RecordState, int]:
        """How many in-flight records are in each state."""
        counts = dict.fromkeys(RecordState, 0)
        for run in self._runs:
            counts[run.state] += run.last - run.first + 1
        return counts

    def next_fetch_offset(self) -> int:
        """Where the next fetch starts: at the first AVAILABLE record, else at SPEO."""
        return next((run.first for run in self._runs if run.state is RecordState.AVAILABLE),
                    self._end_offset)

    def next_lock_deadline(self) -> int | None:
        """When :meth:`expire_locks` next has work, if anything is ACQUIRED."""
        return min((run.deadline_ms for run in self._runs
                    if run.state is RecordState.ACQUIRED and run.deadline_ms is not None),
                   default=None)

    def state(self) -> ShareState:
        """The durable state: ACQUIRED written as AVAILABLE, never-delivered AVAILABLE records
        left out, alike neighbours merged."""
        batches = (StateBatch(run.first, run.last, _durable(run.state), run.delivery_count)
                   for run in self._runs
                   if run.state is not RecordState.AVAILABLE or run.delivery_count)
        return ShareState(self.state_epoch, self._start_offset,
                          combine_batches(batches, self._start_offset))

    # -- acquiring -------------------------------------------------------------------------

    def acquire(self, member_id: str, first_offset: int, last_offset: int,
                max_records: int) -> list[AcquiredRecords]:
        """Acquires for ``member_id`` the records it can have among the fetched offsets
        ``first_offset..last_offset`` (a fetch from :meth:`next_fetch_offset`), at most
        ``max_records``: AVAILABLE ones in flight first, in offset order, then new ones from
        SPEO on while in-flight records stay within ``max_in_flight_records``. Each is locked
        for ``lock_duration_ms``."""
        acquired: list[AcquiredRecords] = []
        deadline_ms = self._clock() + self.lock_duration_ms
        budget = max_records
        offset = max(first_offset, self._start_offset)
        while budget > 0 and offset <= min(last_offset, self._end_offset - 1):
            run = self._runs[self._index(offset)]
            last = min(run.last, last_offset)
            if run.state is RecordState.AVAILABLE:
                if run.delivery_count >= self.delivery_count_limit:
                    self._change(offset, last, partial(_Run.leave, state=RecordState.ARCHIVED))
                else:
                    last = min(last, offset + budget - 1)
                    _add(acquired, AcquiredRecords(offset, last, run.delivery_count + 1))
                    self._change(offset, last, partial(_Run.acquire, member_id=member_id,
                                                       deadline_ms=deadline_ms))
                    budget -= last - offset + 1
            offset = last + 1
        self._advance_start()
        if budget > 0 and last_offset >= self._end_offset:
            self._acquire_new(member_id, max(first_offset, self._end_offset), last_offset,
                              budget, deadline_ms, acquired)
        return acquired

    def _acquire_new(self, member_id: str, first: int, last: int, budget: int,
                     deadline_ms: int, acquired: list[AcquiredRecords]) -> None:
        """Acquires records from ``first`` (SPEO or past it) on; offsets from SPEO to
        ``first`` hold no record."""
        if first > self._end_offset and not self._runs:
            self._start_offset = self._end_offset = first
        count = min(budget, last - first + 1,
                    self.max_in_flight_records - (first - self._start_offset))
        if count < 1:
            return
        if first > self._end_offset:
            self._append_run(_Run(self._end_offset, first - 1, RecordState.ARCHIVED, 0))
        self._append_run(_Run(first, first + count - 1, RecordState.ACQUIRED, 1,
                              member_id, deadline_ms))
        _add(acquired, AcquiredRecords(first, first + count - 1, 1))

    # -- settling --------------------------------------------------------------------------

    def acknowledge(self, member_id: str,
                    batches: Sequence[AcknowledgementBatch]) -> ErrorCode:
        """Settles or releases records ``member_id`` holds, all of them or none:
        INVALID_REQUEST for batches out of order, overlapping, or with wrong types;
        INVALID_RECORD_STATE if an offset from SPSO on is not ACQUIRED by the member."""
        if not _well_formed(batches):
            return ErrorCode.invalid_request
        if not all(self._holds(member_id, b.first_offset, b.last_offset) for b in batches):
            return ErrorCode.invalid_record_state
        for batch in batches:
            for first, last, ack_type in _stretches(batch):
                if last >= self._start_offset:
                    self._change(max(first, self._start_offset), last,
                                 partial(self._acknowledged, AcknowledgeType(ack_type)))
        self._advance_start()
        return ErrorCode.none

    def _holds(self, member_id: str, first: int, last: int) -> bool:
        """Whether ``member_id`` holds every record of ``first..last`` from SPSO on."""
        offset = max(first, self._start_offset)
        if offset <= last and last >= self._end_offset:
            return False
        while offset <= last:
            run = self._runs[self._index(offset)]
            if run.state is not RecordState.ACQUIRED or run.member_id != member_id:
                return False
            offset = run.last + 1
        return True

    def _acknowledged(self, ack_type: AcknowledgeType, run: _Run) -> None:
        if ack_type is AcknowledgeType.RELEASE:
            run.leave(self._released_state(run))
        else:
            run.leave(_FINAL_STATES[ack_type])

    def release_member(self, member_id: str) -> bool:
        """The member left, or its share session ended: what it holds goes back (Kafka's
        ``releaseAcquiredRecords``). Whether anything changed."""
        return self._release_where(lambda run: run.member_id == member_id)

    def expire_locks(self) -> bool:
        """Records whose lock's deadline has come go back. Whether anything changed."""
        now = self._clock()
        return self._release_where(lambda run: run.deadline_ms is not None
                                   and run.deadline_ms <= now)

    def _release_where(self, matches: Callable[[_Run], bool]) -> bool:
        released = [run for run in self._runs
                    if run.state is RecordState.ACQUIRED and matches(run)]
        for run in released:
            run.leave(self._released_state(run))
        if released:
            self._coalesce(0, len(self._runs))
            self._advance_start()
        return bool(released)

    def _released_state(self, run: _Run) -> RecordState:
        """Where a released record goes: to be delivered again, or archived at the limit."""
        if run.delivery_count >= self.delivery_count_limit:
            return RecordState.ARCHIVED
        return RecordState.AVAILABLE

    # -- moving the start ------------------------------------------------------------------

    def update_log_start_offset(self, log_start: int) -> None:
        """Records below ``log_start`` are gone from the log (retention, DeleteRecords):
        SPSO moves up to it and what was in flight below is dropped."""
        if log_start <= self._start_offset:
            return
        self._end_offset = max(self._end_offset, log_start)
        del self._runs[:self._split(log_start)]
        self._advance_start()

    def reset_start_offset(self, offset: int) -> None:
        """AlterShareGroupOffsets: the share-partition starts over at ``offset``, in a new
        state epoch; the caller writes it as a snapshot, as an update would be combined with
        the old batches. Only while no member holds a record (the group is empty)."""
        if any(run.state is RecordState.ACQUIRED for run in self._runs):
            raise RuntimeError("cannot reset a share-partition whose records are acquired")
        self._runs.clear()
        self._start_offset = self._end_offset = offset
        self.state_epoch += 1

    # -- runs ------------------------------------------------------------------------------

    def _index(self, offset: int) -> int:
        """The index of the run holding in-flight ``offset``."""
        return bisect_right(self._runs, offset, key=attrgetter("first")) - 1

    def _split(self, offset: int) -> int:
        """The index of the run starting at ``offset`` (splitting the one holding it), or the
        number of runs if ``offset`` is SPEO or past it."""
        if offset >= self._end_offset:
            return len(self._runs)
        index = self._index(offset)
        run = self._runs[index]
        if run.first == offset:
            return index
        self._runs.insert(index + 1, replace(run, first=offset))
        run.last = offset - 1
        return index + 1

    def _change(self, first: int, last: int, change: Callable[[_Run], None]) -> None:
        """Applies ``change`` to in-flight offsets ``first..last``."""
        start = self._split(first)
        stop = self._split(last + 1)
        for run in self._runs[start:stop]:
            change(run)
        self._coalesce(start, stop)

    def _coalesce(self, start: int, stop: int) -> None:
        """Merges alike neighbours among runs ``start..stop - 1`` and the runs around them."""
        start, stop = max(start - 1, 0), min(stop + 1, len(self._runs))
        merged: list[_Run] = []
        for run in self._runs[start:stop]:
            if merged and merged[-1].alike(run):
                merged[-1].last = run.last
            else:
                merged.append(run)
        self._runs[start:stop] = merged

    def _append_run(self, run: _Run) -> None:
        self._runs.append(run)
        self._end_offset = run.last + 1
        self._coalesce(len(self._runs) - 1, len(self._runs))

    def _advance_start(self) -> None:
        """Drops the settled runs at the start; SPSO follows."""
        settled = next((i for i, run in enumerate(self._runs) if run.state not in _SETTLED),
                       len(self._runs))
        del self._runs[:settled]
        self._start_offset = self._runs[0].first if self._runs else self._end_offset


def _durable(state: RecordState) -> RecordState:
    return RecordState.AVAILABLE if state is RecordState.ACQUIRED else state


def _add(acquired: list[AcquiredRecords], records: AcquiredRecords) -> None:
    """Appends ``records``, merged into the last ones if they continue them alike."""
    if acquired:
        last = acquired[-1]
        if (last.last_offset + 1 == records.first_offset
                and last.delivery_count == records.delivery_count):
            acquired[-1] = replace(last, last_offset=records.last_offset)
            return
    acquired.append(records)


def _well_formed(batches: Sequence[AcknowledgementBatch]) -> bool:
    """Kafka's checks of ShareAcknowledge batches; here batches must not overlap at all."""
    previous_last: int | None = None
    for batch in batches:
        size = batch.last_offset - batch.first_offset + 1
        if (size < 1 or len(batch.ack_types) not in (1, size)
                or any(t not in _ACK_TYPES for t in batch.ack_types)
                or (previous_last is not None and batch.first_offset <= previous_last)):
            return False
        previous_last = batch.last_offset
    return True


def _stretches(batch: AcknowledgementBatch) -> Iterator[tuple[int, int, int]]:
    """``(first, last, ack type)`` for each stretch of the batch's offsets alike."""
    if len(batch.ack_types) == 1:
        yield batch.first_offset, batch.last_offset, batch.ack_types[0]
        return
    offset = batch.first_offset
    for ack_type, same in itertools.groupby(batch.ack_types):
        size = sum(1 for _ in same)
        yield offset, offset + size - 1, ack_type
        offset += size
