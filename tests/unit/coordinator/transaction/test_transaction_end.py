"""EndTxn: the outcome written, the producer answered, the markers written, the transaction
completed; with transactions v1 and with transactions v2 (KIP-890 part 2)."""

from __future__ import annotations

import pytest
from transaction_harness import (
    FIRST_PRODUCER_ID,
    T0,
    T1,
    TXN,
    E,
    Markers,
    Transactions,
    transit,
)

from odradek.coordinator.transaction.metadata import TransactionState

S = TransactionState
P = FIRST_PRODUCER_ID
V2 = 2


def ongoing(txns: Transactions, *partitions, version: int = 1) -> tuple[int, int]:
    producer = txns.init()
    assert txns.add(producer, *(partitions or (T0, T1)), version=version) is E.none
    return producer


class TestTransactionsV1:
    @pytest.mark.parametrize(("commit", "prepared", "completed"), [
        (True, "PrepareCommit", "CompleteCommit"), (False, "PrepareAbort", "CompleteAbort")])
    def test_the_outcome_is_written_then_the_markers_then_the_completion(
            self, txns, commit, prepared, completed):
        producer = ongoing(txns)

        assert txns.end(producer, commit) == (E.none, -1, -1)

        assert txns.markers.written == [
            Markers(TXN, P, 0, commit, txns.store.leader_epoch, frozenset({T0, T1}))]
        assert txns.logged()[-2:] == [(prepared, P, 0), (completed, P, 0)]
        assert txns.state() == completed and txns.txn().topic_partitions == set()

    def test_the_producer_is_answered_once_the_outcome_is_written_before_the_markers(self, txns):
        producer = ongoing(txns)
        txns.markers.hold = True

        assert txns.end(producer) == (E.none, -1, -1)
        assert txns.state() == "PrepareCommit"

        txns.markers.release()
        assert txns.state() == "CompleteCommit"

    def test_the_producer_waits_for_the_outcome_to_be_written(self, txns):
        producer = ongoing(txns)
        txns.store.hold = True
        answers = txns.send_end(producer)
        assert answers == [] and txns.markers.written == []
        txns.store.hold = False
        txns.store.release()
        assert answers == [(E.none, -1, -1)] and txns.state() == "CompleteCommit"

    def test_a_retried_end_is_answered_as_the_first_was(self, txns):
        producer = ongoing(txns)
        txns.markers.hold = True
        txns.end(producer)

        assert txns.end(producer) == (E.concurrent_transactions, -1, -1)  # still completing
        txns.markers.release()
        assert txns.end(producer) == (E.none, -1, -1)
        assert len(txns.markers.written) == 1

    @pytest.mark.parametrize("commit", [True, False])
    def test_the_other_outcome_after_one_is_decided_is_an_invalid_state(self, txns, commit):
        producer = ongoing(txns)
        txns.markers.hold = True
        txns.end(producer, commit)

        # While the markers are written nothing is answered but "retry" (as Kafka does).
        assert txns.end(producer, not commit) == (E.concurrent_transactions, -1, -1)
        txns.markers.release()
        assert txns.end(producer, not commit) == (E.invalid_txn_state, -1, -1)

    def test_ending_a_transaction_without_partitions_is_an_invalid_state(self, txns):
        producer = txns.init()
        assert txns.end(producer) == (E.invalid_txn_state, -1, -1)
        assert txns.end(producer, commit=False) == (E.invalid_txn_state, -1, -1)

    def test_a_fenced_producer_and_an_unknown_one_are_refused(self, txns):
        old = ongoing(txns)
        txns.end(old)
        new = txns.init()
        assert txns.end(old) == (E.producer_fenced, -1, -1)
        assert txns.end((4242, new[1])) == (E.invalid_producer_id_mapping, -1, -1)
        assert txns.end(new, transactional_id="unknown") == (
            E.invalid_producer_id_mapping, -1, -1)

    def test_an_outcome_that_cannot_be_written_leaves_the_transaction_ongoing(self, txns):
        producer = ongoing(txns)
        txns.store.fail_with = E.not_leader_or_follower
        assert txns.end(producer) == (E.not_coordinator, -1, -1)
        assert txns.state() == "Ongoing" and txns.markers.written == []
        txns.store.fail_with = None
        assert txns.end(producer) == (E.none, -1, -1)

    def test_a_partition_can_start_the_next_transaction_once_the_last_is_complete(self, txns):
        producer = ongoing(txns)
        txns.end(producer)
        assert txns.add(producer, T0) is E.none
        assert txns.end(producer, commit=False) == (E.none, -1, -1)
        assert [m.commit for m in txns.markers.written] == [True, False]


