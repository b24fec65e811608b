"""What happens around requests: timeouts, coordinator moves, failed writes, expiration,
and what DescribeTransactions and ListTransactions show."""

from __future__ import annotations

import pytest
from transaction_harness import (
    FIRST_PRODUCER_ID,
    T0,
    T1,
    TIMEOUT_MS,
    TXN,
    E,
    Markers,
    Transactions,
    transit,
)

from odradek.coordinator.transaction.metadata import TransactionState

S = TransactionState
P = FIRST_PRODUCER_ID
DAY_MS = 24 * 3_600_000


class TestTimeouts:
    def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(self, txns):
        producer = txns.init()
        txns.add(producer, T0)
        txns.advance(TIMEOUT_MS)
        assert txns.coordinator.abort_timed_out_transactions() == 0  # not past it yet

        txns.advance(1)
        assert txns.coordinator.abort_timed_out_transactions() == 1

        assert txns.markers.written == [Markers(TXN, P, 1, False, 1, frozenset({T0}))]
        assert txns.state() == "CompleteAbort"
        assert txns.add(producer, T1) is E.producer_fenced
        assert txns.end(producer) == (E.producer_fenced, -1, -1)
        assert txns.init() == (P, 2)

    def test_transactions_not_ongoing_do_not_time_out(self, txns):
        producer = txns.init()
        txns.add(producer, T0)
        txns.markers.hold = True
        txns.end(producer)
        txns.advance(TIMEOUT_MS + 1)
        assert txns.coordinator.abort_timed_out_transactions() == 0

    def test_the_timeout_is_counted_from_the_first_partition(self, txns):
        producer = txns.init()
        txns.advance(TIMEOUT_MS)
        txns.add(producer, T0)
        txns.advance(TIMEOUT_MS // 2)
        txns.add(producer, T1)
        txns.advance(TIMEOUT_MS // 2 + 1)
        assert txns.coordinator.abort_timed_out_transactions() == 1

    def test_a_transactions_v2_abort_at_an_exhausted_epoch_moves_to_a_new_producer_id(self):
        txns = Transactions()
        txns.store_record(TXN, transit(S.ONGOING, 7, 32766, T0, version=2))
        txns = txns.restart()
        txns.advance(TIMEOUT_MS)

        assert txns.coordinator.abort_timed_out_transactions() == 1

        assert [(m.producer_id, m.producer_epoch) for m in txns.markers.written] == [(7, 32767)]
        assert (txns.txn().producer_id, txns.txn().producer_epoch) == (P, 0)


class TestCoordinatorMoves:
    def test_the_transactional_ids_survive_a_restart(self, txns):
        producer = txns.init()
        txns.add(producer, T0, T1)
        txns.init("other")

        restarted = txns.restart()

        assert restarted.state() == "Ongoing" and restarted.txn().topic_partitions == {T0, T1}
        assert restarted.end(producer) == (E.none, -1, -1)
        assert restarted.init("other") == (P + 1, 1)

    def test_a_transaction_left_prepared_is_completed_by_the_next_coordinator(self, txns):
        producer = txns.init()
        txns.add(producer, T0, T1)
        txns.markers.hold = True
        txns.end(producer)  # the coordinator dies while its markers are written

        restarted = txns.restart()

        assert restarted.markers.written == [
            Markers(TXN, P, 0, True, restarted.store.leader_epoch, frozenset({T0, T1}))]
        assert restarted.state() == "CompleteCommit"
        assert restarted.logged()[-1] == ("CompleteCommit", P, 0)

    def test_markers_completing_after_the_partition_moved_away_complete_nothing(self, txns):
        producer = txns.init()
        txns.add(producer, T0)
        txns.markers.hold = True
        txns.end(producer, commit=False)
        txns.coordinator.on_resigned(txns.partition(), txns.store.leader_epoch)

        txns.markers.release()

        assert txns.logged()[-1] == ("PrepareAbort", P, 0)  # left to the new coordinator

    def test_a_moved_partition_answers_not_coordinator_and_comes_back_when_elected(self, txns):
        producer = txns.init()
        txns.add(producer, T0)
        txns.coordinator.on_resigned(txns.partition(), txns.store.leader_epoch)

        assert txns.add(producer, T1) is E.not_coordinator
        assert txns.end(producer) == (E.not_coordinator, -1, -1)
        assert txns.state() == "not_coordinator"

        txns.coordinator.on_elected(txns.partition(), txns.store.leader_epoch + 1)
        assert txns.add(producer, T1) is E.none

    def test_a_write_completing_after_the_partition_moved_is_answered_not_coordinator(self, txns):
        producer = txns.init()
        txns.store.hold = True
        answers = txns.send_add(producer, T0)
        txns.coordinator.on_resigned(txns.partition(), txns.store.leader_epoch)
        txns.coordinator.on_elected(txns.partition(), txns.store.leader_epoch + 1)

        txns.store.release()

        assert answers == [{T0: E.not_coordinator}]

    def test_a_resignation_older_than_the_election_is_ignored(self, txns):
        txns.coordinator.on_elected(txns.partition(), txns.store.leader_epoch + 1)
        txns.coordinator.on_resigned(txns.partition(), txns.store.leader_epoch)
        assert txns.init() == (P, 0)

    def test_a_transaction_being_fenced_when_the_coordinator_died_is_aborted(self, txns):
        txns.store_record(TXN, transit(S.PREPARE_EPOCH_FENCE, 7, 4, T0))

        restarted = txns.restart()

        assert restarted.markers.written == [
            Markers(TXN, 7, 5, False, restarted.store.leader_epoch, frozenset({T0}))]
        assert restarted.state() == "CompleteAbort"

    def test_the_last_record_of_an_id_wins_and_a_tombstone_deletes_it(self, txns):
        txns.store_record("gone", transit(S.EMPTY, 8, 0))
        txns.store_record("gone", None)
        txns.store_record("kept", transit(S.EMPTY, 9, 0))
        txns.store_record("kept", transit(S.EMPTY, 9, 1))

        restarted = txns.restart()

        assert restarted.state("gone") == "transactional_id_not_found"
        assert restarted.coordinator.describe_transactions(["kept"])[0].producer_epoch == 1

    def test_a_record_this_broker_cannot_read_is_skipped(self, txns):
        txns.store.logs[txns.partition()].append((b"\x00\x07junk", b""))
        producer = txns.init()
        assert txns.restart().txn().producer_id == producer[0]


class TestFailedWrites:
    @pytest.mark.parametrize(("append_error", "answer"), [
        (E.not_enough_replicas, E.coordinator_not_available),
        (E.not_enough_replicas_after_append, E.coordinator_not_available),
        (E.request_timed_out, E.coordinator_not_available),
        (E.unknown_topic_or_partition, E.coordinator_not_available),
        (E.not_leader_or_follower, E.not_coordinator),
        (E.kafka_storage_error, E.not_coordinator),
        (E.message_too_large, E.unknown_server_error),
        (E.record_list_too_large, E.unknown_server_error),
    ])
    def test_a_failed_write_is_answered_with_kafkas_coordinator_error(self, txns, append_error,
                                                                      answer):
        producer = txns.init()
        txns.store.fail_with = append_error
        assert txns.add(producer, T0) is answer
        assert txns.send_init() == [(answer, -1, -1)]

    def test_a_completion_that_cannot_be_written_is_written_again_later(self, txns):
        producer = txns.init()
        txns.add(producer, T0)
        txns.markers.hold = True
        txns.end(producer)
        txns.store.fail_with = E.not_enough_replicas
        txns.markers.release()
        assert txns.state() == "PrepareCommit"
        assert txns.end(producer) == (E.concurrent_transactions, -1, -1)

        txns.store.fail_with = None
        txns.coordinator.retry_completions()

        assert txns.state() == "CompleteCommit"
        assert len(txns.markers.written) == 1


class TestExpiration:
    def test_an_id_unused_for_its_expiration_is_removed_with_a_tombstone(self, txns):
        producer = txns.init()
        txns.add(producer, T0)
        txns.end(producer)
        txns.advance(7 * DAY_MS - 1)
        assert txns.coordinator.remove_expired_transactional_ids() == 0

        txns.advance(1)
        assert txns.coordinator.remove_expired_transactional_ids() == 1

        assert txns.state() == "transactional_id_not_found"
        assert txns.logged()[-1] is None
        assert txns.restart().state() == "transactional_id_not_found"

    def test_an_ongoing_transaction_does_not_expire(self, txns):
        producer = txns.init()
        txns.add(producer, T0)
        txns.advance(7 * DAY_MS)
        assert txns.coordinator.remove_expired_transactional_ids() == 0

    def test_an_id_whose_tombstone_cannot_be_written_stays(self, txns):
        txns.init()
        txns.advance(7 * DAY_MS)
        txns.store.fail_with = E.not_enough_replicas
        txns.coordinator.remove_expired_transactional_ids()

        assert txns.state() == "Empty"
        txns.store.fail_with = None
        assert txns.init() == (P, 1)

    def test_an_id_used_while_its_tombstone_is_written_is_asked_to_retry_then_starts_anew(
            self, txns):
        txns.init()
        txns.advance(7 * DAY_MS)
        txns.store.hold = True
        txns.coordinator.remove_expired_transactional_ids()

        assert txns.send_init() == [(E.concurrent_transactions, -1, -1)]
        txns.store.hold = False
        txns.store.release()
        assert txns.init() == (P + 1, 0)


class TestAdmin:
    def test_describe_shows_the_transaction_as_kafkas_tools_print_it(self, txns):
        producer = txns.init()
        txns.add(producer, T1, T0)
        [described, unknown, empty] = txns.coordinator.describe_transactions(
            [TXN, "unknown", ""])
        assert (described.error, described.state, described.producer_id,
                described.producer_epoch, described.transaction_timeout_ms,
                described.transaction_start_time_ms, described.topic_partitions) == (
            E.none, "Ongoing", P, 0, TIMEOUT_MS, txns.now_ms, (T0, T1))
        assert (unknown.error, empty.error) == (E.transactional_id_not_found, E.invalid_request)

    def test_list_filters_by_state_producer_and_duration(self, txns):
        ongoing = txns.init("ongoing")
        txns.add(ongoing, T0, transactional_id="ongoing")
        txns.init("empty")
        txns.advance(5_000)
        coordinator = txns.coordinator

        everything = coordinator.list_transactions(set(), set())
        assert {(t.transactional_id, t.state) for t in everything.transactions} == {
            ("ongoing", "Ongoing"), ("empty", "Empty")}
        by_state = coordinator.list_transactions({"Ongoing", "Bogus"}, set())
        assert [t.transactional_id for t in by_state.transactions] == ["ongoing"]
        assert by_state.unknown_state_filters == ("Bogus",)
        by_producer = coordinator.list_transactions(set(), {P + 1})
        assert [t.transactional_id for t in by_producer.transactions] == ["empty"]
        # KIP-994: running for longer than the duration (a transaction not started counts as
        # running since forever, as in Kafka).
        assert coordinator.list_transactions({"Ongoing"}, set(), 5_000).transactions == ()
        assert len(coordinator.list_transactions({"Ongoing"}, set(), 4_999).transactions) == 1

    def test_a_coordinator_shut_down_is_not_available(self, txns):
        producer = txns.init()
        txns.coordinator.shutdown()
        assert txns.add(producer, T0) is E.coordinator_not_available
        assert txns.coordinator.list_transactions(set(), set()).error is \
            E.coordinator_not_available
        assert txns.state() == "coordinator_not_available"
