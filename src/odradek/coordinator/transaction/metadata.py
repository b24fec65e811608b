"""``TransactionMetadata``: one transactional id's producer and transaction, and the one table
of its state transitions (Kafka's ``TransactionMetadata`` and ``TransactionState``).

Rules of this file (in the manner of h11's ``_state.py``):

1. A transition takes two steps, as in Kafka. A ``prepare_*`` method checks the move against
   :data:`VALID_PREVIOUS_STATES`, sets ``pending_state`` and returns the target as a frozen
   :class:`TxnTransitMetadata`; the state manager writes that to ``__transaction_state``, and
   only once it is written does :meth:`TransactionMetadata.complete_transition` copy it into
   memory. A failed write clears the pending state and changes nothing else.
2. While a state is pending, no other transition is prepared: the coordinator answers
   CONCURRENT_TRANSACTIONS and the client retries.
3. A move missing from the table is a coordinator bug and raises
   :class:`IllegalTransactionTransition`; it is never ignored.
4. After ``complete_transition`` memory holds what replaying the log would give, plus
   ``last_producer_epoch``, which the log does not keep. (Kafka copies only some fields per
   state, so its memory and its log may differ; here they never do.)

A transaction of "payments", transactions v1 (KIP-98)::

    InitProducerId             EMPTY            producer 4000, epoch 0
    AddPartitionsToTxn t-0     ONGOING          {t-0}, the transaction starts now
    EndTxn commit              PREPARE_COMMIT   the outcome is decided; the producer is answered
    markers written            COMPLETE_COMMIT  no partitions

With transactions v2 (KIP-890 part 2) EndTxn bumps the epoch: PREPARE_COMMIT and the markers
carry epoch 1, the producer is answered epoch 1, and a late write at epoch 0 is fenced. At
epoch 32766 (exhausted) the bump is to 32767 with a new producer id kept in
``next_producer_id``, which replaces the producer id, at epoch 0, on COMPLETE_COMMIT.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from odradek.protocol.topic_partition import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Short.MaxValue. Clients never get it: it is kept for the coordinator to fence the producer
# of an exhausted epoch (KIP-360), so epochs from MAX_PRODUCER_EPOCH - 1 on are exhausted.
MAX_PRODUCER_EPOCH = 32767
# Kafka's TransactionVersion.TV_2: from this client transaction version on, EndTxn bumps the
# epoch (KIP-890 part 2, EndTxn v5+).
TRANSACTIONS_V2 = 2


class TransactionState(enum.IntEnum):
    """Kafka's states; the values are the ids written in TransactionLogValue.TransactionStatus."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6  # expiring: its tombstone is being written (only ever a pending state)
    PREPARE_EPOCH_FENCE = 7  # bumping the epoch to abort an ongoing transaction (in memory only)

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions answer: "PrepareCommit"."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @classmethod
    def named(cls, kafka_name: str) -> TransactionState | None:
        return _BY_KAFKA_NAME.get(kafka_name)

    def __str__(self) -> str:
        return self.kafka_name


_BY_KAFKA_NAME = {state.kafka_name: state for state in TransactionState}

_S = TransactionState

# The states each state may be entered from (Kafka's validPreviousStates).
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    # InitProducerId between transactions
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # AddPartitionsToTxn, AddOffsetsToTxn
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # EndTxn commit
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # EndTxn abort, a fence; with transactions v2 also an abort with nothing to abort
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY,
                                 _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # every marker written
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    # transactional.id.expiration.ms without a transaction
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # InitProducerId during a transaction, or its timeout
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}

# The states a transactional id may expire in (Kafka's isExpirationAllowed).
EXPIRATION_ALLOWED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})


class IllegalTransactionTransition(RuntimeError):
    """A move the table does not have, or a completion of a move not prepared (rule 3)."""


class ProducerFenced(Exception):
    """InitProducerId with an expected epoch that is neither the current nor the last one:
    another producer has initialized the transactional id since (PRODUCER_FENCED)."""


