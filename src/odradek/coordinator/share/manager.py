"""``SharePartitionManager``: ShareFetch and ShareAcknowledge on the leader of the partitions
they name (Kafka's ``SharePartitionManager`` and ``ShareSessionCache``).

A share consumer fetches within a **share session**, one per (group, member): epoch 0 opens
it with the partitions the request names, each later fetch brings the next epoch and adds or
forgets partitions, epoch -1 closes it and releases what the member still holds. A fetch of
a partition:

1. applies the acknowledgements it carries (ACCEPT, RELEASE, REJECT, GAP; see
   ``partition``) — the answer waits until their new state is durable;
2. reads the log from the share-partition's next fetch offset (the first record available
   again, else the first never delivered) and **acquires** what it read for the member: each
   record goes to one member at a time, locked for ``group.share.record.lock.duration.ms``
   and counted as one more delivery;
3. answers with the ranges acquired and the batches that hold them (Kafka's
   ``maybeSliceFetchRecords``): the client hands out only those.

A read takes about twice the bytes the records it may acquire took last time (1 KiB each at
first), not the whole backlog up to the fetch's max bytes: a share-partition hands out at
most ``max_records`` at a time, however much is written.

A fetch that acquires nothing waits up to its ``max_wait``: for new records (the replica
manager's long poll) or for records to become available again (an acknowledgement, a
release, a lock that ended), whichever comes first.

A share-partition starts from its durable state, read through the ``SharePersister`` (the
share coordinator); one that has none starts at the log end (``share.auto.offset.reset`` =
latest, the default) or at the log start (earliest), and that start is written before any
record is handed out. Every change that must outlive the broker — acknowledgements,
releases, delivery counts of records whose lock ended — is written as the share-partition's
new state; writes of one share-partition are made one at a time, the latest state each time.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from odradek.coordinator.share.partition import (
    AcknowledgementBatch,
    AcquiredRecords,
    SharePartition,
)
from odradek.coordinator.share.state_records import ShareState, ShareStateKey
from odradek.protocol.records import RecordBatch, iter_batches
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.delayed_fetch import (
    CONSUMER_REPLICA_ID,
    FetchParams,
    IsolationLevel,
    LogReadResult,
    PartitionFetchInfo,
)
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.completion import Completion
from odradek.server.config_defs import GroupConfigLookup, broker_group_config

log = logging.getLogger(__name__)

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
# How long a fetch that found only records it cannot take waits before looking again, when
# nothing wakes it first.
RETRY_WAIT_MS = 100
# A share-partition's first read assumes records of this many bytes, and no read asks for
# less than MIN_READ_BYTES.
FIRST_BYTES_PER_RECORD = 1024
MIN_READ_BYTES = 64 * 1024


class SharePersister(Protocol):
    """Where share-partition states are kept (the share coordinator)."""

    def read(self, key: ShareStateKey) -> Awaitable[tuple[ErrorCode, ShareState | None]]: ...

    def write(self, key: ShareStateKey, state: ShareState, leader_epoch: int
              ) -> Awaitable[ErrorCode]: ...


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One partition of a ShareFetch's answer."""

    error: ErrorCode = ErrorCode.none
    acknowledge_error: ErrorCode = ErrorCode.none
    records: bytes = b""
    acquired: tuple[AcquiredRecords, ...] = ()
    leader_epoch: int = -1


@dataclass(eq=False, slots=True)
class _Entry:
    """A share-partition and its writes: ``version`` counts durable changes, ``written`` the
    last one written."""

    key: ShareStateKey
    topic_partition: TopicPartition
    partition: SharePartition
    version: int = 0
    written: int = 0
    writing: bool = False
    # The average size of the records last read, in their batches: what the next read takes.
    bytes_per_record: int = FIRST_BYTES_PER_RECORD
    waiters: list[tuple[int, asyncio.Future[ErrorCode]]] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class ShareSession:
    epoch: int
    partitions: dict[TopicPartition, uuid.UUID]


