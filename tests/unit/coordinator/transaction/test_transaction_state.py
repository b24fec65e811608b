"""The state table and the two-step transitions of a transactional id's metadata."""

from __future__ import annotations

import pytest

from odradek.coordinator.transaction.metadata import (
    VALID_PREVIOUS_STATES,
    IllegalTransactionTransition,
    ProducerFenced,
    TransactionMetadata,
    TransactionState,
    check_transition,
)
from odradek.protocol.topic_partition import TopicPartition

S = TransactionState
T0 = TopicPartition("orders", 0)


@pytest.mark.parametrize(("state", "name", "state_id"), [
    (S.EMPTY, "Empty", 0), (S.ONGOING, "Ongoing", 1), (S.PREPARE_COMMIT, "PrepareCommit", 2),
    (S.PREPARE_ABORT, "PrepareAbort", 3), (S.COMPLETE_COMMIT, "CompleteCommit", 4),
    (S.COMPLETE_ABORT, "CompleteAbort", 5), (S.DEAD, "Dead", 6),
    (S.PREPARE_EPOCH_FENCE, "PrepareEpochFence", 7),
])
def test_states_have_kafkas_ids_and_the_names_kafkas_tools_print(state, name, state_id):
    assert (state.kafka_name, str(state), int(state)) == (name, name, state_id)
    assert TransactionState.named(name) is state


def test_every_state_has_a_row_and_a_missing_move_is_a_bug():
    assert set(VALID_PREVIOUS_STATES) == set(S)
    check_transition(S.ONGOING, S.PREPARE_COMMIT)
    with pytest.raises(IllegalTransactionTransition):
        check_transition(S.EMPTY, S.PREPARE_COMMIT)  # nothing to commit
    with pytest.raises(IllegalTransactionTransition):
        check_transition(S.PREPARE_COMMIT, S.PREPARE_ABORT)  # the outcome is decided


def ongoing(epoch: int = 3, version: int = 1) -> TransactionMetadata:
    return TransactionMetadata("payments", 4000, producer_epoch=epoch, txn_timeout_ms=60_000,
                               state=S.ONGOING, topic_partitions={T0},
                               txn_start_timestamp_ms=100, txn_last_update_timestamp_ms=100,
                               client_transaction_version=version)


def test_a_prepared_transition_changes_nothing_but_the_pending_state_until_completed():
    txn = ongoing()
    transit = txn.prepare_abort_or_commit(S.PREPARE_COMMIT, 1, -1, 200,
                                          no_partition_added=False)
    assert (txn.state, txn.pending_state, txn.txn_last_update_timestamp_ms) == (
        S.ONGOING, S.PREPARE_COMMIT, 100)
    with pytest.raises(IllegalTransactionTransition):
        txn.prepare_add_partitions({T0}, 200, 1)  # one transition at a time
    txn.complete_transition(transit)
    assert (txn.state, txn.pending_state, txn.txn_last_update_timestamp_ms) == (
        S.PREPARE_COMMIT, None, 200)


def test_completing_a_transition_that_was_not_prepared_is_a_bug():
    txn = ongoing()
    transit = txn.prepare_abort_or_commit(S.PREPARE_ABORT, 1, -1, 200, no_partition_added=False)
    txn.pending_state = None
    with pytest.raises(IllegalTransactionTransition):
        txn.complete_transition(transit)


def test_transactions_v2_bump_the_epoch_when_preparing_and_an_exhausted_one_rotates_on_completion():
    txn = ongoing(epoch=32766, version=2)
    prepared = txn.prepare_abort_or_commit(S.PREPARE_COMMIT, 2, 4001, 200,
                                           no_partition_added=False)
    assert (prepared.producer_id, prepared.producer_epoch, prepared.last_producer_epoch,
            prepared.next_producer_id) == (4000, 32767, 32766, 4001)
    txn.complete_transition(prepared)
    completed = txn.prepare_complete(300)
    assert (completed.producer_id, completed.producer_epoch, completed.previous_producer_id,
            completed.next_producer_id, completed.topic_partitions) == (
        4001, 0, 4000, -1, frozenset())


def test_a_fence_bumps_the_epoch_once_and_forgets_the_last_one():
    txn = ongoing(epoch=3)
    txn.last_producer_epoch = 2
    fence = txn.prepare_epoch_fence_abort(-1, 200)
    assert (fence.state, fence.producer_epoch, fence.last_producer_epoch) == (
        S.PREPARE_ABORT, 4, -1)


class TestInitProducerIdEpochs:
    """KIP-360: InitProducerId with the producer's own epoch."""

    def empty(self) -> TransactionMetadata:
        return TransactionMetadata("payments", 4000, producer_epoch=5, last_producer_epoch=4,
                                   txn_timeout_ms=60_000)

    def test_without_an_expected_epoch_the_epoch_is_bumped_and_no_last_epoch_kept(self):
        transit = self.empty().prepare_increment_producer_epoch(60_000, None, 200)
        assert (transit.producer_epoch, transit.last_producer_epoch) == (6, -1)

    def test_the_current_epoch_is_bumped_and_kept_as_the_last_one(self):
        transit = self.empty().prepare_increment_producer_epoch(60_000, 5, 200)
        assert (transit.producer_epoch, transit.last_producer_epoch) == (6, 5)

    def test_the_last_epoch_is_a_retry_answered_with_the_current_epoch(self):
        transit = self.empty().prepare_increment_producer_epoch(60_000, 4, 200)
        assert (transit.producer_epoch, transit.last_producer_epoch) == (5, 4)

    def test_any_other_epoch_is_fenced(self):
        with pytest.raises(ProducerFenced):
            self.empty().prepare_increment_producer_epoch(60_000, 2, 200)