def check_transition(current: TransactionState, target: TransactionState) -> None:
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalTransactionTransition(f"{current} -> {target}")


def is_epoch_exhausted(producer_epoch: int) -> bool:
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


def supports_epoch_bump(client_transaction_version: int) -> bool:
    return client_transaction_version >= TRANSACTIONS_V2


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of a prepared transition: what is written to ``__transaction_state``."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int
    client_transaction_version: int


@dataclass(slots=True, eq=False)
class TransactionMetadata:
    """A transactional id's producer and its transaction.

    ``previous_producer_id`` is the producer id the last rotation replaced (so that a retry of
    the request that rotated it is recognised); ``next_producer_id`` the one an exhausted
    epoch rotates to once the transaction completes; ``last_producer_epoch`` the epoch before
    the last bump (a retried InitProducerId or EndTxn carries it). Timestamps are wall ms; the
    transaction starts when its first partition is added (-1 before).
    """

    transactional_id: str
    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 0
    state: TransactionState = TransactionState.EMPTY
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp_ms: int = -1
    txn_last_update_timestamp_ms: int = -1
    client_transaction_version: int = 0
    pending_state: TransactionState | None = None

    @property
    def has_pending_transition(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    # -- InitProducerId ------------------------------------------------------------------

    def prepare_increment_producer_epoch(self, txn_timeout_ms: int,
                                         expected_producer_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata:
        """The next epoch (0 for a new producer). KIP-360: a producer that gives its epoch
        keeps it as the last epoch, and the retry of a bump it never heard of gets the
        current epoch again. Raises :class:`ProducerFenced`."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransactionTransition(
                f"{self.transactional_id}: epoch {self.producer_epoch} is exhausted")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif expected_producer_epoch == self.producer_epoch or \
                self.producer_epoch == NO_PRODUCER_EPOCH:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFenced(
                f"{self.transactional_id}: expected epoch {expected_producer_epoch}, current "
                f"{self.producer_epoch}, last {self.last_producer_epoch}")
        return self._prepare(_S.EMPTY, now_ms, producer_epoch=epoch,
                             last_producer_epoch=last_epoch, txn_timeout_ms=txn_timeout_ms,
                             topic_partitions=frozenset(), txn_start_timestamp_ms=-1)

    def prepare_producer_id_rotation(self, new_producer_id: int, txn_timeout_ms: int,
                                     now_ms: int, *, record_last_epoch: bool
                                     ) -> TxnTransitMetadata:
        """A new producer id at epoch 0, once the epochs of this one are exhausted."""
        last_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(_S.EMPTY, now_ms, producer_id=new_producer_id, producer_epoch=0,
                             last_producer_epoch=last_epoch, txn_timeout_ms=txn_timeout_ms,
                             topic_partitions=frozenset(), txn_start_timestamp_ms=-1)

    # -- AddPartitionsToTxn --------------------------------------------------------------

    def prepare_add_partitions(self, partitions: set[TopicPartition], now_ms: int,
                               client_transaction_version: int) -> TxnTransitMetadata:
        """ONGOING with the partitions added; the first ones start the transaction."""
        starts = self.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
        return self._prepare(
            _S.ONGOING, now_ms, topic_partitions=frozenset(self.topic_partitions | partitions),
            txn_start_timestamp_ms=now_ms if starts else self.txn_start_timestamp_ms,
            client_transaction_version=client_transaction_version)

    # -- EndTxn --------------------------------------------------------------------------

    def prepare_abort_or_commit(self, state: TransactionState, client_transaction_version: int,
                                next_producer_id: int, now_ms: int, *,
                                no_partition_added: bool) -> TxnTransitMetadata:
        """PREPARE_COMMIT or PREPARE_ABORT. Transactions v2 bump the epoch (the markers carry
        it); ``next_producer_id`` is the id an exhausted epoch rotates to. A v2 abort with no
        partition added starts (and ends) its transaction now."""
        if supports_epoch_bump(client_transaction_version):
            # At 32767 already (never given to a client) there is nothing left to bump to:
            # the rotation to next_producer_id fences the producer instead.
            epoch = min(self.producer_epoch + 1, MAX_PRODUCER_EPOCH)
            last_epoch = self.producer_epoch
        else:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        return self._prepare(
            state, now_ms, producer_epoch=epoch, last_producer_epoch=last_epoch,
            next_producer_id=next_producer_id,
            txn_start_timestamp_ms=now_ms if no_partition_added else self.txn_start_timestamp_ms,
            client_transaction_version=client_transaction_version)

    def prepare_epoch_fence_abort(self, next_producer_id: int, now_ms: int
                                  ) -> TxnTransitMetadata:
        """Aborts the ongoing transaction with the epoch bumped once, so that its producer
        is fenced: InitProducerId of a new producer, or the transaction timed out. Kafka
        passes through PREPARE_EPOCH_FENCE in memory only; both moves are checked here and
        PREPARE_ABORT is prepared. The last epoch is forgotten: the fenced producer's next
        InitProducerId is not a retry."""
        check_transition(self.state, _S.PREPARE_EPOCH_FENCE)
        return self._prepare(
            _S.PREPARE_ABORT, now_ms, from_state=_S.PREPARE_EPOCH_FENCE,
            producer_epoch=min(self.producer_epoch + 1, MAX_PRODUCER_EPOCH),
            last_producer_epoch=NO_PRODUCER_EPOCH, next_producer_id=next_producer_id)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """COMPLETE_COMMIT or COMPLETE_ABORT, every marker written. An exhausted epoch moves
        to its next producer id, at epoch 0."""
        state = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        if self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0
        else:
            producer_id, epoch = self.producer_id, self.producer_epoch
        return self._prepare(state, now_ms, producer_id=producer_id, producer_epoch=epoch,
                             topic_partitions=frozenset())

    # -- expiration ----------------------------------------------------------------------

    def prepare_dead(self) -> TxnTransitMetadata:
        """The transactional id expires: its tombstone is written, then it is forgotten."""
        return self._prepare(_S.DEAD, self.txn_last_update_timestamp_ms,
                             topic_partitions=frozenset())

    # -- the two steps -------------------------------------------------------------------

    def _prepare(self, state: TransactionState, now_ms: int, *,
                 from_state: TransactionState | None = None, **changes) -> TxnTransitMetadata:
        """Rule 1: the target, with ``changes`` over the current values, and
        ``pending_state`` set. ``next_producer_id`` is cleared unless given."""
        if self.pending_state is not None:
            raise IllegalTransactionTransition(
                f"{self.transactional_id}: preparing {state} while {self.pending_state} is "
                f"pending")
        check_transition(from_state or self.state, state)
        transit = TxnTransitMetadata(
            producer_id=self.producer_id, previous_producer_id=self.previous_producer_id,
            next_producer_id=NO_PRODUCER_ID, producer_epoch=self.producer_epoch,
            last_producer_epoch=self.last_producer_epoch, txn_timeout_ms=self.txn_timeout_ms,
            state=state, topic_partitions=frozenset(self.topic_partitions),
            txn_start_timestamp_ms=self.txn_start_timestamp_ms,
            txn_last_update_timestamp_ms=now_ms,
            client_transaction_version=self.client_transaction_version)
        transit = replace(transit, **changes)
        if transit.producer_id != self.producer_id:
            transit = replace(transit, previous_producer_id=self.producer_id)
        if transit.producer_id < 0 or (state is not _S.DEAD and transit.producer_epoch < 0):
            raise IllegalTransactionTransition(f"{self.transactional_id}: {transit}")
        self.pending_state = state
        return transit

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """The transit is written: memory takes it (rule 4)."""
        if self.pending_state is not transit.state or transit.state is _S.DEAD:
            # An expired id is removed once its tombstone is written, never moved to DEAD.
            raise IllegalTransactionTransition(
                f"{self.transactional_id}: completing {transit.state} while "
                f"{self.pending_state} is pending")
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.state = transit.state
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms
        self.txn_last_update_timestamp_ms = transit.txn_last_update_timestamp_ms
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
