"""Transactions (KIP-98, with KIP-890's defences) over raw requests, for what no client
library sends on purpose: a write arriving after its transaction ended (the hole Jepsen
found, KAFKA-17754), a zombie at a fenced epoch, markers written by hand as
``kafka-transactions.sh abort`` writes them, a transaction left open past its timeout or
across a restart; and what consumers and admin tools read of transactions: the last stable
offset, the aborted transactions of a Fetch, DescribeProducers, ListTransactions,
DescribeTransactions and OffsetFetch's ``require_stable``.

Transactions v1 are the protocol of clients before Kafka 4 (AddPartitionsToTxn, Produce
v9, EndTxn v3); transactions v2 (KIP-890 part 2) that of Kafka 4's: EndTxn v5 bumps the
epoch, and Produce v12 and TxnOffsetCommit v5 add their partitions themselves.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from kio.schema.errors import ErrorCode
from raw_client import TRANSACTIONAL_KEY_TYPE, RawClient
from test_broker_process import SHUTDOWN_SECONDS, free_port, start_broker
from test_idempotent_producer import idempotent_batch

from odradek.coordinator.group.offsets_topic import OFFSETS_TOPIC, partition_for
from odradek.coordinator.transaction import TRANSACTION_STATE_TOPIC
from odradek.protocol.api import ApiKey
from odradek.protocol.control_records import read_end_txn_marker
from odradek.protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, iter_batches

T = TypeVar("T")

# Small internal topics, and a group's first rebalance at once: a test joins alone.
BROKER_CONFIGS = {
    "transaction_state_log_num_partitions": 4,
    "offsets_topic_num_partitions": 4,
    "group_initial_rebalance_delay_ms": 0,
}
pytestmark = pytest.mark.odradek_config(**BROKER_CONFIGS)

# On loopback markers and coordinator loads take milliseconds; this bounds a broken broker.
TIMEOUT_SECONDS = 10.0
POLL_SECONDS = 0.02

TRANSACTION_TIMEOUT_MS = 60_000  # longer than any test: only a test about timeouts sees one
MAX_TRANSACTION_TIMEOUT_MS = 15 * 60_000  # transaction.max.timeout.ms's default

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST = -1  # ListOffsets' timestamp of the log end (or, read_committed, the LSO)

# Transactions v1 as clients before Kafka 4 speak them, and v2 as Kafka 4's do.
ADD_PARTITIONS_VERSION = 3  # v4+ is the brokers' form
ADD_OFFSETS_VERSION = 3
END_TXN_V1_VERSION = 3
END_TXN_V2_VERSION = 5
PRODUCE_V1_VERSION = 9
PRODUCE_V2_VERSION = 12
TXN_OFFSET_COMMIT_V1_VERSION = 3  # the first with the consumer's group metadata (KIP-447)
TXN_OFFSET_COMMIT_V2_VERSION = 5
OFFSET_FETCH_VERSION = 8  # require_stable since v7 (KIP-447)
JOIN_GROUP_VERSION = 5
SYNC_GROUP_VERSION = 3


def poll_until(probe: Callable[[], T], done: Callable[[T], bool], what: str) -> T:
    """``probe()`` again until ``done`` of its result, at most TIMEOUT_SECONDS; returns it."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while not done(result := probe()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {TIMEOUT_SECONDS} s; last: {result}")
        time.sleep(POLL_SECONDS)
    return result


# -- a transactional producer, request by request ------------------------------------------


@dataclass
class TransactionalProducer:
    """A transactional producer's requests, by hand: its producer id and epoch, and the next
    sequence number of each partition (a new epoch starts every partition at 0)."""

    raw: RawClient
    transactional_id: str
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    next_sequence: dict[tuple[str, int], int] = field(default_factory=dict)

    def init(self, *, transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS
             ) -> TransactionalProducer:
        """InitProducerId (after FindCoordinator): a new epoch, or a new producer id."""
        response = self.raw.init_transactional_id(self.transactional_id,
                                                  transaction_timeout=transaction_timeout_ms)
        assert response.error_code == ErrorCode.none
        self._new_epoch(response.producer_id, response.producer_epoch)
        return self

    def init_again(self, version: int) -> Any:
        """InitProducerId with the producer's own id and epoch (KIP-360, v3+), as a producer
        recovering from an abortable error sends it."""
        return self.raw.init_producer_id(
            version, transactional_id=self.transactional_id,
            transaction_timeout=TRANSACTION_TIMEOUT_MS, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch)

    def _new_epoch(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.next_sequence.clear()

    def add_partitions(self, topic: str, *partitions: int,
                       version: int = ADD_PARTITIONS_VERSION) -> list[ErrorCode]:
        response = self.raw.request(
            ApiKey.ADD_PARTITIONS_TO_TXN, version,
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[{"name": topic, "partitions": list(partitions or (0,))}])
        return [p.partition_error_code for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition]

    def add_offsets(self, group_id: str, *, version: int = ADD_OFFSETS_VERSION) -> ErrorCode:
        return self.raw.request(
            ApiKey.ADD_OFFSETS_TO_TXN, version, transactional_id=self.transactional_id,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            group_id=group_id).error_code

    def write(self, topic: str, count: int = 1, *, partition: int = 0,
              version: int = PRODUCE_V1_VERSION, epoch: int | None = None,
              sequence: int | None = None) -> Any:
        """Produces ``count`` records in the transaction (at the producer's epoch and the
        partition's next sequence unless told otherwise); returns the partition's answer."""
        tp = (topic, partition)
        epoch = self.producer_epoch if epoch is None else epoch
        sequence = self.next_sequence.get(tp, 0) if sequence is None else sequence
        response = self.raw.produce(
            topic, idempotent_batch(self.producer_id, sequence, count, epoch=epoch,
                                    transactional=True),
            partition=partition, version=version, transactional_id=self.transactional_id)
        if response.error_code == ErrorCode.none and epoch == self.producer_epoch:
            self.next_sequence[tp] = sequence + count
        return response

    def commit_offsets(self, group_id: str, topic: str, offset: int, *,
                       version: int = TXN_OFFSET_COMMIT_V1_VERSION, generation_id: int = -1,
                       member_id: str = "") -> ErrorCode:
        """TxnOffsetCommit of ``offset`` for partition 0 of ``topic``."""
        response = self.raw.request(
            ApiKey.TXN_OFFSET_COMMIT, version, transactional_id=self.transactional_id,
            group_id=group_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, generation_id=generation_id,
            member_id=member_id, group_instance_id=None,
            topics=[{"name": topic, "partitions": [{
                "partition_index": 0, "committed_offset": offset,
                "committed_leader_epoch": -1, "committed_metadata": None}]}])
        [error] = [p.error_code for t in response.topics for p in t.partitions]
        return error

    def end_txn(self, *, commit: bool, version: int = END_TXN_V1_VERSION,
                epoch: int | None = None) -> Any:
        """EndTxn (at the producer's epoch unless told otherwise); from v5 the answer's id
        and epoch are the producer's from then on."""
        response = self.raw.request(
            ApiKey.END_TXN, version, transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch if epoch is None else epoch, committed=commit)
        if response.error_code == ErrorCode.none and version >= END_TXN_V2_VERSION:
            self._new_epoch(response.producer_id, response.producer_epoch)
        return response


# -- what admin tools and consumers ask -----------------------------------------------------


def describe_transaction(raw: RawClient, transactional_id: str) -> Any:
    response = raw.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[transactional_id])
    [state] = response.transaction_states
    return state


