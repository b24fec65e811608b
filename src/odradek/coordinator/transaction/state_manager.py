"""``TransactionStateManager``: the transactional ids this coordinator owns, kept in memory and
in ``__transaction_state`` (Kafka's class of the same name and duty).

Ownership. A transactional id is coordinated here while the partition of
``__transaction_state`` that holds it is loaded. The partition is loaded when this broker
becomes its leader, with its leader epoch as the *coordinator epoch*: every transaction
marker carries it, so that a partition leader can tell the markers of a coordinator that has
since lost the partition. Any other transactional id gets NOT_COORDINATOR and the client looks
for its coordinator again. Loading is synchronous (the store's ``read`` hands over every
record), so no request ever sees a partition half loaded; COORDINATOR_LOAD_IN_PROGRESS comes
from the producer id source instead (see ``coordinator``).

Loading. The partition is replayed from its start: the last record of each transactional id
wins and a tombstone deletes it. Replaying leaves the transactions a previous coordinator did
not finish: PREPARE_COMMIT and PREPARE_ABORT, whose outcome is decided and whose markers must
be written again, and PREPARE_EPOCH_FENCE (Kafka never writes it; found, it is taken as the
ongoing transaction it was fencing, to be aborted). :meth:`load_partition` returns them.

Writes. A prepared :class:`~odradek.coordinator.transaction.metadata.TxnTransitMetadata` is
appended as one record through an injected :class:`TransactionLogStore`, with acks=all. Its
callback comes at once or later; memory changes only there (Kafka's
``appendTransactionToLog``), and only if the partition is still loaded at the same coordinator
epoch with the same metadata: otherwise leadership moved meanwhile, the callback gets
NOT_COORDINATOR, and the new coordinator will have replayed the record. A failed append clears
the pending state, unless the caller retries it.

Example: "payments" hashes to partition 13 of 50. Partition 13 is loaded at coordinator epoch
3; an EndTxn's PREPARE_COMMIT is appended; before it is replicated the partition moves to
another broker and comes back at epoch 5, reloaded. The append then succeeds, but the metadata
it was prepared on is gone: the producer gets NOT_COORDINATOR, and the reload at epoch 5 has
found the PREPARE_COMMIT and written its markers.

Expiration. A transactional id idle for ``transactional.id.expiration.ms`` between
transactions gets a tombstone, then is forgotten (Kafka's ``removeExpiredTransactionalIds``).

Not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from odradek.coordinator.group.metadata_manager import AppendCallback, KeyValue, group_store_error
from odradek.coordinator.transaction.log_records import (
    TRANSACTION_STATE_TOPIC,
    TransactionLogRecordError,
    partition_for,
    read_transaction_log_key,
    read_transaction_log_value,
    transaction_log_key,
    transaction_log_value,
)
from odradek.coordinator.transaction.metadata import (
    EXPIRATION_ALLOWED,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)

log = logging.getLogger(__name__)

_S = TransactionState


class TransactionLogStore(Protocol):
    """The partitions of ``__transaction_state`` as the coordinator needs them."""

    def partition_count(self) -> int | None:
        """The topic's partition count; None while the topic does not exist."""

    def hosted_partitions(self) -> Iterable[tuple[int, int]]:
        """(partition, leader epoch) of each partition this broker leads."""

    def read(self, partition: int) -> Iterable[KeyValue]:
        """Every record of the partition, in offset order."""

    def append(self, partition: int, records: Sequence[KeyValue],
               callback: AppendCallback) -> None:
        """Appends the records as one batch with acks=-1, and calls ``callback`` with the
        outcome, during the call or later; the callbacks of one partition's appends in the
        order of the appends."""


