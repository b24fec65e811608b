"""The waiting list of delayed operations (Kafka's ``DelayedOperationPurgatory``).

A request that cannot be answered yet — a produce waiting for its replicas, a fetch waiting
for ``min_bytes``, a DeleteRecords waiting for the followers' log start offsets — becomes a
:class:`DelayedOperation` watched under the keys (partitions) whose progress may complete
it. Whoever makes progress on a key calls :meth:`DelayedOperationPurgatory.check_and_complete`
with it; the operations watching it try again. An operation still waiting at its deadline
expires and completes with whatever it has (a produce: REQUEST_TIMED_OUT for the partitions
still missing replicas; a fetch: the data there is).

Sans-I/O: the purgatory reads time from the clock it is given and never schedules anything.
Its owner asks :meth:`DelayedOperationPurgatory.next_deadline_ms` when to call
:meth:`DelayedOperationPurgatory.expire_due` (the event loop's timer in the broker, a fake
clock in tests). Each operation completes exactly once, through :meth:`DelayedOperation.
force_complete`, whoever gets there first.

Example: a consumer fetches ``orders-0`` at offset 40 with ``min_bytes=1`` and
``max_wait_ms=500`` when the high watermark is 40. Its ``DelayedFetch`` is watched under
``orders-0`` with deadline now+500. A produce moves the high watermark to 41 and calls
``check_and_complete(orders-0)``: the fetch finds a byte available, completes, and reads.
Had nothing come, ``expire_due()`` at now+500 would have completed it with no records.

This class is not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import abc
import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

# Completed operations left in the deadline heap before it is rebuilt without them (Kafka's
# purge interval, purgatory.purge.interval.requests, defaults to 1000 as well).
PURGE_THRESHOLD = 1000


class DelayedOperation(abc.ABC):
    """One request waiting in a purgatory until :meth:`try_complete` succeeds or
    ``deadline_ms`` passes."""

    def __init__(self, deadline_ms: int) -> None:
        self.deadline_ms = deadline_ms
        self.completed = False
        self.watch_keys: tuple[Hashable, ...] = ()  # set by the purgatory that watches it

    @abc.abstractmethod
    def try_complete(self) -> bool:
        """Checks whether the operation can complete now; if so, calls
        :meth:`force_complete` and returns its result."""

    @abc.abstractmethod
    def on_complete(self) -> None:
        """Builds the answer and hands it to the waiting caller (once)."""

    def on_expiration(self) -> None:
        """Called before :meth:`on_complete` when the deadline completed the operation."""

    def force_complete(self) -> bool:
        """Completes the operation unless it already completed; True if this call did."""
        if self.completed:
            return False
        self.completed = True
        self.on_complete()
        return True


Op = TypeVar("Op", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[Op]):
    def __init__(self, name: str, clock: Callable[[], int]) -> None:
        """``clock`` gives monotonic milliseconds; deadlines are measured against it."""
        self.name = name
        self._clock = clock
        self._watchers: dict[Hashable, list[Op]] = {}
        # (deadline_ms, sequence, operation): the sequence breaks ties without comparing
        # operations. Completed operations stay until their deadline comes up or the heap
        # is rebuilt without them (see _forget_completed).
        self._timeouts: list[tuple[int, int, Op]] = []
        self._completed_in_timeouts = 0
        self._sequence = itertools.count()

    def try_complete_else_watch(self, operation: Op, keys: Iterable[Hashable]) -> bool:
        """Completes ``operation`` now if it can; otherwise watches it under every key (at
        least one) until it completes or expires. Returns True if it completed now.

        Kafka tries once more after watching, for progress another thread made in between;
        here one event loop owns the purgatory and its keys, so nothing can happen between
        the try and the watch.
        """
        if operation.try_complete():
            return True
        self.watch(operation, keys)
        return False

    def watch(self, operation: Op, keys: Iterable[Hashable]) -> None:
        """Watches ``operation``, which its caller has just found it cannot complete yet."""
        operation.watch_keys = tuple(keys)
        if not operation.watch_keys:
            raise ValueError(f"{self.name}: a delayed operation needs a key to watch")
        for key in operation.watch_keys:
            self._watchers.setdefault(key, []).append(operation)
        heapq.heappush(self._timeouts, (operation.deadline_ms, next(self._sequence), operation))

    def check_and_complete(self, key: Hashable) -> int:
        """Tries every operation watching ``key``; returns how many completed."""
        watching = self._watchers.get(key)
        if not watching:
            return 0
        completed = 0
        for operation in list(watching):
            if operation.completed:  # completed from outside: just forget it
                self._unwatch(operation)
            elif operation.try_complete():
                self._unwatch(operation)
                completed += 1
        self._forget_completed(completed)
        return completed

    def complete_all(self, key: Hashable) -> int:
        """Forces every operation watching ``key`` to complete (the partition is gone or
        changed role: they answer with what they have, each re-checking its partition)."""
        completed = 0
        for operation in list(self._watchers.get(key, ())):
            self._unwatch(operation)
            if operation.force_complete():
                completed += 1
        self._forget_completed(completed)
        return completed

    def expire_due(self) -> int:
        """Completes every operation whose deadline has passed; returns how many expired."""
        now_ms = self._clock()
        expired = 0
        while self._timeouts and self._timeouts[0][0] <= now_ms:
            _, _, operation = heapq.heappop(self._timeouts)
            if operation.completed:
                continue
            self._unwatch(operation)
            operation.on_expiration()
            if operation.force_complete():
                expired += 1
        return expired

    def next_deadline_ms(self) -> int | None:
        """When :meth:`expire_due` has work next; None when nothing waits."""
        while self._timeouts and self._timeouts[0][2].completed:
            heapq.heappop(self._timeouts)
        return self._timeouts[0][0] if self._timeouts else None

    def watched(self, key: Hashable) -> int:
        """How many operations still wait on ``key``."""
        return sum(not op.completed for op in self._watchers.get(key, ()))

    @property
    def delayed(self) -> int:
        """How many operations wait in this purgatory (Kafka's ``NumDelayedOperations``)."""
        return sum(not op.completed for _, _, op in self._timeouts)

    def _forget_completed(self, count: int) -> None:
        """Rebuilds the deadline heap once most of it is completed operations, so that
        answered requests (with their data) are not held until their deadlines."""
        self._completed_in_timeouts += count
        if self._completed_in_timeouts > max(PURGE_THRESHOLD, len(self._timeouts) // 2):
            self._timeouts = [entry for entry in self._timeouts if not entry[2].completed]
            heapq.heapify(self._timeouts)
            self._completed_in_timeouts = 0

    def _unwatch(self, operation: Op) -> None:
        for key in operation.watch_keys:
            watching = self._watchers.get(key)
            if watching is not None and operation in watching:
                watching.remove(operation)
                if not watching:
                    del self._watchers[key]