def wait_for_state(raw: RawClient, transactional_id: str, state: str) -> Any:
    """DescribeTransactions until the transaction is in ``state`` ("CompleteCommit" once
    every marker is written)."""
    return poll_until(lambda: describe_transaction(raw, transactional_id),
                      lambda described: described.transaction_state == state,
                      f"{transactional_id} in {state}")


def partitions_in(described: Any) -> set[tuple[str, int]]:
    return {(t.topic, p) for t in described.topics for p in t.partitions}


def list_transactions(raw: RawClient, *, states: list[str] = (),
                      producer_ids: list[int] = ()) -> Any:
    return raw.request(ApiKey.LIST_TRANSACTIONS, 1, state_filters=list(states),
                       producer_id_filters=list(producer_ids), duration_filter=-1)


def listed(response: Any) -> set[tuple[str, int, str]]:
    return {(t.transactional_id, t.producer_id, t.transaction_state)
            for t in response.transaction_states}


def active_producers(raw: RawClient, topic: str) -> list[Any]:
    response = raw.request(ApiKey.DESCRIBE_PRODUCERS, 0,
                           topics=[{"name": topic, "partition_indexes": [0]}])
    [partition] = response.topics[0].partitions
    assert partition.error_code == ErrorCode.none
    return list(partition.active_producers)


def write_txn_marker(raw: RawClient, topic: str, *, producer_id: int, producer_epoch: int,
                     coordinator_epoch: int, commit: bool) -> ErrorCode:
    """WriteTxnMarkers for partition 0 of ``topic``, sent to its leader as an admin tool
    aborting a hanging transaction sends it (``kafka-transactions.sh abort``)."""
    response = raw.request(ApiKey.WRITE_TXN_MARKERS, 1, markers=[{
        "producer_id": producer_id, "producer_epoch": producer_epoch,
        "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
        "topics": [{"name": topic, "partition_indexes": [0]}]}])
    [error] = [p.error_code for m in response.markers for t in m.topics for p in t.partitions]
    return error


def stable_offsets(raw: RawClient, topic: str) -> tuple[int, int]:
    """(high watermark, last stable offset) as ListOffsets answers read_uncommitted and
    read_committed consumers."""
    return (raw.list_offset(topic, LATEST, isolation_level=READ_UNCOMMITTED).offset,
            raw.list_offset(topic, LATEST, isolation_level=READ_COMMITTED).offset)


def stored_batches(raw: RawClient, topic: str) -> list[Any]:
    """Every batch of partition 0, control batches included, as a follower reads them."""
    return list(iter_batches(raw.fetch(topic, 0).records or b""))


def committed_offset(raw: RawClient, group_id: str, topic: str, *,
                     require_stable: bool) -> tuple[ErrorCode, int]:
    """(error, committed offset) of partition 0 of ``topic`` in ``group_id``."""
    response = raw.request(ApiKey.OFFSET_FETCH, OFFSET_FETCH_VERSION, require_stable=require_stable,
                           groups=[{"group_id": group_id,
                                    "topics": [{"name": topic, "partition_indexes": [0]}]}])
    [group] = response.groups
    assert group.error_code == ErrorCode.none
    [partition] = group.topics[0].partitions
    return partition.error_code, partition.committed_offset


def join_group(raw: RawClient, group_id: str) -> tuple[str, int]:
    """Joins ``group_id`` alone and syncs as its leader; returns (member id, generation)."""
    def join(member_id: str) -> Any:
        return raw.request(ApiKey.JOIN_GROUP, JOIN_GROUP_VERSION, group_id=group_id,
                           session_timeout=10_000, rebalance_timeout=10_000,
                           member_id=member_id, group_instance_id=None,
                           protocol_type="consumer",
                           protocols=[{"name": "range", "metadata": b""}])

    assert raw.wait_for_coordinator(group_id).error_code == ErrorCode.none
    first = join("")
    assert first.error_code == ErrorCode.member_id_required  # KIP-394
    joined = join(first.member_id)
    assert joined.error_code == ErrorCode.none
    synced = raw.request(ApiKey.SYNC_GROUP, SYNC_GROUP_VERSION, group_id=group_id,
                         generation_id=joined.generation_id, member_id=joined.member_id,
                         group_instance_id=None,
                         assignments=[{"member_id": joined.member_id, "assignment": b""}])
    assert synced.error_code == ErrorCode.none
    return joined.member_id, joined.generation_id


# -- ApiVersions, FindCoordinator, InitProducerId ------------------------------------------