@dataclass(frozen=True, slots=True)
class TransactionalIdAndProducerIdEpoch:
    """A transaction found timed out, as it was then."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(slots=True)
class _LoadedPartition:
    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata]


class TransactionStateManager:
    def __init__(self, store: TransactionLogStore, config: Callable[[str], Any],
                 clock: Callable[[], int]) -> None:
        self._store = store
        self._config = config
        self._clock = clock
        self._partition_count: int | None = None
        self._partitions: dict[int, _LoadedPartition] = {}

    # -- ownership -------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int | None:
        if self._partition_count is None:
            return None
        return partition_for(transactional_id, self._partition_count)

    def _loaded(self, transactional_id: str) -> _LoadedPartition | None:
        partition = self.partition_for(transactional_id)
        return self._partitions.get(partition) if partition is not None else None

    def ownership(self, transactional_id: str) -> ErrorCode:
        """ErrorCode.none if the transactional id is coordinated here, else NOT_COORDINATOR."""
        return ErrorCode.none if self._loaded(transactional_id) else ErrorCode.not_coordinator

    def coordinator_epoch(self, transactional_id: str) -> int | None:
        loaded = self._loaded(transactional_id)
        return loaded.coordinator_epoch if loaded is not None else None

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        loaded = self._loaded(transactional_id)
        return loaded.transactions.get(transactional_id) if loaded is not None else None

    def put_if_absent(self, metadata: TransactionMetadata) -> TransactionMetadata:
        """Adds a new transactional id, in memory only until its first transition is written
        (Kafka's ``putTransactionStateIfNotExists``); returns the one kept."""
        loaded = self._loaded(metadata.transactional_id)
        if loaded is None:
            raise KeyError(f"{metadata.transactional_id} is not coordinated here")
        return loaded.transactions.setdefault(metadata.transactional_id, metadata)

    def transactions(self) -> Iterator[TransactionMetadata]:
        for loaded in self._partitions.values():
            yield from loaded.transactions.values()

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self._config("transaction.max.timeout.ms")

    # -- loading ---------------------------------------------------------------------------

    def load(self) -> list[TransactionMetadata]:
        """Loads the partitions led here (at startup); returns their unfinished
        transactions."""
        return [txn for partition, epoch in self._store.hosted_partitions()
                for txn in self.load_partition(partition, epoch)]

    def load_partition(self, partition: int, coordinator_epoch: int
                       ) -> list[TransactionMetadata]:
        """Kafka's ``loadTransactionsForTxnTopicPartition``: this broker leads the partition
        at ``coordinator_epoch``, and coordinates its transactional ids from now on. Returns
        the transactions to finish: PREPARE_COMMIT and PREPARE_ABORT ones, whose markers are
        to be written again, and ONGOING ones that were being fenced, to be aborted. A
        partition already loaded at this epoch or a later one is left as it is."""
        count = self._store.partition_count()
        loaded = self._partitions.get(partition)
        if count is None or (loaded is not None and loaded.coordinator_epoch >= coordinator_epoch):
            return []
        self._partition_count = count
        transactions: dict[str, TransactionMetadata] = {}
        fenced: set[str] = set()
        for key, value in self._store.read(partition):
            try:
                transactional_id = read_transaction_log_key(key)
                txn = None if value is None else read_transaction_log_value(transactional_id,
                                                                            value)
            except (TransactionLogRecordError, UnicodeDecodeError) as e:
                log.warning("%s-%d: skipping a record: %s", TRANSACTION_STATE_TOPIC, partition, e)
                continue
            fenced.discard(transactional_id)
            if txn is None or txn.state is _S.DEAD:
                transactions.pop(transactional_id, None)
                continue
            if txn.state is _S.PREPARE_EPOCH_FENCE:
                txn.state = _S.ONGOING
                fenced.add(transactional_id)
            transactions[transactional_id] = txn
        self._partitions[partition] = _LoadedPartition(coordinator_epoch, transactions)
        log.info("loaded %s-%d at coordinator epoch %d (%d transactional ids)",
                 TRANSACTION_STATE_TOPIC, partition, coordinator_epoch, len(transactions))
        return [txn for txn in transactions.values()
                if txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
                or txn.transactional_id in fenced]

    def unload_partition(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """Kafka's ``removeTransactionsForTxnTopicPartition``: another broker leads the
        partition now, or the partition is gone (``coordinator_epoch`` None). A resignation
        older than the partition's load is stale and ignored."""
        loaded = self._partitions.get(partition)
        if loaded is None or (coordinator_epoch is not None
                              and loaded.coordinator_epoch > coordinator_epoch):
            return
        del self._partitions[partition]
        log.info("unloaded %s-%d (%d transactional ids)", TRANSACTION_STATE_TOPIC, partition,
                 len(loaded.transactions))

    def unload_all(self) -> None:
        """Forgets every partition (broker shutdown)."""
        for partition in list(self._partitions):
            self.unload_partition(partition)
        self._partition_count = None

    # -- writes ----------------------------------------------------------------------------

    def append_transit(self, transactional_id: str, coordinator_epoch: int,
                       transit: TxnTransitMetadata, callback: AppendCallback, *,
                       retry_on_error: Callable[[ErrorCode], bool] = lambda _: False) -> None:
        """Writes the transit prepared on the transactional id's metadata, which takes it once
        written; ``callback`` gets ErrorCode.none or the error the client is to see (Kafka's
        ``appendTransactionToLog``). After a failure the pending state is cleared, unless
        ``retry_on_error`` says the caller will append the same transit again."""
        partition = self.partition_for(transactional_id)
        loaded = self._partitions.get(partition) if partition is not None else None
        txn = loaded.transactions.get(transactional_id) if loaded is not None else None
        if txn is None or loaded.coordinator_epoch != coordinator_epoch:
            callback(ErrorCode.not_coordinator)
            return

        def appended(append_error: ErrorCode) -> None:
            # Kafka's mapping is the group coordinator's: a timeout or too few replicas is
            # COORDINATOR_NOT_AVAILABLE, a lost leadership NOT_COORDINATOR.
            error = group_store_error(append_error)
            if self._loaded(transactional_id) is not loaded or \
                    loaded.transactions.get(transactional_id) is not txn:
                log.info("%s: %s written after the partition moved", transactional_id,
                         transit.state)
                callback(ErrorCode.not_coordinator if error is ErrorCode.none else error)
                return
            if error is ErrorCode.none:
                txn.complete_transition(transit)
            else:
                log.info("%s: writing %s failed: %s", transactional_id, transit.state,
                         append_error.name)
                if not retry_on_error(error):
                    txn.pending_state = None
            callback(error)

        self._store.append(partition, [(transaction_log_key(transactional_id),
                                        transaction_log_value(transit))], appended)

    # -- timeouts and expiration -----------------------------------------------------------

    def timed_out_transactions(self) -> list[TransactionalIdAndProducerIdEpoch]:
        """ONGOING transactions older than their timeout, with no transition pending (Kafka's
        ``timedOutTransactions``)."""
        now_ms = self._clock()
        return [TransactionalIdAndProducerIdEpoch(txn.transactional_id, txn.producer_id,
                                                  txn.producer_epoch)
                for txn in self.transactions()
                if txn.state is _S.ONGOING and not txn.has_pending_transition
                and txn.txn_start_timestamp_ms + txn.txn_timeout_ms < now_ms]

    def remove_expired_transactional_ids(self) -> int:
        """Transactional ids idle for ``transactional.id.expiration.ms`` between transactions:
        one batch of tombstones per partition, then gone from memory, each unless it changed
        while its tombstone was written. Returns how many expire."""
        now_ms = self._clock()
        expiration_ms = self._config("transactional.id.expiration.ms")
        count = 0
        for partition, loaded in self._partitions.items():
            expired = [txn for txn in loaded.transactions.values()
                       if txn.state in EXPIRATION_ALLOWED and not txn.has_pending_transition
                       and txn.txn_last_update_timestamp_ms <= now_ms - expiration_ms]
            if expired:
                self._write_tombstones(partition, loaded, expired)
                count += len(expired)
        return count

    def _write_tombstones(self, partition: int, loaded: _LoadedPartition,
                          expired: list[TransactionMetadata]) -> None:
        transits = [(txn, txn.prepare_dead()) for txn in expired]

        def written(error: ErrorCode) -> None:
            still_loaded = self._partitions.get(partition) is loaded
            for txn, transit in transits:
                if (error is ErrorCode.none and still_loaded and txn.pending_state is _S.DEAD
                        and txn.producer_epoch == transit.producer_epoch):
                    loaded.transactions.pop(txn.transactional_id, None)
                else:
                    txn.pending_state = None
            if error is not ErrorCode.none:
                log.warning("%s-%d: writing %d tombstones failed: %s", TRANSACTION_STATE_TOPIC,
                            partition, len(transits), error.name)

        self._store.append(partition, [(transaction_log_key(txn.transactional_id), None)
                                       for txn in expired], written)

