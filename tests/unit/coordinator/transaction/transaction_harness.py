"""A transaction coordinator on a fake clock, an in-memory ``__transaction_state``, a fake
producer id source and a fake marker writer, driven the way producers drive it (``txns``
fixture, registered by this directory's conftest)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from group_harness import MemoryStore
from kio.schema.errors import ErrorCode

from odradek.coordinator.transaction.coordinator import TransactionCoordinator
from odradek.coordinator.transaction.log_records import (
    partition_for,
    read_transaction_log_key,
    read_transaction_log_value,
    transaction_log_key,
    transaction_log_value,
)
from odradek.coordinator.transaction.metadata import TransactionState, TxnTransitMetadata
from odradek.coordinator.transaction.state_manager import TransactionStateManager
from odradek.protocol.topic_partition import TopicPartition

TXN = "payments"
T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)
U0 = TopicPartition("audit", 0)
TIMEOUT_MS = 60_000
FIRST_PRODUCER_ID = 1000
E = ErrorCode

CONFIG = {
    "transaction.max.timeout.ms": 900_000,
    "transactional.id.expiration.ms": 7 * 24 * 3_600_000,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.segment.bytes": 100 * 1024**2,
}


class MemoryTransactionLog(MemoryStore):
    """``__transaction_state`` as lists of (key, value); every partition is led here at
    ``leader_epoch``."""

    def __init__(self, partitions: int = 3) -> None:
        super().__init__(partitions)
        self.leader_epoch = 1

    def hosted_partitions(self) -> list[tuple[int, int]]:
        return [(partition, self.leader_epoch) for partition in self.logs]


class ProducerIds:
    """Fresh producer ids from FIRST_PRODUCER_ID, given at once; none while ``available`` is
    false; held until ``release()`` while ``hold`` is set."""

    def __init__(self) -> None:
        self.next_id = FIRST_PRODUCER_ID
        self.available = True
        self.hold = False
        self._held: list[Callable[[int | None], None]] = []

    def __call__(self, callback: Callable[[int | None], None]) -> None:
        if self.hold:
            self._held.append(callback)
        else:
            self._give(callback)

    def _give(self, callback: Callable[[int | None], None]) -> None:
        if not self.available:
            callback(None)
            return
        producer_id, self.next_id = self.next_id, self.next_id + 1
        callback(producer_id)

    def release(self) -> None:
        held, self._held = self._held, []
        for callback in held:
            self._give(callback)


@dataclass(frozen=True)
class Markers:
    """One call of the marker writer: a COMMIT or ABORT control batch for ``partitions``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]


class MarkerWriter:
    """Writes markers at once, unless ``hold`` is set: then they complete on ``release()``."""

    def __init__(self) -> None:
        self.written: list[Markers] = []
        self.hold = False
        self._held: list[Callable[[], None]] = []

    def write_markers(self, transactional_id, producer_id, producer_epoch, commit,
                      coordinator_epoch, partitions, on_complete) -> None:
        self.written.append(Markers(transactional_id, producer_id, producer_epoch, commit,
                                    coordinator_epoch, frozenset(partitions)))
        if self.hold:
            self._held.append(on_complete)
        else:
            on_complete()

    def release(self) -> None:
        held, self._held = self._held, []
        for on_complete in held:
            on_complete()


def transit(state: TransactionState, producer_id: int, epoch: int, *partitions: TopicPartition,
            version: int = 1, start_ms: int = 1_000, update_ms: int = 1_000,
            next_producer_id: int = -1) -> TxnTransitMetadata:
    return TxnTransitMetadata(
        producer_id=producer_id, previous_producer_id=-1, next_producer_id=next_producer_id,
        producer_epoch=epoch, last_producer_epoch=-1, txn_timeout_ms=TIMEOUT_MS, state=state,
        topic_partitions=frozenset(partitions), txn_start_timestamp_ms=start_ms,
        txn_last_update_timestamp_ms=update_ms, client_transaction_version=version)