def test_api_versions_advertises_transactions_v2_and_the_transaction_apis(odradek_broker):
    with RawClient(odradek_broker.port) as raw:
        response = raw.request(ApiKey.API_VERSIONS, 3, client_software_name="raw-client",
                               client_software_version="1")
    assert response.error_code == ErrorCode.none
    versions = {key.api_key: (key.min_version, key.max_version) for key in response.api_keys}
    assert {api: versions[api] for api in (
        ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN,
        ApiKey.WRITE_TXN_MARKERS, ApiKey.TXN_OFFSET_COMMIT, ApiKey.DESCRIBE_PRODUCERS,
        ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS)} == {
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5), ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
        ApiKey.END_TXN: (0, 5), ApiKey.WRITE_TXN_MARKERS: (1, 1),
        ApiKey.TXN_OFFSET_COMMIT: (0, 5), ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0), ApiKey.LIST_TRANSACTIONS: (0, 1)}
    assert versions[ApiKey.PRODUCE][1] == PRODUCE_V2_VERSION
    # KIP-584: transaction.version 2 is finalized, so Kafka 4 clients use transactions v2.
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
        ("transaction.version", 0, 2)]
    assert [(f.name, f.min_version_level, f.max_version_level)
            for f in response.finalized_features] == [("transaction.version", 2, 2)]
    assert response.finalized_features_epoch >= 0


def test_find_coordinator_of_a_transactional_id_creates_the_transaction_state_topic(
        odradek_broker):
    def transaction_state_topic(raw: RawClient) -> Any:
        [topic] = raw.request(ApiKey.METADATA, 12, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False,
                              topics=[{"name": TRANSACTION_STATE_TOPIC, "topic_id": None}]).topics
        return topic

    with RawClient(odradek_broker.port) as raw:
        before = transaction_state_topic(raw)
        found = raw.wait_for_coordinator("payments", key_type=TRANSACTIONAL_KEY_TYPE)
        after = transaction_state_topic(raw)
    assert before.error_code == ErrorCode.unknown_topic_or_partition
    assert (found.error_code, found.node_id, found.host, found.port) == (
        ErrorCode.none, odradek_broker.broker.node_id, "127.0.0.1", odradek_broker.port)
    assert (after.error_code, after.is_internal, len(after.partitions)) == (
        ErrorCode.none, True, BROKER_CONFIGS["transaction_state_log_num_partitions"])


def test_init_producer_id_bumps_the_epoch_of_a_transactional_id_and_keeps_its_producer_id(
        odradek_broker):
    with RawClient(odradek_broker.port) as raw:
        first = TransactionalProducer(raw, "payments").init()
        second = TransactionalProducer(raw, "payments").init()
        other = TransactionalProducer(raw, "refunds").init()
        # KIP-360: a producer passing its id and epoch gets the next epoch, and asking again
        # (the answer was lost) the same one.
        recovered = second.init_again(version=4)
        recovered_again = second.init_again(version=4)
    assert (first.producer_epoch, second.producer_epoch) == (0, 1)
    assert second.producer_id == first.producer_id
    assert (other.producer_id != first.producer_id, other.producer_epoch) == (True, 0)
    assert [(r.error_code, r.producer_id, r.producer_epoch)
            for r in (recovered, recovered_again)] == [(ErrorCode.none, first.producer_id, 2)] * 2


def test_a_transaction_timeout_above_the_maximum_is_refused(odradek_broker):
    with RawClient(odradek_broker.port) as raw:
        TransactionalProducer(raw, "patient").init()
        response = raw.init_producer_id(transactional_id="patient",
                                        transaction_timeout=MAX_TRANSACTION_TIMEOUT_MS + 1)
        allowed = raw.init_producer_id(transactional_id="patient",
                                       transaction_timeout=MAX_TRANSACTION_TIMEOUT_MS)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        ErrorCode.invalid_transaction_timeout, -1, -1)
    assert (allowed.error_code, allowed.producer_epoch) == (ErrorCode.none, 1)


def _zombie_add_partitions(zombie: TransactionalProducer, topic: str, version: int) -> ErrorCode:
    [error] = zombie.add_partitions(topic, version=version)
    return error


# What the producer fenced by a newer instance of its transactional id is told. KIP-588:
# PRODUCER_FENCED is new in InitProducerId v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
# v2; older versions are told INVALID_PRODUCER_EPOCH (Kafka's KafkaApis converts it), as is
# a Produce at a fenced epoch.
ZOMBIE_REQUESTS: dict[str, Callable[[TransactionalProducer, str, int], ErrorCode]] = {
    "InitProducerId": lambda zombie, topic, version: zombie.init_again(version).error_code,
    "AddPartitionsToTxn": _zombie_add_partitions,
    "AddOffsetsToTxn": lambda zombie, topic, version: zombie.add_offsets("zombies",
                                                                         version=version),
    "EndTxn": lambda zombie, topic, version: zombie.end_txn(commit=True,
                                                            version=version).error_code,
    "Produce": lambda zombie, topic, version: zombie.write(topic, version=version).error_code,
}


def _zombie_case(request_name: str, version: int, error: ErrorCode, *marks) -> Any:
    return pytest.param(request_name, version, error, marks=marks,
                        id=f"{request_name}-v{version}")