class TestTransactionsV2:
    def test_every_end_bumps_the_epoch_which_the_markers_carry(self, txns):
        producer = ongoing(txns, version=V2)

        assert txns.end(producer, version=V2) == (E.none, P, 1)

        [markers] = txns.markers.written
        assert (markers.producer_id, markers.producer_epoch) == (P, 1)
        assert txns.logged()[-2:] == [("PrepareCommit", P, 1), ("CompleteCommit", P, 1)]
        # The next transaction goes on with the new epoch; a late write at the old one is fenced.
        assert txns.add((P, 1), T0, version=V2) is E.none
        assert txns.add((P, 0), T0, version=V2) is E.producer_fenced

    def test_a_retried_end_whose_answer_was_lost_gets_the_current_epoch(self, txns):
        producer = ongoing(txns, version=V2)
        txns.end(producer, version=V2)

        assert txns.end(producer, version=V2) == (E.none, P, 1)
        assert txns.end(producer, commit=False, version=V2) == (E.invalid_txn_state, -1, -1)
        assert len(txns.markers.written) == 1

    def test_a_retry_while_the_markers_are_written_is_asked_to_retry_again(self, txns):
        producer = ongoing(txns, version=V2)
        txns.markers.hold = True
        txns.end(producer, version=V2)

        assert txns.end(producer, version=V2) == (E.concurrent_transactions, -1, -1)
        assert txns.end((P, 1), version=V2) == (E.producer_fenced, -1, -1)  # not yet its turn
        txns.markers.release()
        assert txns.end(producer, version=V2) == (E.none, P, 1)

    def test_the_current_epoch_ending_a_completed_transaction_again_is_not_a_retry(self, txns):
        producer = ongoing(txns, version=V2)
        txns.end(producer, version=V2)
        assert txns.end((P, 1), version=V2) == (E.invalid_txn_state, -1, -1)
        assert txns.end((P, 2), version=V2) == (E.producer_fenced, -1, -1)

    def test_an_abort_with_no_partition_added_bumps_the_epoch_without_markers(self, txns):
        producer = txns.init()

        assert txns.end(producer, commit=False, version=V2) == (E.none, P, 1)

        assert txns.markers.written == []
        assert txns.logged()[-2:] == [("PrepareAbort", P, 1), ("CompleteAbort", P, 1)]
        # After a completed transaction too: the client cannot know whether a partition
        # leader added a partition for it.
        assert txns.end((P, 1), commit=False, version=V2) == (E.none, P, 2)

    def test_a_commit_with_no_partition_added_is_an_invalid_state(self, txns):
        producer = txns.init()
        assert txns.end(producer, version=V2) == (E.invalid_txn_state, -1, -1)

    def test_an_exhausted_epoch_moves_to_a_new_producer_id_when_the_transaction_ends(self):
        txns = Transactions()
        txns.store_record(TXN, transit(S.ONGOING, 7, 32766, T0, version=V2))
        txns = txns.restart()

        assert txns.end((7, 32766), version=V2) == (E.none, P, 0)

        [markers] = txns.markers.written
        assert (markers.producer_id, markers.producer_epoch) == (7, 32767)
        assert txns.logged()[-2:] == [("PrepareCommit", 7, 32767), ("CompleteCommit", P, 0)]
        # Its retry is recognised by the previous producer id.
        assert txns.end((7, 32766), version=V2) == (E.none, P, 0)
        assert txns.add((P, 0), T1, version=V2) is E.none

    def test_the_new_producer_id_is_asked_to_wait_while_the_last_transaction_completes(self):
        txns = Transactions()
        txns.store_record(TXN, transit(S.ONGOING, 7, 32766, T0, version=V2))
        txns = txns.restart()
        txns.markers.hold = True

        assert txns.end((7, 32766), version=V2) == (E.none, P, 0)
        # Not INVALID_PRODUCER_ID_MAPPING, which the producer could not recover from.
        assert txns.add((P, 0), T1, version=V2) is E.concurrent_transactions
        txns.markers.release()
        assert txns.add((P, 0), T1, version=V2) is E.none

    def test_an_exhausted_epoch_without_a_new_producer_id_is_asked_to_retry(self):
        txns = Transactions()
        txns.store_record(TXN, transit(S.ONGOING, 7, 32766, T0, version=V2))
        txns = txns.restart()
        txns.producer_ids.available = False

        assert txns.end((7, 32766), version=V2) == (E.coordinator_load_in_progress, -1, -1)
        assert txns.state() == "Ongoing"
        txns.producer_ids.available = True
        assert txns.end((7, 32766), version=V2) == (E.none, P, 0)
