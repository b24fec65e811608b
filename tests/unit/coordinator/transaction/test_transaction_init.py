"""InitProducerId: a producer id and epoch for a transactional id, fencing earlier producers."""

from __future__ import annotations

import pytest
from transaction_harness import FIRST_PRODUCER_ID, T0, TXN, E, Transactions, transit

from odradek.coordinator.transaction.metadata import TransactionState

S = TransactionState


def test_a_new_transactional_id_gets_a_fresh_producer_id_at_epoch_0(txns):
    assert txns.init() == (FIRST_PRODUCER_ID, 0)
    assert txns.state() == "Empty"
    assert txns.logged() == [("Empty", FIRST_PRODUCER_ID, 0)]


def test_each_new_producer_of_the_id_gets_the_next_epoch_of_the_same_producer_id(txns):
    assert txns.init() == (FIRST_PRODUCER_ID, 0)
    assert txns.init() == (FIRST_PRODUCER_ID, 1)
    assert txns.init() == (FIRST_PRODUCER_ID, 2)
    assert txns.init("another") == (FIRST_PRODUCER_ID + 1, 0)


def test_a_new_producer_aborts_the_ongoing_transaction_of_the_old_one_and_is_asked_to_retry(txns):
    old = txns.init()
    assert txns.add(old, T0) is E.none

    assert txns.send_init() == [(E.concurrent_transactions, -1, -1)]

    # Aborted with the epoch bumped: the old producer's late writes are fenced by the marker.
    [markers] = txns.markers.written
    assert (markers.producer_epoch, markers.commit, markers.partitions) == (1, False, {T0})
    assert txns.state() == "CompleteAbort"
    assert txns.init() == (FIRST_PRODUCER_ID, 2)
    assert txns.add(old, T0) is E.producer_fenced


def test_the_fencing_abort_is_answered_before_its_markers_are_written(txns):
    old = txns.init()
    txns.add(old, T0)
    txns.markers.hold = True

    assert txns.send_init() == [(E.concurrent_transactions, -1, -1)]
    assert txns.send_init() == [(E.concurrent_transactions, -1, -1)]  # still aborting

    txns.markers.release()
    assert txns.init() == (FIRST_PRODUCER_ID, 2)


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_a_timeout_outside_1_to_transaction_max_timeout_ms_is_refused(txns, timeout_ms):
    assert txns.send_init(timeout_ms=timeout_ms) == [(E.invalid_transaction_timeout, -1, -1)]
    assert txns.init(timeout_ms=900_000) == (FIRST_PRODUCER_ID, 0)


def test_an_exhausted_epoch_moves_the_id_to_a_new_producer_id_at_epoch_0():
    txns = Transactions()
    txns.store_record(TXN, transit(S.COMPLETE_COMMIT, 7, 32766))
    txns = txns.restart()

    assert txns.init() == (FIRST_PRODUCER_ID, 0)
    assert txns.txn().previous_producer_id == 7


class TestKip360:
    """InitProducerId v3+: a producer recovering from an error gives its id and epoch."""

    def test_the_current_producer_keeps_its_id_with_the_next_epoch(self, txns):
        producer_id, epoch = txns.init()
        txns.init()  # another producer took over: epoch 1
        assert txns.send_init(producer_id=producer_id, epoch=epoch) == [
            (E.producer_fenced, -1, -1)]
        assert txns.init(producer_id=producer_id, epoch=1) == (producer_id, 2)

    def test_a_retry_of_a_bump_whose_answer_was_lost_gets_the_same_epoch(self, txns):
        producer_id, _ = txns.init()
        assert txns.init(producer_id=producer_id, epoch=0) == (producer_id, 1)
        assert txns.init(producer_id=producer_id, epoch=0) == (producer_id, 1)

    def test_another_producer_id_is_fenced(self, txns):
        txns.init()
        assert txns.send_init(producer_id=4242, epoch=0) == [(E.producer_fenced, -1, -1)]

    def test_an_id_and_epoch_not_given_together_are_refused(self, txns):
        assert txns.send_init(producer_id=7, epoch=-1) == [(E.invalid_request, -1, -1)]

    def test_the_retry_of_a_rotation_whose_answer_was_lost_gets_the_new_producer_id(self):
        txns = Transactions()
        txns.store_record(TXN, transit(S.COMPLETE_ABORT, 7, 32766))
        txns = txns.restart()

        assert txns.init(producer_id=7, epoch=32766) == (FIRST_PRODUCER_ID, 0)
        assert txns.init(producer_id=7, epoch=32766) == (FIRST_PRODUCER_ID, 0)


def test_a_transaction_being_completed_is_answered_concurrent_transactions(txns):
    producer = txns.init()
    txns.add(producer, T0)
    txns.markers.hold = True
    txns.end(producer)

    assert txns.send_init() == [(E.concurrent_transactions, -1, -1)]


def test_without_a_producer_id_to_give_the_producer_is_asked_to_retry(txns):
    txns.producer_ids.available = False
    assert txns.send_init() == [(E.coordinator_load_in_progress, -1, -1)]
    txns.producer_ids.available = True
    assert txns.init() == (FIRST_PRODUCER_ID, 0)


def test_an_init_waits_for_its_producer_id(txns):
    txns.producer_ids.hold = True
    answers = txns.send_init()
    assert answers == [] and txns.state() == "transactional_id_not_found"
    txns.producer_ids.release()
    assert answers == [(E.none, FIRST_PRODUCER_ID, 0)]


def test_an_init_answered_once_its_epoch_is_written_and_not_before(txns):
    txns.init()
    txns.store.hold = True
    answers = txns.send_init()
    assert answers == [] and txns.send_init() == [(E.concurrent_transactions, -1, -1)]
    txns.store.release()
    assert answers == [(E.none, FIRST_PRODUCER_ID, 1)]


def test_an_epoch_that_cannot_be_written_is_not_given_and_nothing_changes(txns):
    txns.init()
    txns.store.fail_with = E.not_enough_replicas
    assert txns.send_init() == [(E.coordinator_not_available, -1, -1)]
    txns.store.fail_with = None
    assert txns.init() == (FIRST_PRODUCER_ID, 1)


def test_an_empty_transactional_id_is_refused(txns):
    assert txns.send_init("") == [(E.invalid_request, -1, -1)]


def test_a_transactional_id_coordinated_elsewhere_gets_not_coordinator(txns):
    txns.coordinator.on_resigned(txns.partition(), txns.store.leader_epoch)
    assert txns.send_init() == [(E.not_coordinator, -1, -1)]


def test_a_coordinator_not_started_is_not_available():
    txns = Transactions()
    txns.coordinator.shutdown()
    assert txns.send_init() == [(E.coordinator_not_available, -1, -1)]