@pytest.mark.parametrize(("request_name", "version", "error"), [
    _zombie_case("InitProducerId", 4, ErrorCode.producer_fenced),
    _zombie_case("InitProducerId", 3, ErrorCode.invalid_producer_epoch),  # before KIP-588
    _zombie_case("AddPartitionsToTxn", 3, ErrorCode.producer_fenced),
    _zombie_case("AddPartitionsToTxn", 2, ErrorCode.producer_fenced),
    _zombie_case("AddPartitionsToTxn", 1, ErrorCode.invalid_producer_epoch),  # before KIP-588
    _zombie_case("AddOffsetsToTxn", 3, ErrorCode.producer_fenced),
    _zombie_case("AddOffsetsToTxn", 1, ErrorCode.invalid_producer_epoch),  # before KIP-588
    _zombie_case("EndTxn", END_TXN_V1_VERSION, ErrorCode.producer_fenced),
    _zombie_case("EndTxn", 1, ErrorCode.invalid_producer_epoch),  # before KIP-588
    _zombie_case("EndTxn", END_TXN_V2_VERSION, ErrorCode.producer_fenced),
    _zombie_case("Produce", PRODUCE_V1_VERSION, ErrorCode.invalid_producer_epoch),
    _zombie_case("Produce", PRODUCE_V2_VERSION, ErrorCode.invalid_producer_epoch),
])
def test_a_zombie_at_a_fenced_epoch_is_refused(odradek_broker, create_topic, request_name,
                                               version, error):
    topic = create_topic(f"zombie-{request_name}-{version}".lower())
    with RawClient(odradek_broker.port) as raw:
        zombie = TransactionalProducer(raw, "zombie").init()
        assert zombie.add_partitions(topic) == [ErrorCode.none]
        assert zombie.write(topic).error_code == ErrorCode.none
        # A new instance fences it: its transaction is aborted at epoch 1 while the new
        # instance is answered CONCURRENT_TRANSACTIONS, and asking again gets epoch 2.
        successor = TransactionalProducer(raw, "zombie").init()
        assert (successor.producer_id, successor.producer_epoch) == (zombie.producer_id, 2)
        end_offset = raw.list_offset(topic, LATEST).offset

        assert ZOMBIE_REQUESTS[request_name](zombie, topic, version) == error
        assert raw.list_offset(topic, LATEST).offset == end_offset  # nothing written
        # Nor did the zombie change the transactional id's state.
        assert listed(list_transactions(raw, producer_ids=[zombie.producer_id])) == {
            ("zombie", zombie.producer_id, "Empty")}


# -- KIP-890 part 1: a late write cannot start a transaction -------------------------------


def test_a_write_arriving_after_its_transaction_was_aborted_is_refused_and_written_nowhere(
        odradek_broker, create_topic):
    """KAFKA-17754 (Jepsen): a transactional write delayed past its transaction's abort, at
    the same epoch and the next sequence, used to start a new transaction nobody would end
    (a hanging transaction, the LSO stuck) or slip into the next one. The partition leader
    asks the coordinator first: the partition is in no ongoing transaction."""
    topic = create_topic("late-write")
    with RawClient(odradek_broker.port) as raw:
        producer = TransactionalProducer(raw, "late-writer").init()
        assert producer.add_partitions(topic) == [ErrorCode.none]
        aborted = producer.write(topic, 2)
        assert (aborted.error_code, aborted.base_offset) == (ErrorCode.none, 0)
        assert producer.end_txn(commit=False).error_code == ErrorCode.none
        wait_for_state(raw, "late-writer", "CompleteAbort")
        assert stable_offsets(raw, topic) == (3, 3)  # two records and the marker

        late = producer.write(topic)  # sequence 2: the abort marker did not reset it
        assert (late.error_code, late.base_offset) == (ErrorCode.invalid_txn_state, -1)
        assert stable_offsets(raw, topic) == (3, 3)
        assert [p.current_txn_start_offset for p in active_producers(raw, topic)] == [-1]

        # The next transaction takes the same sequence: the late write was never written.
        assert producer.add_partitions(topic) == [ErrorCode.none]
        following = producer.write(topic)
        assert (following.error_code, following.base_offset) == (ErrorCode.none, 3)

        committed = raw.fetch(topic, 0, isolation_level=READ_COMMITTED)
        uncommitted = raw.fetch(topic, 0, isolation_level=READ_UNCOMMITTED)
    assert (committed.high_watermark, committed.last_stable_offset) == (4, 3)
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [
        (producer.producer_id, 0)]
    assert [(b.base_offset, b.is_control_batch)
            for b in iter_batches(committed.records)] == [(0, False), (2, True)]
    assert uncommitted.aborted_transactions is None
    assert [b.base_offset for b in iter_batches(uncommitted.records)] == [0, 2, 3]


def test_a_retry_arriving_after_its_transaction_was_aborted_is_answered_as_the_duplicate_it_is(
        odradek_broker, create_topic):
    """A write the log has, sent again after its transaction ended (its first answer lost to
    a leader change), is answered with its offsets, as any retry of a written batch is. An
    error would tell the producer that it was not written: librdkafka then hands its
    sequence numbers to the next transaction's records, which the log takes for that retry
    again, answers as duplicates, and never writes, though their transaction commits."""
    topic = create_topic("late-retry")
    with RawClient(odradek_broker.port) as raw:
        producer = TransactionalProducer(raw, "late-retrier").init()
        assert producer.add_partitions(topic) == [ErrorCode.none]
        written = producer.write(topic, 2)
        assert (written.error_code, written.base_offset) == (ErrorCode.none, 0)
        assert producer.end_txn(commit=False).error_code == ErrorCode.none
        wait_for_state(raw, "late-retrier", "CompleteAbort")

        retry = producer.write(topic, 2, sequence=0)
        assert (retry.error_code, retry.base_offset) == (ErrorCode.none, 0)
        assert stable_offsets(raw, topic) == (3, 3)  # written once, then the marker

        # The next transaction goes on from the retried batch's sequence numbers.
        assert producer.add_partitions(topic) == [ErrorCode.none]
        following = producer.write(topic)
        assert (following.error_code, following.base_offset) == (ErrorCode.none, 3)


def test_a_transactional_batch_without_its_transactional_id_is_refused(odradek_broker,
                                                                       create_topic):
    topic = create_topic("anonymous")
    with RawClient(odradek_broker.port) as raw:
        producer = TransactionalProducer(raw, "anonymous").init()
        assert producer.add_partitions(topic) == [ErrorCode.none]
        assert producer.write(topic).error_code == ErrorCode.none
        anonymous = raw.produce(topic, idempotent_batch(producer.producer_id, 1,
                                                        transactional=True))
        end_offset = raw.list_offset(topic, LATEST).offset
    assert anonymous.error_code == ErrorCode.transactional_id_authorization_failed
    assert end_offset == 1


# -- KIP-890 part 2: transactions v2 ---------------------------------------------------------


