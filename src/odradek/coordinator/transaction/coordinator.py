"""``TransactionCoordinator``: the entry point of every transaction API (Kafka's
``TransactionCoordinator``, with the completion half of its ``TransactionMarkerChannelManager``).

A transaction as the coordinator sees it (KIP-98):

1. InitProducerId gives the transactional id a producer id and a new epoch, fencing every
   earlier producer of the id; an ongoing transaction of theirs is aborted first, and the new
   producer is answered CONCURRENT_TRANSACTIONS meanwhile, so that it asks again.
2. AddPartitionsToTxn and AddOffsetsToTxn add partitions (with transactions v2, the partition
   leader adds one on the producer's first write to it): ONGOING, timed from the first one.
3. EndTxn writes PREPARE_COMMIT or PREPARE_ABORT to ``__transaction_state`` and answers the
   producer: from then on the outcome is decided.
4. The marker writer writes a COMMIT or ABORT control batch to every partition of the
   transaction, then COMPLETE_COMMIT or COMPLETE_ABORT is written. A coordinator elected
   between 3 and 4 finds the PREPARE_* record on loading, and does 4 again.

Transactions v2 (KIP-890 part 2, EndTxn v5+, ``client_transaction_version`` 2): EndTxn bumps
the epoch, so that a late write of the finished transaction is fenced by the markers. Producer
4000 at epoch 7 commits: PREPARE_COMMIT and the markers carry epoch 8, and the producer is
answered (4000, 8). At epoch 32766 the bump would leave no epoch to fence with, so a new
producer id is allocated: the markers carry (4000, 32767) and the producer is answered
(4001, 0). An EndTxn retried after its answer was lost (epoch one below the current, or the
rotated id's last epoch) is answered with the current producer id and epoch.

Producer ids come from an asynchronous source (the broker's block of ids, Kafka's
``ProducerIdManager``). An operation that needs one waits for it, then runs again from the
start, since the transactional id may have changed meanwhile; without one it answers
COORDINATOR_LOAD_IN_PROGRESS, which clients retry.

Every answer goes through a ``respond`` callback, at once or once a record is written; errors
are Kafka's. The broker calls :meth:`abort_timed_out_transactions`,
:meth:`remove_expired_transactional_ids` and :meth:`retry_completions` periodically.
Callbacks only, no asyncio; not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from odradek.coordinator.transaction.metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransactionTransition,
    ProducerFenced,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
    supports_epoch_bump,
)
from odradek.coordinator.transaction.state_manager import (
    TransactionalIdAndProducerIdEpoch,
    TransactionStateManager,
)
from odradek.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

_S = TransactionState
E = ErrorCode

# (error, producer id, producer epoch); the id and epoch are -1 but on success.
InitProducerIdCallback = Callable[[ErrorCode, int, int], None]
EndTxnCallback = Callable[[ErrorCode, int, int], None]
AddPartitionsCallback = Callable[[dict[TopicPartition, ErrorCode]], None]
# Calls back with a fresh producer id, or None when none can be had for now.
ProducerIdSource = Callable[[Callable[[int | None], None]], None]


class MarkerWriter(Protocol):
    def write_markers(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool, coordinator_epoch: int, partitions: set[TopicPartition],
                      on_complete: Callable[[], None]) -> None:
        """Writes the COMMIT or ABORT control batch to every partition's leader (WriteTxnMarkers),
        retrying until each is written or its partition no longer exists, then calls
        ``on_complete``."""


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions' answer for one transactional id."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    topic_partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class ListTransactionsResult:
    """ListTransactions' answer; ``unknown_state_filters`` are the filters naming no state."""

    error: ErrorCode
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[ListedTransaction, ...] = ()


@dataclass(frozen=True, slots=True)
class _PendingCompletion:
    """A transaction whose markers are being written, and its COMPLETE_* transit."""

    txn: TransactionMetadata
    coordinator_epoch: int
    transit: TxnTransitMetadata


def _no_ids(respond: EndTxnCallback) -> Callable[[ErrorCode], None]:
    return lambda error: respond(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)


