"""AddPartitionsToTxn (and AddOffsetsToTxn, and transactions v2's implicit add), and the
verification a partition leader asks for before a transactional write (KIP-890 part 1)."""

from __future__ import annotations

from transaction_harness import FIRST_PRODUCER_ID, T0, T1, TXN, U0, E


def test_the_first_partition_starts_the_transaction(txns):
    producer = txns.init()
    txns.advance(500)

    assert txns.add(producer, T0) is E.none

    [description] = txns.coordinator.describe_transactions([TXN])
    assert (description.state, description.topic_partitions,
            description.transaction_start_time_ms) == ("Ongoing", (T0,), txns.now_ms)
    assert txns.logged()[-1] == ("Ongoing", FIRST_PRODUCER_ID, 0)


def test_more_partitions_join_the_transaction_which_keeps_its_start(txns):
    producer = txns.init()
    txns.add(producer, T0)
    started_ms = txns.now_ms
    txns.advance(500)

    assert txns.add(producer, T1, U0) is E.none

    assert txns.txn().topic_partitions == {T0, T1, U0}
    assert txns.txn().txn_start_timestamp_ms == started_ms


def test_partitions_already_in_the_transaction_are_answered_without_a_write(txns):
    producer = txns.init()
    txns.add(producer, T0, T1)
    written = len(txns.store.records())

    assert txns.add(producer, T1) is E.none
    assert len(txns.store.records()) == written


def test_every_partition_gets_the_answer(txns):
    producer = txns.init()
    assert txns.send_add(producer, T0, U0) == [{T0: E.none, U0: E.none}]


def test_a_transactional_id_never_initialized_has_no_producer_id_mapping(txns):
    txns.init()
    assert txns.add((FIRST_PRODUCER_ID, 0), T0, transactional_id="unknown") is \
        E.invalid_producer_id_mapping


def test_another_producer_id_has_no_mapping_and_an_older_epoch_is_fenced(txns):
    old = txns.init()
    new = txns.init()
    assert txns.add((4242, new[1]), T0) is E.invalid_producer_id_mapping
    assert txns.add(old, T0) is E.producer_fenced
    assert txns.add(new, T0) is E.none


def test_partitions_cannot_be_added_while_the_transaction_ends(txns):
    producer = txns.init()
    txns.add(producer, T0)
    txns.markers.hold = True
    txns.end(producer)

    assert txns.add(producer, T1) is E.concurrent_transactions
    txns.markers.release()
    assert txns.add(producer, T1) is E.none


def test_an_add_is_answered_once_written_and_another_meanwhile_is_asked_to_retry(txns):
    producer = txns.init()
    txns.store.hold = True
    first = txns.send_add(producer, T0)

    assert first == [] and txns.add(producer, T1) is E.concurrent_transactions
    txns.store.release()
    assert first == [{T0: E.none}]


def test_a_failed_write_adds_nothing(txns):
    producer = txns.init()
    txns.store.fail_with = E.request_timed_out
    assert txns.add(producer, T0) is E.coordinator_not_available
    assert txns.state() == "Empty"


class TestVerification:
    def test_partitions_of_the_ongoing_transaction_are_verified_and_others_refused(self, txns):
        producer = txns.init()
        txns.add(producer, T0)

        assert txns.coordinator.verify_partitions(TXN, *producer, {T0, T1}) == {
            T0: E.none, T1: E.invalid_txn_state}

    def test_a_verification_writes_nothing(self, txns):
        producer = txns.init()
        written = len(txns.store.records())
        txns.coordinator.verify_partitions(TXN, *producer, {T0})
        assert len(txns.store.records()) == written and txns.state() == "Empty"

    def test_a_write_of_a_finished_transaction_is_refused(self, txns):
        producer = txns.init()
        txns.add(producer, T0)
        txns.end(producer)

        assert txns.coordinator.verify_partitions(TXN, *producer, {T0}) == {
            T0: E.invalid_txn_state}

    def test_fencing_errors_are_kafkas(self, txns):
        old = txns.init()
        new = txns.init()
        txns.add(new, T0)
        verify = txns.coordinator.verify_partitions
        assert verify(TXN, *old, {T0}) == {T0: E.producer_fenced}
        assert verify(TXN, 4242, new[1], {T0}) == {T0: E.invalid_producer_id_mapping}
        assert verify("unknown", *new, {T0}) == {T0: E.invalid_producer_id_mapping}

    def test_a_transaction_being_completed_is_answered_concurrent_transactions(self, txns):
        producer = txns.init()
        txns.add(producer, T0)
        txns.markers.hold = True
        txns.end(producer)

        assert txns.coordinator.verify_partitions(TXN, *producer, {T0}) == {
            T0: E.concurrent_transactions}

    def test_an_id_coordinated_elsewhere_gets_not_coordinator(self, txns):
        producer = txns.init()
        txns.coordinator.on_resigned(txns.partition(), txns.store.leader_epoch)
        assert txns.coordinator.verify_partitions(TXN, *producer, {T0}) == {
            T0: E.not_coordinator}