def test_transactions_v2_add_partitions_on_write_and_bump_the_epoch_at_every_end(
        odradek_broker, create_topic):
    topic = create_topic("v2")
    group = "v2-group"
    with RawClient(odradek_broker.port) as raw:
        producer = TransactionalProducer(raw, "v2-writer").init()
        producer_id = producer.producer_id
        assert raw.wait_for_coordinator(group).error_code == ErrorCode.none

        # No AddPartitionsToTxn, no AddOffsetsToTxn: the writes add their partitions.
        written = producer.write(topic, 2, version=PRODUCE_V2_VERSION)
        assert (written.error_code, written.base_offset) == (ErrorCode.none, 0)
        assert producer.commit_offsets(group, topic, 2, version=TXN_OFFSET_COMMIT_V2_VERSION) \
            == ErrorCode.none
        ongoing = describe_transaction(raw, "v2-writer")
        assert (ongoing.transaction_state, ongoing.producer_epoch) == ("Ongoing", 0)
        assert partitions_in(ongoing) == {
            (topic, 0),
            (OFFSETS_TOPIC, partition_for(group, BROKER_CONFIGS["offsets_topic_num_partitions"]))}

        ended = producer.end_txn(commit=True, version=END_TXN_V2_VERSION)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
            ErrorCode.none, producer_id, 1)
        assert wait_for_state(raw, "v2-writer", "CompleteCommit").producer_epoch == 1

        # A write of the ended transaction arriving late: its epoch is older than the marker's.
        late = producer.write(topic, version=PRODUCE_V2_VERSION, epoch=0, sequence=2)
        assert late.error_code == ErrorCode.invalid_producer_epoch
        assert stable_offsets(raw, topic) == (3, 3)

        batches = stored_batches(raw, topic)
        assert [(b.base_offset, b.is_control_batch, b.producer_epoch) for b in batches] == [
            (0, False, 0), (2, True, 1)]
        marker = read_end_txn_marker(batches[1])
        assert marker.commit
        assert poll_until(lambda: committed_offset(raw, group, topic, require_stable=True),
                          lambda found: found[0] == ErrorCode.none,
                          "the committed offset") == (ErrorCode.none, 2)

        # The next transaction, at the new epoch, starts its sequences at 0.
        following = producer.write(topic, version=PRODUCE_V2_VERSION)
        assert (following.error_code, following.base_offset) == (ErrorCode.none, 3)
        assert describe_transaction(raw, "v2-writer").transaction_state == "Ongoing"


def test_transactions_v2_abort_bumps_the_epoch_of_the_markers_too(odradek_broker, create_topic):
    topic = create_topic("v2-abort")
    with RawClient(odradek_broker.port) as raw:
        producer = TransactionalProducer(raw, "v2-aborter").init()
        assert producer.write(topic, version=PRODUCE_V2_VERSION).error_code == ErrorCode.none
        ended = producer.end_txn(commit=False, version=END_TXN_V2_VERSION)
        assert (ended.error_code, ended.producer_epoch) == (ErrorCode.none, 1)
        wait_for_state(raw, "v2-aborter", "CompleteAbort")
        # Late, and from a client of the first protocol: fenced by the marker's epoch all the same.
        late = producer.write(topic, version=PRODUCE_V1_VERSION, epoch=0, sequence=1)
        committed = raw.fetch(topic, 0, isolation_level=READ_COMMITTED)
    assert late.error_code == ErrorCode.invalid_producer_epoch
    batches = list(iter_batches(committed.records))
    assert [(b.base_offset, b.is_control_batch, b.producer_epoch) for b in batches] == [
        (0, False, 0), (1, True, 1)]
    assert not read_end_txn_marker(batches[1]).commit
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [
        (producer.producer_id, 0)]


def test_end_txn_v5_retried_after_its_answer_was_lost_gets_the_same_answer(odradek_broker,
                                                                          create_topic):
    """The producer sent EndTxn at epoch 0 and never heard back; it asks again at epoch 0.
    The coordinator bumped the epoch already: the retry is recognised and answered with the
    bumped epoch, not fenced."""
    topic = create_topic("v2-retry")
    with RawClient(odradek_broker.port) as raw:
        producer = TransactionalProducer(raw, "v2-retrier").init()
        assert producer.write(topic, version=PRODUCE_V2_VERSION).error_code == ErrorCode.none
        first = producer.end_txn(commit=True, version=END_TXN_V2_VERSION)
        wait_for_state(raw, "v2-retrier", "CompleteCommit")
        retried = producer.end_txn(commit=True, version=END_TXN_V2_VERSION, epoch=0)
        batches = stored_batches(raw, topic)
    assert (first.error_code, first.producer_epoch) == (ErrorCode.none, 1)
    assert (retried.error_code, retried.producer_id, retried.producer_epoch) == (
        ErrorCode.none, producer.producer_id, 1)
    assert [b.is_control_batch for b in batches] == [False, True]  # one marker


def test_an_abort_with_nothing_to_abort_bumps_the_epoch_only_with_transactions_v2(
        odradek_broker):
    """KIP-890: with transactions v2 a producer cannot know whether a write of its added a
    partition, so an abort always ends a transaction and bumps the epoch; with v1 there is
    no transaction to end."""
    with RawClient(odradek_broker.port) as raw:
        producer = TransactionalProducer(raw, "empty-aborter").init()
        v1_abort = producer.end_txn(commit=False, version=END_TXN_V1_VERSION)
        v1_commit = producer.end_txn(commit=True, version=END_TXN_V1_VERSION)
        v2_abort = producer.end_txn(commit=False, version=END_TXN_V2_VERSION)
        described = wait_for_state(raw, "empty-aborter", "CompleteAbort")
    assert (v1_abort.error_code, v1_commit.error_code) == (ErrorCode.invalid_txn_state,) * 2
    assert (v2_abort.error_code, v2_abort.producer_id, v2_abort.producer_epoch) == (
        ErrorCode.none, producer.producer_id, 1)
    assert (described.producer_epoch, partitions_in(described)) == (1, set())


# -- the last stable offset ------------------------------------------------------------------