class TransactionCoordinator:
    def __init__(self, manager: TransactionStateManager, config: Callable[[str], Any],
                 clock: Callable[[], int], generate_producer_id: ProducerIdSource,
                 marker_writer: MarkerWriter) -> None:
        """``config`` reads a broker config by name; ``clock`` gives wall ms."""
        self.manager = manager
        self._config = config
        self._clock = clock
        self._generate_producer_id = generate_producer_id
        self._marker_writer = marker_writer
        self._active = False
        self._completions_to_retry: list[_PendingCompletion] = []

    # -- lifecycle -------------------------------------------------------------------------

    def startup(self) -> None:
        self._active = True
        self._finish(self.manager.load())

    def shutdown(self) -> None:
        self._active = False
        self.manager.unload_all()
        self._completions_to_retry.clear()

    def on_elected(self, partition: int, coordinator_epoch: int) -> None:
        """This broker now leads ``__transaction_state-<partition>`` at this leader epoch: its
        transactional ids are loaded, and the transactions left prepared are completed
        (Kafka's ``onElection``)."""
        self._finish(self.manager.load_partition(partition, coordinator_epoch))

    def on_resigned(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """Another broker leads the partition (or it is deleted: no epoch): its transactional
        ids are unloaded. Writes still under way for them end in NOT_COORDINATOR, and markers
        completing afterwards are left to the new coordinator (Kafka's ``onResignation``)."""
        self.manager.unload_partition(partition, coordinator_epoch)

    def _finish(self, unfinished: list[TransactionMetadata]) -> None:
        for txn in unfinished:
            tid = txn.transactional_id
            if txn.state is _S.ONGOING:  # was being fenced
                self._abort_on_fence(tid, txn.producer_id, txn.producer_epoch,
                                     self._logged("abort of fenced", tid))
            else:
                coordinator_epoch = self.manager.coordinator_epoch(tid)
                log.info("%s: writing the markers of %s again", tid, txn.state)
                self._write_markers(_PendingCompletion(
                    txn, coordinator_epoch, txn.prepare_complete(self._clock())))

    def _status(self, transactional_id: str | None) -> ErrorCode:
        if not self._active:
            return E.coordinator_not_available
        if not transactional_id:
            return E.invalid_request
        return self.manager.ownership(transactional_id)

    def _with_producer_id(self, then: Callable[[int], None],
                          fail: Callable[[ErrorCode], None]) -> None:
        def generated(producer_id: int | None) -> None:
            if producer_id is None:
                fail(E.coordinator_load_in_progress)
            else:
                then(producer_id)

        self._generate_producer_id(generated)

    # -- InitProducerId --------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                         expected_producer_id: int, expected_producer_epoch: int,
                         respond: InitProducerIdCallback) -> None:
        """InitProducerId for a transactional id. ``expected_producer_id``/``_epoch`` are the
        producer's own (KIP-360, InitProducerId v3+), -1 when it has none: a producer
        recovering from an error keeps its id and gets the next epoch, unless another has
        initialized the id since (PRODUCER_FENCED)."""
        error = E.none
        if not self._active:
            error = E.coordinator_not_available
        elif not transactional_id or \
                (expected_producer_id == NO_PRODUCER_ID) != (expected_producer_epoch == -1):
            error = E.invalid_request
        elif not self.manager.validate_transaction_timeout_ms(transaction_timeout_ms):
            error = E.invalid_transaction_timeout
        if error is not E.none:
            respond(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return
        expected = (None if expected_producer_id == NO_PRODUCER_ID
                    else (expected_producer_id, expected_producer_epoch))
        self._init_producer_id(transactional_id, transaction_timeout_ms, expected, respond, None)

    def _init_producer_id(self, tid: str, timeout_ms: int, expected: tuple[int, int] | None,
                          respond: InitProducerIdCallback, new_producer_id: int | None) -> None:
        """Kafka's ``handleInitProducerId`` and ``prepareInitProducerIdTransit``; run again
        with ``new_producer_id`` once a needed id is had."""
        fail = _no_ids(respond)
        error = self._status(tid)
        if error is not E.none:
            fail(error)
            return

        def again(producer_id: int) -> None:
            self._init_producer_id(tid, timeout_ms, expected, respond, producer_id)

        now_ms = self._clock()
        txn = self.manager.get(tid)
        if txn is None:
            if new_producer_id is None:
                self._with_producer_id(again, fail)
                return
            txn = self.manager.put_if_absent(TransactionMetadata(
                tid, new_producer_id, txn_timeout_ms=timeout_ms,
                txn_last_update_timestamp_ms=now_ms))
            new_producer_id = None
        if txn.has_pending_transition:
            fail(E.concurrent_transactions)
            return
        if expected is not None and not _is_valid_producer_id(txn, *expected):
            fail(E.producer_fenced)
            return
        match txn.state:
            case _S.PREPARE_COMMIT | _S.PREPARE_ABORT:
                fail(E.concurrent_transactions)
                return
            case _S.ONGOING:
                # Abort it with the epoch bumped, fencing its producer. The bumped epoch is
                # never given out: the new producer, answered CONCURRENT_TRANSACTIONS, asks
                # again and gets the next one (or a new producer id, if that exhausted it).
                def aborted(error: ErrorCode, *_: int) -> None:
                    fail(E.concurrent_transactions if error is E.none else error)

                self._abort_on_fence(tid, txn.producer_id, txn.producer_epoch, aborted)
                return
            case _S.EMPTY | _S.COMPLETE_COMMIT | _S.COMPLETE_ABORT:
                pass
            case _:
                raise IllegalTransactionTransition(f"{tid}: InitProducerId in {txn.state}")
        if txn.is_producer_epoch_exhausted and (expected is None
                                                or expected[1] == txn.producer_epoch):
            if new_producer_id is None:
                self._with_producer_id(again, fail)
                return
            transit = txn.prepare_producer_id_rotation(new_producer_id, timeout_ms, now_ms,
                                                       record_last_epoch=expected is not None)
        else:
            try:
                transit = txn.prepare_increment_producer_epoch(
                    timeout_ms, expected[1] if expected is not None else None, now_ms)
            except ProducerFenced as e:
                log.info("%s", e)
                fail(E.producer_fenced)
                return

        def written(error: ErrorCode) -> None:
            if error is E.none:
                log.info("%s: initialized producer %d at epoch %d", tid, transit.producer_id,
                         transit.producer_epoch)
                respond(E.none, transit.producer_id, transit.producer_epoch)
            else:
                fail(error)

        self.manager.append_transit(tid, self.manager.coordinator_epoch(tid), transit, written)

    # -- AddPartitionsToTxn, AddOffsetsToTxn -----------------------------------------------

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: set[TopicPartition], respond: AddPartitionsCallback,
                       client_transaction_version: int = 1) -> None:
        """Kafka's ``handleAddPartitionsToTransaction``: ``respond`` gets each partition's
        error once the partitions are written (at once if nothing is to be written). Also
        AddOffsetsToTxn, with the group's ``__consumer_offsets`` partition, and the implicit
        add of a partition leader under transactions v2."""
        def answer(error: ErrorCode) -> None:
            respond(dict.fromkeys(partitions, error))

        error = self._status(transactional_id)
        txn = self.manager.get(transactional_id) if error is E.none else None
        if error is not E.none:
            pass
        elif txn is None:
            error = E.invalid_producer_id_mapping
        elif txn.has_pending_transition:
            # Before the producer id: with transactions v2, the producer starts its next
            # transaction with the rotated id while the last one is still completing.
            error = E.concurrent_transactions
        elif txn.producer_id != producer_id:
            error = E.invalid_producer_id_mapping
        elif txn.producer_epoch != producer_epoch:
            error = E.producer_fenced
        elif txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            error = E.concurrent_transactions
        elif txn.state is _S.ONGOING and partitions <= txn.topic_partitions:
            pass  # already added: nothing to write
        else:
            transit = txn.prepare_add_partitions(partitions, self._clock(),
                                                 client_transaction_version)
            self.manager.append_transit(transactional_id,
                                        self.manager.coordinator_epoch(transactional_id),
                                        transit, answer)
            return
        answer(error)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: set[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ ``verify_only``, from a partition leader about to append a
        transactional batch (KIP-890 part 1; Kafka's ``handleVerifyPartitionsInTransaction``):
        NONE for a partition in the ongoing transaction of this producer id and epoch,
        INVALID_TXN_STATE for one it never added (a write delayed past the end of its
        transaction), as Kafka 3.6 answers; Kafka 3.8+ answers TRANSACTION_ABORTABLE, turned
        into INVALID_TXN_STATE for producers older than Produce v12. PRODUCER_FENCED is the
        partition leader's INVALID_PRODUCER_EPOCH. No pending state is checked: the write is
        checked again by the partition's producer state."""
        error = self._status(transactional_id)
        txn = self.manager.get(transactional_id) if error is E.none else None
        if error is not E.none:
            pass
        elif txn is None or txn.producer_id != producer_id:
            error = E.invalid_producer_id_mapping
        elif txn.producer_epoch != producer_epoch:
            error = E.producer_fenced
        elif txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            error = E.concurrent_transactions
        else:
            return {tp: E.none if tp in txn.topic_partitions else E.invalid_txn_state
                    for tp in partitions}
        return dict.fromkeys(partitions, error)

    # -- EndTxn ----------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool, client_transaction_version: int, respond: EndTxnCallback) -> None:
        """Kafka's ``handleEndTransaction``: ``respond`` gets (error, producer id, epoch) once
        the outcome is written, before the markers. Transactions v1 answer -1 for the id and
        epoch; v2 the producer's id and epoch for its next transaction."""
        if supports_epoch_bump(client_transaction_version):
            self._end_txn_v2(transactional_id, producer_id, producer_epoch, commit,
                             client_transaction_version, respond, None)
        else:
            self._end_txn_v1(transactional_id, producer_id, producer_epoch, commit,
                             client_transaction_version, respond)

    def _end_txn_v1(self, tid: str, producer_id: int, producer_epoch: int, commit: bool,
                    client_transaction_version: int, respond: EndTxnCallback) -> None:
        fail = _no_ids(respond)
        error = self._status(tid)
        txn = self.manager.get(tid) if error is E.none else None
        if error is not E.none:
            pass
        elif txn is None or txn.producer_id != producer_id:
            error = E.invalid_producer_id_mapping
        elif txn.producer_epoch != producer_epoch:
            error = E.producer_fenced
        elif txn.has_pending_transition:
            error = E.concurrent_transactions
        elif txn.state is _S.ONGOING:
            transit = txn.prepare_abort_or_commit(
                _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT, client_transaction_version,
                NO_PRODUCER_ID, self._clock(), no_partition_added=False)
            self._write_prepared(txn, transit, lambda prepared_error, *_: fail(prepared_error))
            return
        else:
            # The retry of an EndTxn already written is answered as the first one was.
            error = _outcome_so_far(txn.state, commit, retry=True)
        fail(error)

    def _end_txn_v2(self, tid: str, producer_id: int, producer_epoch: int, commit: bool,
                    client_transaction_version: int, respond: EndTxnCallback,
                    next_producer_id: int | None) -> None:
        """Kafka's ``endTransaction`` for transactions v2; run again with
        ``next_producer_id`` once an exhausted epoch has one to rotate to."""
        fail = _no_ids(respond)
        error = self._status(tid)
        txn = self.manager.get(tid) if error is E.none else None
        if error is not E.none:
            fail(error)
            return
        if txn is None:
            fail(E.invalid_producer_id_mapping)
            return
        # The answer to the last EndTxn was lost: the epoch was bumped since, or the id rotated.
        retry_on_epoch_bump = txn.producer_epoch == producer_epoch + 1
        retry_on_overflow = (txn.previous_producer_id == producer_id and txn.producer_epoch == 0
                             and producer_epoch == MAX_PRODUCER_EPOCH - 1)
        retry = retry_on_epoch_bump or retry_on_overflow
        match txn.state:
            case _S.PREPARE_COMMIT | _S.PREPARE_ABORT:
                valid_epoch = retry_on_epoch_bump
            case _S.COMPLETE_COMMIT | _S.COMPLETE_ABORT:
                valid_epoch = retry or txn.producer_epoch == producer_epoch
            case _:
                valid_epoch = txn.producer_epoch == producer_epoch
        if txn.producer_id != producer_id and not retry_on_overflow:
            error = E.invalid_producer_id_mapping
        elif not valid_epoch:
            error = E.producer_fenced
        elif retry_on_epoch_bump and commit and txn.state in (_S.PREPARE_ABORT,
                                                              _S.COMPLETE_ABORT):
            # The epoch was bumped by an abort the producer did not ask for (its transaction
            # timed out): it is fenced, as Kafka answers since KAFKA-20785.
            error = E.producer_fenced
        elif txn.has_pending_transition:
            error = E.concurrent_transactions
        elif txn.state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT) and retry:
            error = _outcome_so_far(txn.state, commit, retry=True)
            if error is E.none:
                respond(E.none, txn.producer_id, txn.producer_epoch)
                return
        elif txn.state is _S.ONGOING or (not commit and txn.state in (
                _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)):
            # An abort with nothing to abort still bumps the epoch: the client cannot know
            # whether a partition leader added a partition for it.
            if txn.is_producer_epoch_exhausted and next_producer_id is None:
                self._with_producer_id(lambda next_id: self._end_txn_v2(
                    tid, producer_id, producer_epoch, commit, client_transaction_version,
                    respond, next_id), fail)
                return
            transit = txn.prepare_abort_or_commit(
                _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT, client_transaction_version,
                next_producer_id if txn.is_producer_epoch_exhausted else NO_PRODUCER_ID,
                self._clock(), no_partition_added=txn.state is not _S.ONGOING)
            self._write_prepared(txn, transit, respond)
            return
        else:
            error = _outcome_so_far(txn.state, commit, retry=False)
        fail(error)

    def _abort_on_fence(self, tid: str, producer_id: int, producer_epoch: int,
                        respond: EndTxnCallback, next_producer_id: int | None = None) -> None:
        """Aborts the ongoing transaction of (producer id, epoch) with the epoch bumped, which
        fences its producer: InitProducerId of another, or a timeout. ``respond`` gets
        CONCURRENT_TRANSACTIONS if the transaction changed meanwhile."""
        fail = _no_ids(respond)
        error = self._status(tid)
        txn = self.manager.get(tid) if error is E.none else None
        if error is not E.none:
            fail(error)
            return
        if (txn is None or txn.producer_id != producer_id or txn.producer_epoch != producer_epoch
                or txn.state is not _S.ONGOING or txn.has_pending_transition):
            fail(E.concurrent_transactions)
            return
        # KAFKA-20090: with transactions v2, an exhausted epoch rotates the producer id here too.
        rotates = supports_epoch_bump(txn.client_transaction_version) and \
            txn.is_producer_epoch_exhausted
        if rotates and next_producer_id is None:
            self._with_producer_id(lambda next_id: self._abort_on_fence(
                tid, producer_id, producer_epoch, respond, next_id), fail)
            return
        transit = txn.prepare_epoch_fence_abort(
            next_producer_id if rotates else NO_PRODUCER_ID, self._clock())
        self._write_prepared(txn, transit, respond)

    def _write_prepared(self, txn: TransactionMetadata, transit: TxnTransitMetadata,
                        respond: EndTxnCallback) -> None:
        """Writes PREPARE_COMMIT or PREPARE_ABORT; once written, answers with the id and epoch
        of the completed transaction and has the markers written."""
        tid = txn.transactional_id
        coordinator_epoch = self.manager.coordinator_epoch(tid)

        def written(error: ErrorCode) -> None:
            if error is not E.none:
                respond(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
                return
            completion = _PendingCompletion(txn, coordinator_epoch,
                                            txn.prepare_complete(self._clock()))
            respond(E.none, completion.transit.producer_id, completion.transit.producer_epoch)
            self._write_markers(completion)

        self.manager.append_transit(tid, coordinator_epoch, transit, written)

    # -- markers and completion ------------------------------------------------------------

    def _write_markers(self, completion: _PendingCompletion) -> None:
        """The markers carry the prepared producer id and epoch: with transactions v2 the
        bumped epoch, which fences late writes of the transaction."""
        txn = completion.txn
        if not txn.topic_partitions:
            self._write_completion(completion)
            return
        self._marker_writer.write_markers(
            txn.transactional_id, txn.producer_id, txn.producer_epoch,
            completion.transit.state is _S.COMPLETE_COMMIT, completion.coordinator_epoch,
            set(txn.topic_partitions), lambda: self._write_completion(completion))

    def _write_completion(self, completion: _PendingCompletion) -> None:
        """Writes COMPLETE_COMMIT or COMPLETE_ABORT once every marker is written, unless the
        partition moved meanwhile: its new coordinator writes the markers again. A failed
        write is retried by :meth:`retry_completions`, the pending state kept meanwhile (Kafka
        retries only COORDINATOR_NOT_AVAILABLE and takes other errors as fatal)."""
        txn = completion.txn
        tid = txn.transactional_id
        if self.manager.get(tid) is not txn or \
                self.manager.coordinator_epoch(tid) != completion.coordinator_epoch:
            log.info("%s: no longer coordinated here at epoch %d; leaving %s to the new "
                     "coordinator", tid, completion.coordinator_epoch, completion.transit.state)
            return

        def written(error: ErrorCode) -> None:
            if error is not E.none:
                log.warning("%s: writing %s failed: %s; retrying", tid,
                            completion.transit.state, error.name)
                self._completions_to_retry.append(completion)

        self.manager.append_transit(tid, completion.coordinator_epoch, completion.transit,
                                    written, retry_on_error=lambda _: True)

    def retry_completions(self) -> None:
        """Writes again the COMPLETE_* records whose write failed (Kafka's
        ``retryLogAppends``, run before each round of markers)."""
        completions, self._completions_to_retry = self._completions_to_retry, []
        for completion in completions:
            self._write_completion(completion)

    # -- timeouts and expiration -----------------------------------------------------------

    def abort_timed_out_transactions(self) -> int:
        """Kafka's ``abortTimedOutTransactions``: every ONGOING transaction older than its
        timeout is aborted with the epoch bumped, fencing its producer (its next request gets
        PRODUCER_FENCED, its next write INVALID_PRODUCER_EPOCH). Returns how many."""
        if not self._active:
            return 0
        timed_out = self.manager.timed_out_transactions()
        for t in timed_out:
            self._abort_on_fence(t.transactional_id, t.producer_id, t.producer_epoch,
                                 self._logged("timed-out", t))
        return len(timed_out)

    @staticmethod
    def _logged(what: str, about: str | TransactionalIdAndProducerIdEpoch) -> EndTxnCallback:
        def logged(error: ErrorCode, *_: int) -> None:
            if error is E.none:
                log.info("aborted %s transaction %s", what, about)
            else:
                log.info("abort of %s transaction %s: %s", what, about, error.name)
        return logged

    def remove_expired_transactional_ids(self) -> int:
        """Transactional ids unused for ``transactional.id.expiration.ms`` are removed;
        returns how many."""
        return self.manager.remove_expired_transactional_ids() if self._active else 0

    # -- admin -----------------------------------------------------------------------------

    def describe_transactions(self, transactional_ids: list[str]
                              ) -> list[TransactionDescription]:
        """DescribeTransactions (Kafka's ``handleDescribeTransactions``)."""
        return [self._describe(tid) for tid in transactional_ids]

    def _describe(self, tid: str) -> TransactionDescription:
        error = self._status(tid)
        txn = self.manager.get(tid) if error is E.none else None
        if error is not E.none:
            return TransactionDescription(tid, error)
        if txn is None or txn.pending_state is _S.DEAD:  # expiring: as good as gone
            return TransactionDescription(tid, E.transactional_id_not_found)
        return TransactionDescription(
            tid, E.none, txn.state.kafka_name, txn.producer_id, txn.producer_epoch,
            txn.txn_timeout_ms, txn.txn_start_timestamp_ms, tuple(sorted(txn.topic_partitions)))

    def list_transactions(self, state_filters: set[str], producer_id_filters: set[int],
                          duration_filter_ms: int = -1) -> ListTransactionsResult:
        """ListTransactions (Kafka's ``listTransactionStates``): the transactions in one of the
        states named (all if none), of one of the producers (all if none), and, with
        ``duration_filter_ms`` >= 0 (KIP-994), running for longer than that."""
        if not self._active:
            return ListTransactionsResult(E.coordinator_not_available)
        states = {TransactionState.named(name) for name in state_filters} - {None}
        unknown = tuple(sorted(name for name in state_filters if TransactionState.named(name)
                               is None))
        now_ms = self._clock()
        return ListTransactionsResult(E.none, unknown, tuple(
            ListedTransaction(txn.transactional_id, txn.producer_id, txn.state.kafka_name)
            for txn in self.manager.transactions()
            if txn.state is not _S.DEAD and txn.pending_state is not _S.DEAD
            and (not producer_id_filters or txn.producer_id in producer_id_filters)
            and (not state_filters or txn.state in states)
            and (duration_filter_ms < 0
                 or now_ms - txn.txn_start_timestamp_ms > duration_filter_ms)))


def _is_valid_producer_id(txn: TransactionMetadata, producer_id: int, producer_epoch: int
                          ) -> bool:
    """KIP-360: the producer of InitProducerId is the id's current one, or the id has had no
    producer yet, or it retries an InitProducerId that rotated its exhausted id."""
    return (txn.producer_epoch == NO_PRODUCER_EPOCH or producer_id == txn.producer_id
            or (producer_id == txn.previous_producer_id and is_epoch_exhausted(producer_epoch)))


def _outcome_so_far(state: TransactionState, commit: bool, *, retry: bool) -> ErrorCode:
    """EndTxn of ``commit`` on a transaction in ``state`` with nothing to write: the retry of
    the EndTxn that completed it is answered NONE, one still being completed
    CONCURRENT_TRANSACTIONS, and the other outcome INVALID_TXN_STATE."""
    same = state in ((_S.PREPARE_COMMIT, _S.COMPLETE_COMMIT) if commit
                     else (_S.PREPARE_ABORT, _S.COMPLETE_ABORT))
    if not same:
        log.info("EndTxn %s in state %s", "commit" if commit else "abort", state)
        return E.invalid_txn_state
    if state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        return E.concurrent_transactions
    return E.none if retry else E.invalid_txn_state