class SharePartitionManager:
    def __init__(self, replica_manager: ReplicaManager, persister: SharePersister,
                 config: Callable[[str], Any], clock: Callable[[], int], *,
                 group_config: GroupConfigLookup | None = None) -> None:
        """``config`` reads a broker config, ``group_config`` a group's own config: its
        lock duration, where it starts reading, and its isolation level."""
        self._replica_manager = replica_manager
        self.persister = persister
        self._config = config
        self._group_config = group_config or broker_group_config(config)
        self._clock = clock
        self._entries: dict[tuple[str, TopicPartition], _Entry] = {}
        self._loading: dict[tuple[str, TopicPartition], asyncio.Future[_Entry | ErrorCode]] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._changed = asyncio.Event()

    # -- sessions ------------------------------------------------------------------------

    def session(self, group_id: str, member_id: str, epoch: int,
                added: Mapping[TopicPartition, uuid.UUID], forgotten: set[TopicPartition]
                ) -> tuple[ErrorCode, ShareSession | None]:
        """The member's session after this request (Kafka's ``ShareSessionCache``)."""
        key = (group_id, member_id)
        session = self.sessions.get(key)
        if epoch == INITIAL_EPOCH:
            if session is not None:
                self.release_member(group_id, member_id)
            session = self.sessions[key] = ShareSession(1, dict(added))
            return ErrorCode.none, session
        if session is None:
            return ErrorCode.share_session_not_found, None
        if epoch == FINAL_EPOCH:
            del self.sessions[key]
            return ErrorCode.none, session
        if epoch != session.epoch:
            return ErrorCode.invalid_share_session_epoch, None
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        for tp in forgotten:
            session.partitions.pop(tp, None)
        session.partitions.update(added)
        return ErrorCode.none, session

    # -- ShareFetch and ShareAcknowledge -------------------------------------------------

    async def acknowledge(self, group_id: str, member_id: str,
                          acknowledgements: Mapping[TopicPartition,
                                                    tuple[uuid.UUID, list[AcknowledgementBatch]]]
                          ) -> dict[TopicPartition, ErrorCode]:
        """Applies the acknowledgements and waits until they are durable; each partition's
        error."""
        errors: dict[TopicPartition, ErrorCode] = {}
        pending: dict[TopicPartition, Awaitable[ErrorCode]] = {}
        for tp, (topic_id, batches) in acknowledgements.items():
            entry = self._entries.get((group_id, tp))
            if entry is None:
                errors[tp] = ErrorCode.invalid_record_state  # nothing was delivered from it
                continue
            error = entry.partition.acknowledge(member_id, batches)
            if error is not ErrorCode.none:
                errors[tp] = error
                continue
            pending[tp] = self._changed_durably(entry)
        for tp, written in pending.items():
            errors[tp] = await written
        if pending:
            self._wake()
        return errors

    async def fetch(self, group_id: str, member_id: str,
                    partitions: Mapping[TopicPartition, uuid.UUID], *, max_wait_ms: int,
                    max_bytes: int, max_records: int) -> dict[TopicPartition, PartitionFetch]:
        """Reads and acquires records of ``partitions`` for the member, waiting up to
        ``max_wait_ms`` for some."""
        entries: dict[TopicPartition, _Entry] = {}
        answers: dict[TopicPartition, PartitionFetch] = {}
        for tp, topic_id in partitions.items():
            loaded = await self._entry(group_id, tp, topic_id)
            if isinstance(loaded, ErrorCode):
                answers[tp] = PartitionFetch(error=loaded)
            else:
                entries[tp] = loaded
        deadline = self._clock() + max_wait_ms
        committed_only = self._group_config(group_id, "share.isolation.level") == "read_committed"
        while True:
            # A change of the group's lock duration applies to the records acquired next.
            lock_duration_ms = self._group_config(group_id, "share.record.lock.duration.ms")
            for entry in entries.values():
                entry.partition.lock_duration_ms = lock_duration_ms
            results = await self._read(entries, max(0, deadline - self._clock()), max_bytes,
                                       max_records, committed_only)
            acquired = self._acquire(member_id, entries, results, max_records)
            if acquired or self._clock() >= deadline:
                break
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(),
                                       min(RETRY_WAIT_MS, deadline - self._clock()) / 1000)
            except TimeoutError:
                pass
        for tp in entries:
            result = results.get(tp, LogReadResult())
            got, records = acquired.get(tp, ((), b""))
            answers[tp] = PartitionFetch(error=result.error, records=records, acquired=got,
                                         leader_epoch=self._leader_epoch(tp))
        return answers

    def _acquire(self, member_id: str, entries: Mapping[TopicPartition, _Entry],
                 results: Mapping[TopicPartition, LogReadResult], max_records: int
                 ) -> dict[TopicPartition, tuple[tuple[AcquiredRecords, ...], bytes]]:
        """What each partition acquired for the member, and the batches that hold it."""
        acquired: dict[TopicPartition, tuple[tuple[AcquiredRecords, ...], bytes]] = {}
        budget = max_records
        for tp, entry in entries.items():
            result = results.get(tp)
            if result is None or result.error is not ErrorCode.none or not result.records \
                    or budget <= 0:
                continue
            batches = list(iter_batches(result.records))
            if not batches:
                continue
            entry.bytes_per_record = max(1, sum(b.size_in_bytes for b in batches) // max(
                1, batches[-1].next_offset - batches[0].base_offset))
            share = entry.partition
            share.update_log_start_offset(result.log_start_offset)
            first = share.next_fetch_offset()
            last = batches[-1].next_offset - 1
            if last < first:
                continue
            got = share.acquire(member_id, first, last, budget)
            if got:
                acquired[tp] = (tuple(got), _holding(result.records, batches, got))
                budget -= sum(a.last_offset - a.first_offset + 1 for a in got)
        return acquired

    async def _read(self, entries: Mapping[TopicPartition, _Entry], max_wait_ms: int,
                    max_bytes: int, max_records: int, committed_only: bool
                    ) -> dict[TopicPartition, LogReadResult]:
        if not entries:
            return {}
        params = FetchParams(
            replica_id=CONSUMER_REPLICA_ID, max_wait_ms=max_wait_ms, min_bytes=1,
            max_bytes=max_bytes, isolation_level=IsolationLevel(int(committed_only)),
            partitions={tp: PartitionFetchInfo(
                fetch_offset=entry.partition.next_fetch_offset(),
                partition_max_bytes=min(max_bytes, max(
                    MIN_READ_BYTES, 2 * max_records * entry.bytes_per_record)))
                for tp, entry in entries.items()})
        completion: Completion[dict[TopicPartition, LogReadResult]] = Completion()
        self._replica_manager.fetch_messages(params, completion)
        return await completion.wait()

    def _leader_epoch(self, tp: TopicPartition) -> int:
        partition = self._replica_manager.get_partition(tp)
        return partition.leader_epoch if partition is not None else -1

    # -- share-partitions and their state -----------------------------------------------

    async def _entry(self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID
                     ) -> _Entry | ErrorCode:
        entry = self._entries.get((group_id, tp))
        if entry is not None:
            return entry
        partition = self._replica_manager.get_partition(tp)
        if partition is None or not partition.is_leader:
            return ErrorCode.not_leader_or_follower
        loading = self._loading.get((group_id, tp))
        if loading is None:
            loading = self._loading[(group_id, tp)] = asyncio.ensure_future(
                self._load(group_id, tp, topic_id))
            loading.add_done_callback(lambda _: self._loading.pop((group_id, tp), None))
        return await asyncio.shield(loading)

    async def _load(self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID
                    ) -> _Entry | ErrorCode:
        key = ShareStateKey(group_id, topic_id, tp.partition)
        error, state = await self.persister.read(key)
        if error is not ErrorCode.none:
            return error
        partition = self._replica_manager.get_partition(tp)
        if partition is None or not partition.is_leader:
            return ErrorCode.not_leader_or_follower
        settings = self._settings(group_id)
        if state is not None:
            share = SharePartition.from_state(state, self._clock, **settings)
            share.update_log_start_offset(partition.log_start_offset)
        else:
            reset = self._group_config(group_id, "share.auto.offset.reset")
            start = (partition.log_start_offset if reset == "earliest"
                     else partition.high_watermark)
            share = SharePartition.new(start, self._clock, **settings)
        entry = _Entry(key, tp, share)
        if state is None:  # the start is durable before any record is handed out
            error = await self.persister.write(key, share.state(), partition.leader_epoch)
            if error is not ErrorCode.none:
                return error
        self._entries[(group_id, tp)] = entry
        log.info("share group %s: %s starts at offset %d", group_id, tp, share.start_offset)
        return entry

    def _settings(self, group_id: str) -> dict[str, int]:
        return {"lock_duration_ms": self._group_config(group_id, "share.record.lock.duration.ms"),
                "delivery_count_limit": self._config("group.share.delivery.count.limit"),
                "max_in_flight_records": self._config("group.share.partition.max.record.locks")}

    def _changed_durably(self, entry: _Entry) -> asyncio.Future[ErrorCode]:
        """Marks a change to write; the future ends once it is written (or failed)."""
        entry.version += 1
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        entry.waiters.append((entry.version, future))
        if not entry.writing:
            asyncio.ensure_future(self._write(entry))
        return future

    async def _write(self, entry: _Entry) -> None:
        entry.writing = True
        try:
            while entry.written < entry.version:
                version = entry.version
                partition = self._replica_manager.get_partition(entry.topic_partition)
                error = await self.persister.write(
                    entry.key, entry.partition.state(),
                    partition.leader_epoch if partition is not None else -1)
                if error is ErrorCode.none:
                    entry.written = version
                done = [(v, f) for v, f in entry.waiters if v <= version]
                entry.waiters = [(v, f) for v, f in entry.waiters if v > version]
                for _, future in done:
                    if not future.done():
                        future.set_result(error)
                if error is not ErrorCode.none:
                    log.warning("share-partition %s: writing its state failed: %s",
                                entry.key, error.name)
                    break
        finally:
            entry.writing = False

    # -- members and timers --------------------------------------------------------------

    def release_member(self, group_id: str, member_id: str) -> None:
        """The member is gone: the records it holds are available to the others now."""
        for (group, _), entry in self._entries.items():
            if group == group_id and entry.partition.release_member(member_id):
                self._changed_durably(entry)
        self._wake()

    def close_session(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)
        self.release_member(group_id, member_id)

    def tick(self) -> None:
        """Records whose acquisition lock ended are available again."""
        expired = False
        for entry in self._entries.values():
            if entry.partition.expire_locks():
                self._changed_durably(entry)
                expired = True
        if expired:
            self._wake()

    def _wake(self) -> None:
        self._changed.set()

    def on_resigned(self, tp: TopicPartition) -> None:
        """This broker no longer leads ``tp``: its share-partitions go (the new leader reads
        their state)."""
        for key in [k for k in self._entries if k[1] == tp]:
            del self._entries[key]

    def share_partition(self, group_id: str, tp: TopicPartition) -> SharePartition | None:
        entry = self._entries.get((group_id, tp))
        return None if entry is None else entry.partition

    def forget_group(self, group_id: str) -> None:
        """The group's state was deleted or reset: its share-partitions load afresh."""
        for key in [k for k in self._entries if k[0] == group_id]:
            del self._entries[key]


def _holding(records: bytes, batches: Sequence[RecordBatch],
             acquired: Sequence[AcquiredRecords]) -> bytes:
    """The run of ``batches`` (read from ``records``) from the first that holds an acquired
    record to the last that does."""
    first = min(a.first_offset for a in acquired)
    last = max(a.last_offset for a in acquired)
    holding = [b for b in batches if b.next_offset > first and b.base_offset <= last]
    return records[holding[0].position:holding[-1].position + holding[-1].size_in_bytes]