def test_read_committed_consumers_stop_at_the_first_offset_of_an_open_transaction(
        odradek_broker, create_topic):
    topic = create_topic("lso")
    with RawClient(odradek_broker.port) as raw:
        idempotent = raw.init_producer_id().producer_id
        assert raw.produce(topic, idempotent_batch(idempotent, 0, 2)).base_offset == 0
        producer = TransactionalProducer(raw, "lso-writer").init()
        assert producer.add_partitions(topic) == [ErrorCode.none]
        assert producer.write(topic, 3).base_offset == 2  # offsets 2..4, open
        assert raw.produce(topic, idempotent_batch(idempotent, 2)).base_offset == 5

        open_read = raw.fetch(topic, 0, isolation_level=READ_COMMITTED)
        assert (open_read.high_watermark, open_read.last_stable_offset) == (6, 2)
        assert [b.base_offset for b in iter_batches(open_read.records)] == [0]
        at_lso = raw.fetch(topic, 2, isolation_level=READ_COMMITTED)
        assert list(iter_batches(at_lso.records or b"")) == []
        assert stable_offsets(raw, topic) == (6, 2)
        assert raw.fetch(topic, 0).last_stable_offset == 2  # whatever the isolation level

        assert producer.end_txn(commit=True).error_code == ErrorCode.none
        wait_for_state(raw, "lso-writer", "CompleteCommit")
        closed_read = raw.fetch(topic, 0, isolation_level=READ_COMMITTED)
        assert stable_offsets(raw, topic) == (7, 7)  # the marker at 6
    assert (closed_read.high_watermark, closed_read.last_stable_offset) == (7, 7)
    assert [b.base_offset for b in iter_batches(closed_read.records)] == [0, 2, 5, 6]
    assert closed_read.aborted_transactions == ()


def test_the_last_stable_offset_waits_for_the_oldest_open_transaction(odradek_broker,
                                                                     create_topic):
    topic = create_topic("two-transactions")
    with RawClient(odradek_broker.port) as raw:
        first = TransactionalProducer(raw, "first").init()
        second = TransactionalProducer(raw, "second").init()
        for producer in (first, second):
            assert producer.add_partitions(topic) == [ErrorCode.none]
        assert first.write(topic, 2).base_offset == 0  # 0..1
        assert second.write(topic, 1).base_offset == 2
        assert stable_offsets(raw, topic) == (3, 0)

        assert first.end_txn(commit=True).error_code == ErrorCode.none
        wait_for_state(raw, "first", "CompleteCommit")  # its marker at 3
        assert stable_offsets(raw, topic) == (4, 2)
        assert second.end_txn(commit=False).error_code == ErrorCode.none
        wait_for_state(raw, "second", "CompleteAbort")  # its marker at 4
        idempotent = raw.init_producer_id().producer_id
        assert raw.produce(topic, idempotent_batch(idempotent, 0)).base_offset == 5
        assert stable_offsets(raw, topic) == (6, 6)

        # A read_committed Fetch names the aborted transactions its records overlap.
        overlapping = {offset: raw.fetch(topic, offset, isolation_level=READ_COMMITTED)
                       for offset in (0, 3, 4, 5)}
    assert {offset: [(a.producer_id, a.first_offset) for a in read.aborted_transactions]
            for offset, read in overlapping.items()} == {
        0: [(second.producer_id, 2)], 3: [(second.producer_id, 2)],
        4: [(second.producer_id, 2)], 5: []}
    assert [b.base_offset for b in iter_batches(overlapping[0].records)] == [0, 2, 3, 4, 5]


def _leave_an_aborted_and_an_open_transaction(raw: RawClient, topic: str
                                              ) -> TransactionalProducer:
    """Offsets 0..1 aborted (marker at 2), offset 3 in a transaction still open."""
    producer = TransactionalProducer(raw, "restarted").init()
    assert producer.add_partitions(topic) == [ErrorCode.none]
    assert producer.write(topic, 2).base_offset == 0
    assert producer.end_txn(commit=False).error_code == ErrorCode.none
    wait_for_state(raw, "restarted", "CompleteAbort")
    assert producer.add_partitions(topic) == [ErrorCode.none]
    assert producer.write(topic).base_offset == 3
    assert stable_offsets(raw, topic) == (4, 3)
    return producer


def _check_both_transactions_and_commit(raw: RawClient, producer: TransactionalProducer,
                                        topic: str) -> None:
    """After a restart: the open transaction still holds the LSO, the aborted one is still
    named to read_committed consumers, and the coordinator still knows the open one."""
    producer.raw = raw
    raw.wait_for_coordinator("restarted", key_type=TRANSACTIONAL_KEY_TYPE)
    assert stable_offsets(raw, topic) == (4, 3)
    read = raw.fetch(topic, 0, isolation_level=READ_COMMITTED)
    assert [(a.producer_id, a.first_offset) for a in read.aborted_transactions] == [
        (producer.producer_id, 0)]
    ongoing = describe_transaction(raw, "restarted")
    assert (ongoing.transaction_state, partitions_in(ongoing)) == ("Ongoing", {(topic, 0)})
    assert producer.end_txn(commit=True).error_code == ErrorCode.none
    wait_for_state(raw, "restarted", "CompleteCommit")
    assert stable_offsets(raw, topic) == (5, 5)


def test_open_and_aborted_transactions_outlive_a_clean_restart(odradek_broker, create_topic):
    """The partition loads its transactions from the snapshot and transaction index taken at
    the stop, the coordinator its transactional ids from ``__transaction_state``."""
    topic = create_topic("restarted")
    with RawClient(odradek_broker.port) as raw:
        producer = _leave_an_aborted_and_an_open_transaction(raw, topic)
    odradek_broker.restart()
    with RawClient(odradek_broker.port) as raw:
        _check_both_transactions_and_commit(raw, producer, topic)


def test_open_and_aborted_transactions_outlive_a_killed_broker(tmp_path):
    """SIGKILL: no snapshot at the stop; the partition replays its log to find the
    transactions again."""
    port = free_port()
    topic = "killed"
    broker = start_broker(tmp_path, port)
    try:
        with RawClient(port) as raw:
            created = raw.request(ApiKey.CREATE_TOPICS, 7, timeout=10_000, validate_only=False,
                                  topics=[{"name": topic, "num_partitions": 1,
                                           "replication_factor": 1, "assignments": [],
                                           "configs": []}])
            assert created.topics[0].error_code == ErrorCode.none
            producer = _leave_an_aborted_and_an_open_transaction(raw, topic)
        broker.send_signal(signal.SIGKILL)
        broker.wait(SHUTDOWN_SECONDS)

        broker = start_broker(tmp_path, port)
        with RawClient(port) as raw:
            _check_both_transactions_and_commit(raw, producer, topic)
    finally:
        broker.kill()
        broker.communicate(timeout=SHUTDOWN_SECONDS)