class Transactions:
    """Drives a coordinator the way producers do, one call per request. Each call returns a
    list that receives the answer when the coordinator gives it."""

    def __init__(self, store: MemoryTransactionLog | None = None, **config) -> None:
        self.now_ms = 1_000_000
        self.store = store or MemoryTransactionLog()
        self.config = CONFIG | config
        self.producer_ids = ProducerIds()
        self.markers = MarkerWriter()
        clock = lambda: self.now_ms  # noqa: E731
        self.coordinator = TransactionCoordinator(
            TransactionStateManager(self.store, self.config.__getitem__, clock),
            self.config.__getitem__, clock, self.producer_ids, self.markers)
        self.coordinator.startup()

    def restart(self) -> Transactions:
        """A new coordinator over the same topic, elected at the next leader epoch."""
        self.store.leader_epoch += 1
        restarted = Transactions(self.store, **self.config)
        restarted.now_ms = self.now_ms
        restarted.producer_ids.next_id = self.producer_ids.next_id
        return restarted

    def partition(self, transactional_id: str = TXN) -> int:
        return partition_for(transactional_id, self.store.partition_count())

    def store_record(self, transactional_id: str, value: TxnTransitMetadata | None) -> None:
        """Appends a record to the topic directly, as an earlier coordinator had."""
        self.store.logs[self.partition(transactional_id)].append(
            (transaction_log_key(transactional_id),
             None if value is None else transaction_log_value(value)))

    def logged(self, transactional_id: str = TXN) -> list[tuple[str, int, int] | None]:
        """The records of the transactional id in the topic: (state, producer id, epoch), None
        for a tombstone."""
        records = []
        for key, value in self.store.logs[self.partition(transactional_id)]:
            if read_transaction_log_key(key) == transactional_id:
                txn = value and read_transaction_log_value(transactional_id, value)
                records.append(txn and (str(txn.state), txn.producer_id, txn.producer_epoch))
        return records

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    # -- requests --------------------------------------------------------------------------

    def send_init(self, transactional_id: str = TXN, timeout_ms: int = TIMEOUT_MS,
                  producer_id: int = -1, epoch: int = -1) -> list[tuple]:
        answers: list[tuple] = []
        self.coordinator.init_producer_id(transactional_id, timeout_ms, producer_id, epoch,
                                          lambda *answer: answers.append(answer))
        return answers

    def init(self, transactional_id: str = TXN, **options) -> tuple[int, int]:
        """InitProducerId answered at once without error: (producer id, epoch)."""
        [(error, producer_id, epoch)] = self.send_init(transactional_id, **options)
        assert error is E.none, error
        return producer_id, epoch

    def send_add(self, producer: tuple[int, int], *partitions: TopicPartition,
                 transactional_id: str = TXN, version: int = 1) -> list[dict]:
        answers: list[dict] = []
        self.coordinator.add_partitions(transactional_id, *producer, set(partitions),
                                        answers.append, client_transaction_version=version)
        return answers

    def add(self, producer: tuple[int, int], *partitions: TopicPartition, **options) -> ErrorCode:
        """AddPartitionsToTxn answered at once; the error, the same for every partition."""
        [answer] = self.send_add(producer, *partitions, **options)
        [error] = set(answer.values())
        return error

    def send_end(self, producer: tuple[int, int], commit: bool = True, *, version: int = 1,
                 transactional_id: str = TXN) -> list[tuple]:
        answers: list[tuple] = []
        self.coordinator.end_txn(transactional_id, *producer, commit, version,
                                 lambda *answer: answers.append(answer))
        return answers

    def end(self, producer: tuple[int, int], commit: bool = True, **options) -> tuple:
        """EndTxn answered at once: (error, producer id, epoch)."""
        [answer] = self.send_end(producer, commit, **options)
        return answer

    def state(self, transactional_id: str = TXN) -> str:
        [description] = self.coordinator.describe_transactions([transactional_id])
        return description.state if description.error is E.none else description.error.name

    def txn(self, transactional_id: str = TXN):
        return self.coordinator.manager.get(transactional_id)


@pytest.fixture
def txns() -> Transactions:
    return Transactions()