# -- DescribeProducers, ListTransactions, DescribeTransactions -------------------------------


def test_describe_producers_shows_where_the_open_transaction_started(odradek_broker,
                                                                     create_topic):
    topic = create_topic("producers")
    with RawClient(odradek_broker.port) as raw:
        idempotent = raw.init_producer_id().producer_id
        assert raw.produce(topic, idempotent_batch(idempotent, 0)).base_offset == 0
        producer = TransactionalProducer(raw, "described").init()
        assert producer.add_partitions(topic) == [ErrorCode.none]
        assert producer.write(topic, 2).base_offset == 1
        assert producer.write(topic, 2).base_offset == 3
        open_ = {p.producer_id: p for p in active_producers(raw, topic)}
        assert producer.end_txn(commit=True).error_code == ErrorCode.none
        wait_for_state(raw, "described", "CompleteCommit")
        ended = {p.producer_id: p for p in active_producers(raw, topic)}
    assert set(open_) == set(ended) == {idempotent, producer.producer_id}
    transactional = open_[producer.producer_id]
    assert (transactional.producer_epoch, transactional.last_sequence,
            transactional.current_txn_start_offset, transactional.coordinator_epoch) == (
        0, 3, 1, -1)
    assert open_[idempotent].current_txn_start_offset == -1
    assert (ended[producer.producer_id].current_txn_start_offset,
            ended[producer.producer_id].last_sequence) == (-1, 3)
    assert ended[producer.producer_id].coordinator_epoch >= 0  # the marker's


def test_list_transactions_filters_by_state_and_by_producer_id(odradek_broker, create_topic):
    topic = create_topic("listed")
    with RawClient(odradek_broker.port) as raw:
        ongoing = TransactionalProducer(raw, "ongoing").init()
        assert ongoing.add_partitions(topic) == [ErrorCode.none]
        done = TransactionalProducer(raw, "done").init()
        assert done.add_partitions(topic) == [ErrorCode.none]
        assert done.end_txn(commit=True).error_code == ErrorCode.none
        wait_for_state(raw, "done", "CompleteCommit")
        idle = TransactionalProducer(raw, "idle").init()

        everything = list_transactions(raw)
        by_state = list_transactions(raw, states=["Ongoing", "CompleteCommit"])
        unknown = list_transactions(raw, states=["Empty", "Hanging"])
        by_producer = list_transactions(raw, producer_ids=[done.producer_id, 123_456_789])
        both = list_transactions(raw, states=["Ongoing"], producer_ids=[done.producer_id])
    assert everything.error_code == ErrorCode.none
    assert listed(everything) == {("ongoing", ongoing.producer_id, "Ongoing"),
                                  ("done", done.producer_id, "CompleteCommit"),
                                  ("idle", idle.producer_id, "Empty")}
    assert everything.unknown_state_filters == ()
    assert listed(by_state) == {("ongoing", ongoing.producer_id, "Ongoing"),
                                ("done", done.producer_id, "CompleteCommit")}
    assert (listed(unknown), unknown.unknown_state_filters) == (
        {("idle", idle.producer_id, "Empty")}, ("Hanging",))
    assert listed(by_producer) == {("done", done.producer_id, "CompleteCommit")}
    assert listed(both) == set()


def test_describe_transactions_shows_an_ongoing_transaction(odradek_broker, create_topic):
    topic = create_topic("described-transaction")
    with RawClient(odradek_broker.port) as raw:
        producer = TransactionalProducer(raw, "known").init(transaction_timeout_ms=45_000)
        assert producer.add_partitions(topic, 0, 1) == [ErrorCode.none] * 2
        known = describe_transaction(raw, "known")
    assert (known.error_code, known.transaction_state, known.producer_id, known.producer_epoch,
            known.transaction_timeout.total_seconds()) == (
        ErrorCode.none, "Ongoing", producer.producer_id, 0, 45)
    assert abs(known.transaction_start_time.timestamp() - time.time()) < TIMEOUT_SECONDS
    assert partitions_in(known) == {(topic, 0), (topic, 1)}


def test_describe_transactions_of_an_unknown_id_is_transactional_id_not_found(odradek_broker):
    with RawClient(odradek_broker.port) as raw:
        raw.wait_for_coordinator("never-initialized", key_type=TRANSACTIONAL_KEY_TYPE)
        unknown = describe_transaction(raw, "never-initialized")
    assert (unknown.transactional_id, unknown.error_code) == (
        "never-initialized", ErrorCode.transactional_id_not_found)


# -- WriteTxnMarkers by hand ---------------------------------------------------------------


def test_an_admin_aborts_a_hanging_transaction_with_write_txn_markers(odradek_broker,
                                                                      create_topic):
    """A producer added the partition and wrote, then went away: its transaction holds the
    LSO back. ``kafka-transactions.sh abort`` reads the producer's epoch and coordinator epoch
    with DescribeProducers and sends the partition leader the ABORT marker itself."""
    topic = create_topic("hanging")
    with RawClient(odradek_broker.port) as raw:
        TransactionalProducer(raw, "hanging").init()
        hanging = TransactionalProducer(raw, "hanging").init()  # epoch 1: 0 is older
        assert hanging.add_partitions(topic) == [ErrorCode.none]
        assert hanging.write(topic, 2).base_offset == 0
        idempotent = raw.init_producer_id().producer_id
        assert raw.produce(topic, idempotent_batch(idempotent, 0)).base_offset == 2
        assert stable_offsets(raw, topic) == (3, 0)
        [state] = [p for p in active_producers(raw, topic)
                   if p.producer_id == hanging.producer_id]
        assert (state.producer_epoch, state.current_txn_start_offset) == (1, 0)
        coordinator_epoch = max(state.coordinator_epoch, 0)  # as the tool does

        stale = write_txn_marker(raw, topic, producer_id=hanging.producer_id, producer_epoch=0,
                                 coordinator_epoch=coordinator_epoch, commit=False)
        assert stale == ErrorCode.invalid_producer_epoch
        assert stable_offsets(raw, topic) == (3, 0)

        aborted = write_txn_marker(raw, topic, producer_id=hanging.producer_id,
                                   producer_epoch=state.producer_epoch,
                                   coordinator_epoch=coordinator_epoch, commit=False)
        assert aborted == ErrorCode.none
        assert stable_offsets(raw, topic) == (4, 4)
        committed = raw.fetch(topic, 0, isolation_level=READ_COMMITTED)
        [state] = [p for p in active_producers(raw, topic)
                   if p.producer_id == hanging.producer_id]
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [
        (hanging.producer_id, 0)]
    assert [(b.base_offset, b.is_control_batch) for b in iter_batches(committed.records)] == [
        (0, False), (2, False), (3, True)]
    assert state.current_txn_start_offset == -1


# -- offsets in transactions ---------------------------------------------------------------


def test_txn_offset_commit_fences_a_member_of_another_generation(odradek_broker, create_topic):
    """KIP-447: the producer passes its consumer's group metadata, so that a zombie whose
    consumer was rebalanced out cannot commit offsets in its transaction."""
    topic = create_topic("fenced-offsets")
    group = "fenced-group"
    with RawClient(odradek_broker.port) as raw:
        member_id, generation = join_group(raw, group)
        producer = TransactionalProducer(raw, "fenced-offsets").init()
        assert producer.add_offsets(group) == ErrorCode.none

        older = producer.commit_offsets(group, topic, 3, generation_id=generation - 1,
                                        member_id=member_id)
        newer = producer.commit_offsets(group, topic, 3, generation_id=generation + 1,
                                        member_id=member_id)
        stranger = producer.commit_offsets(group, topic, 3, generation_id=generation,
                                           member_id="stranger")
        member = producer.commit_offsets(group, topic, 3, generation_id=generation,
                                         member_id=member_id)
    assert (older, newer, stranger, member) == (
        ErrorCode.illegal_generation, ErrorCode.illegal_generation,
        ErrorCode.unknown_member_id, ErrorCode.none)


@pytest.mark.parametrize(("commit", "transactions_v2"), [
    (True, False), (False, False), (True, True)], ids=["commit", "abort", "commit-v2"])
def test_offset_fetch_requiring_stable_offsets_waits_out_a_transactional_commit(
        odradek_broker, create_topic, commit, transactions_v2):
    """KIP-447: an offset a transaction has committed but not yet ended is unstable; a
    consumer starting meanwhile retries (UNSTABLE_OFFSET_COMMIT) rather than resume from the
    offset before it."""
    topic = create_topic("stable-offsets")
    group = "stable-group"
    with RawClient(odradek_broker.port) as raw:
        assert raw.wait_for_coordinator(group).error_code == ErrorCode.none
        producer = TransactionalProducer(raw, "stable-offsets").init()
        if transactions_v2:  # TxnOffsetCommit adds the group's partition itself
            committed = producer.commit_offsets(group, topic, 5,
                                                version=TXN_OFFSET_COMMIT_V2_VERSION)
        else:
            assert producer.add_offsets(group) == ErrorCode.none
            committed = producer.commit_offsets(group, topic, 5)
        assert committed == ErrorCode.none

        pending_stable = committed_offset(raw, group, topic, require_stable=True)
        pending_any = committed_offset(raw, group, topic, require_stable=False)
        ended = producer.end_txn(
            commit=commit, version=END_TXN_V2_VERSION if transactions_v2 else END_TXN_V1_VERSION)
        assert ended.error_code == ErrorCode.none
        decided = poll_until(lambda: committed_offset(raw, group, topic, require_stable=True),
                             lambda found: found[0] != ErrorCode.unstable_offset_commit,
                             "the transaction's offsets to be decided")
    assert pending_stable == (ErrorCode.unstable_offset_commit, -1)
    assert pending_any == (ErrorCode.none, -1)
    assert decided == (ErrorCode.none, 5 if commit else -1)


# -- transaction timeouts ------------------------------------------------------------------


@pytest.mark.odradek_config(**BROKER_CONFIGS,
                            transaction_abort_timed_out_transaction_cleanup_interval_ms=100)
@pytest.mark.parametrize(("produce_version", "end_txn_version"), [
    (PRODUCE_V1_VERSION, END_TXN_V1_VERSION),
    (PRODUCE_V2_VERSION, END_TXN_V2_VERSION),
], ids=["transactions-v1", "transactions-v2"])
def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced(
        odradek_broker, create_topic, produce_version, end_txn_version):
    topic = create_topic("timed-out")
    with RawClient(odradek_broker.port) as raw:
        producer = TransactionalProducer(raw, "slow").init(transaction_timeout_ms=1000)
        if produce_version < PRODUCE_V2_VERSION:
            assert producer.add_partitions(topic) == [ErrorCode.none]
        assert producer.write(topic, 2, version=produce_version).base_offset == 0
        assert stable_offsets(raw, topic) == (2, 0)

        aborted = wait_for_state(raw, "slow", "CompleteAbort")
        assert (aborted.producer_id, aborted.producer_epoch) == (producer.producer_id, 1)
        assert stable_offsets(raw, topic) == (3, 3)
        late = producer.write(topic, version=produce_version)
        ended = producer.end_txn(commit=True, version=end_txn_version)
        batches = stored_batches(raw, topic)
    assert late.error_code == ErrorCode.invalid_producer_epoch
    assert [(b.base_offset, b.is_control_batch, b.producer_epoch) for b in batches] == [
        (0, False, 0), (2, True, 1)]
    assert not read_end_txn_marker(batches[1]).commit
    # Fenced (not INVALID_TXN_STATE, fatal to a producer): the application can start again.
    assert ended.error_code == ErrorCode.producer_fenced
