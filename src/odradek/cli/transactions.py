"""``odradek transactions``: list, describe and abort transactions and describe the producers
of a partition, as Kafka's ``kafka-transactions.sh`` does (KIP-664).

librdkafka's admin client has none of these APIs, so the CLI speaks them itself over
``odradek.client.BrokerConnection``, as ``odradek.cli.reassignments`` does:

- ``list``: ListTransactions to every broker, since each coordinates only the transactional
  ids of the ``__transaction_state`` partitions it leads; the answers are merged, as Kafka's
  admin client merges them;
- ``describe``: FindCoordinator (key type 1) to any broker, then DescribeTransactions to the
  coordinator it names;
- ``describe-producers``: DescribeProducers to the partition's leader;
- ``abort``: WriteTxnMarkers with an abort marker to the partition's leader, for the
  producer whose open transaction starts at the given offset (found with DescribeProducers)
  or for one named outright. This ends a *hanging* transaction: one its coordinator will
  never end in that partition, whose first offset holds back the partition's
  last_stable_offset, so that read_committed consumers stop there.

Errors that Kafka's admin client retries (a coordinator or leader that moved, or one still
loading its state) are retried a bounded number of times; any other error, and a broker
that cannot be reached, is one error line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any, Optional, TypeVar

import typer
from confluent_kafka import KafkaError
from kio.schema.errors import ErrorCode

from odradek.cli import output
from odradek.cli.arguments import DEFAULT_BOOTSTRAP_SERVERS, BootstrapServers, ClientProperties
from odradek.cli.broker_requests import (
    BrokerAddress,
    client_security,
    describe_error,
    exchange,
    kafka_error_name,
)
from odradek.cli.client import REQUEST_TIMEOUT_SECONDS, Kafka
from odradek.cli.errors import fail
from odradek.client.connection import BrokerConnectionError, ClientSecurity
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build, millis

app = typer.Typer(help="List, describe and abort transactions; describe a partition's "
                  "producers.", no_args_is_help=True)

T = TypeVar("T")

# Tries at a request whose answer says to try again, half a second apart: enough for a new
# coordinator or leader to be elected and to load its state, without keeping a command
# waiting long when there is none.
ATTEMPTS = 10
RETRY_BACKOFF_S = 0.5
# FindCoordinator's key type for a transactional id (KIP-98; 0 is a group).
TRANSACTION_KEY_TYPE = 1
# Kafka's names for the transaction states, as ListTransactions and DescribeTransactions
# answer them.
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
          "CompleteAbort", "Dead", "PrepareEpochFence")

# Answers that Kafka's admin client retries: the coordinator moved, is being elected or is
# still loading __transaction_state, or the partition's leader moved.
_RETRIABLE_COORDINATOR_ERRORS = frozenset({
    ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator})
_RETRIABLE_LEADER_ERRORS = frozenset({
    ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available})
# "None" in DescribeProducers' fields and in ListTransactions' duration filter.
_NONE = -1


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    """One transactional id, as its coordinator lists it."""

    transactional_id: str
    coordinator: int  # the broker id
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A transactional id's state at its coordinator."""

    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1 when no transaction is open
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    """An active producer of a partition, as its leader knows it; -1 is "none"."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class _Retry(Exception):
    """An answer that says to try again; the message says which and why."""


class Transactions:
    """The transaction APIs, for one command. Not thread-safe."""

    def __init__(self, kafka: Kafka) -> None:
        self._kafka = kafka
        self._security = client_security(kafka.config())  # the command's -X properties

    def list_transactions(self, states: Collection[str] = (),
                          producer_ids: Collection[int] = (),
                          duration_ms: int = _NONE) -> list[ListedTransaction]:
        """The transactions of every broker in one of ``states`` (any if none), of one of
        ``producer_ids`` (any if none), open for longer than ``duration_ms`` (if >= 0);
        sorted by transactional id. Fails on an unknown state name."""
        request = build(request_class(ApiKey.LIST_TRANSACTIONS, 1), state_filters=list(states),
                        producer_id_filters=list(producer_ids), duration_filter=duration_ms)
        pending = self._brokers()  # the brokers yet to answer
        listed: list[ListedTransaction] = []

        def attempt() -> list[ListedTransaction]:
            asked = list(pending.values())
            problems = []
            for broker, response in zip(asked, _exchange_all(asked, request, self._security), strict=True):
                if response.unknown_state_filters:
                    fail(f"unknown transaction state "
                         f"{', '.join(map(repr, response.unknown_state_filters))}: "
                         f"the states are {', '.join(STATES)}")
                if response.error_code in _RETRIABLE_COORDINATOR_ERRORS:
                    problems.append(f"broker {broker.node_id}: "
                                    f"{describe_error(response.error_code, None)}")
                    continue
                if response.error_code != ErrorCode.none:
                    fail(f"ListTransactions: broker {broker.node_id}: "
                         f"{describe_error(response.error_code, None)}")
                del pending[broker.node_id]
                listed.extend(ListedTransaction(t.transactional_id, broker.node_id,
                                                t.producer_id, t.transaction_state)
                              for t in response.transaction_states)
            if problems:
                raise _Retry("; ".join(problems))
            return sorted(listed, key=lambda t: t.transactional_id)

        return _retrying("ListTransactions", attempt)

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """The transactional id's state at its coordinator; fails if it has none."""
        request = build(request_class(ApiKey.DESCRIBE_TRANSACTIONS, 0),
                        transactional_ids=[transactional_id])
        subject = f"transactional id {transactional_id!r}"

        def attempt() -> TransactionDescription:
            coordinator = self._coordinator(transactional_id)
            [state] = _exchange_one(coordinator, request, self._security).transaction_states
            if state.error_code in _RETRIABLE_COORDINATOR_ERRORS:
                raise _Retry(f"coordinator {coordinator.node_id}: "
                             f"{describe_error(state.error_code, None)}")
            if state.error_code == ErrorCode.transactional_id_not_found:
                # librdkafka has no description of this error to offer.
                fail(f"{subject}: does not exist ({kafka_error_name(state.error_code)})")
            if state.error_code != ErrorCode.none:
                fail(f"{subject}: {describe_error(state.error_code, None)}")
            return TransactionDescription(
                transactional_id, coordinator.node_id, state.transaction_state,
                state.producer_id, state.producer_epoch, millis(state.transaction_timeout),
                millis(state.transaction_start_time),
                tuple((t.topic, p) for t in state.topics for p in t.partitions))

        return _retrying(f"DescribeTransactions of {subject}", attempt)

    def describe_producers(self, topic: str, partition: int) -> list[ProducerState]:
        """The active producers of the partition, from its leader, by producer id."""
        request = build(request_class(ApiKey.DESCRIBE_PRODUCERS, 0), topics=[
            {"name": topic, "partition_indexes": [partition]}])

        def attempt() -> list[ProducerState]:
            response = _exchange_one(self._leader(topic, partition), request, self._security)
            [answer] = [p for t in response.topics for p in t.partitions]
            _check_partition(answer.error_code, answer.error_message, topic, partition)
            return sorted((ProducerState(p.producer_id, p.producer_epoch, p.last_sequence,
                                         p.last_timestamp, p.coordinator_epoch,
                                         p.current_txn_start_offset)
                           for p in answer.active_producers), key=lambda p: p.producer_id)

        return _retrying("DescribeProducers", attempt)

    def abort_transaction(self, topic: str, partition: int, producer_id: int,
                          producer_epoch: int, coordinator_epoch: int) -> None:
        """Writes an abort marker for the producer's transaction in the partition (Kafka's
        ``Admin.abortTransaction``); fails if the leader refuses it."""
        request = build(request_class(ApiKey.WRITE_TXN_MARKERS, 1), markers=[{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": False, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": topic, "partition_indexes": [partition]}]}])

        def attempt() -> None:
            response = _exchange_one(self._leader(topic, partition), request, self._security)
            for marker in response.markers:
                for t in marker.topics:
                    for p in t.partitions:
                        _check_partition(p.error_code, None, topic, partition)

        _retrying("WriteTxnMarkers", attempt)

    def _brokers(self) -> dict[int, BrokerAddress]:
        cluster = self._kafka.admin.list_topics(timeout=REQUEST_TIMEOUT_SECONDS)
        return {b.id: BrokerAddress(b.id, b.host, b.port) for b in sorted(
            cluster.brokers.values(), key=lambda b: b.id)}

    def _coordinator(self, transactional_id: str) -> BrokerAddress:
        request = build(request_class(ApiKey.FIND_COORDINATOR, 3), key=transactional_id,
                        key_type=TRANSACTION_KEY_TYPE)
        # Any broker knows the coordinator: the first that can be reached is asked.
        response: Any = _Unreachable("FindCoordinator: the cluster has no brokers")
        for broker in self._brokers().values():
            [response] = _answers([broker], request, self._security)
            if not isinstance(response, _Unreachable):
                break
        if isinstance(response, _Unreachable):
            fail(str(response))
        problem = f"FindCoordinator: {describe_error(response.error_code, response.error_message)}"
        if response.error_code in _RETRIABLE_COORDINATOR_ERRORS:
            raise _Retry(problem)
        if response.error_code != ErrorCode.none:
            fail(problem)
        return BrokerAddress(response.node_id, response.host, response.port)

    def _leader(self, topic: str, partition: int) -> BrokerAddress:
        """The partition's leader, from Metadata; fails if the topic or partition does not
        exist. Asks for every topic: a Metadata request naming a topic would create it where
        the brokers auto-create topics (librdkafka's admin client allows that)."""
        cluster = self._kafka.admin.list_topics(timeout=REQUEST_TIMEOUT_SECONDS)
        metadata = cluster.topics.get(topic)
        error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART) if metadata is None else metadata.error
        if error is not None and error.code() != KafkaError.LEADER_NOT_AVAILABLE:
            fail(self._kafka.describe(error, f"topic {topic!r}"))
        if partition not in metadata.partitions:
            fail(f"topic {topic!r} has no partition {partition} "
                 f"(it has {len(metadata.partitions)})")
        broker = cluster.brokers.get(metadata.partitions[partition].leader)
        if broker is None:
            raise _Retry(f"topic {topic!r} partition {partition} has no leader")
        return BrokerAddress(broker.id, broker.host, broker.port)


def _check_partition(error: ErrorCode, message: str | None, topic: str, partition: int) -> None:
    problem = f"topic {topic!r} partition {partition}: {describe_error(error, message)}"
    if error in _RETRIABLE_LEADER_ERRORS:
        raise _Retry(problem)
    if error != ErrorCode.none:
        fail(problem)


def _retrying(name: str, attempt: Callable[[], T]) -> T:
    """What ``attempt`` returns, calling it again while it raises :class:`_Retry`, up to
    ATTEMPTS times."""
    problem = ""
    for n in range(ATTEMPTS):
        if n:
            time.sleep(RETRY_BACKOFF_S)
        try:
            return attempt()
        except _Retry as exc:
            problem = str(exc)
    fail(f"{name}: gave up after {ATTEMPTS} attempts: {problem}")


@dataclass(frozen=True, slots=True)
class _Unreachable:
    """A broker that could not be reached, or did not answer in time."""

    problem: str

    def __str__(self) -> str:
        return self.problem


def _answers(brokers: Sequence[BrokerAddress], request: Any,
             security: ClientSecurity | None) -> list[Any]:
    """Each broker's answer to ``request``, asked at the same time, or :class:`_Unreachable`
    for one that gave none."""
    async def exchange_all() -> list[Any]:
        return await asyncio.gather(*(exchange(b, request, security) for b in brokers),
                                    return_exceptions=True)

    name = type(request).__name__.removesuffix("Request")
    answers = []
    for broker, answer in zip(brokers, asyncio.run(exchange_all()), strict=True):
        if isinstance(answer, (BrokerConnectionError, TimeoutError)):  # both name the address
            answer = _Unreachable(f"{name}: broker {broker.node_id}: {answer}")
        elif isinstance(answer, BaseException):
            raise answer
        answers.append(answer)
    return answers


def _exchange_all(brokers: Sequence[BrokerAddress], request: Any,
                  security: ClientSecurity | None) -> list[Any]:
    """Each broker's answer; fails with one line for a broker that gave none."""
    answers = _answers(brokers, request, security)
    for answer in answers:
        if isinstance(answer, _Unreachable):
            fail(str(answer))
    return answers


def _exchange_one(broker: BrokerAddress, request: Any, security: ClientSecurity | None) -> Any:
    [answer] = _exchange_all([broker], request, security)
    return answer


# -- the commands --------------------------------------------------------------------------


@app.command("list")
def list_transactions(
    states: Annotated[Optional[list[str]], typer.Option(
        "--state", metavar="STATE", help=f"Only transactions in this state (repeatable): "
        f"{', '.join(STATES)}.")] = None,
    producer_ids: Annotated[Optional[list[int]], typer.Option(
        "--producer-id", metavar="ID", help="Only the transactions of this producer id "
        "(repeatable).")] = None,
    duration_ms: Annotated[Optional[int], typer.Option(
        min=0, help="Only transactions open for longer than this many milliseconds.")] = None,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """List the transactional ids of every broker: coordinator, producer id and state."""
    with Kafka(bootstrap_server, command_config) as kafka:
        listed = Transactions(kafka).list_transactions(
            states or (), producer_ids or (), _NONE if duration_ms is None else duration_ms)
    if not listed:
        output.note("no transactions")
        return
    output.table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], (
        [t.transactional_id, t.coordinator, t.producer_id, t.state] for t in listed))


@app.command()
def describe(
    transactional_id: Annotated[str, typer.Argument(help="The transactional id.")],
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Show a transactional id's coordinator, state, producer id and epoch, timeout, and
    its open transaction's start time and partitions."""
    with Kafka(bootstrap_server, command_config) as kafka:
        txn = Transactions(kafka).describe_transaction(transactional_id)
    started = txn.transaction_start_time_ms
    start = "-" if started < 0 else datetime.fromtimestamp(
        started / 1000, timezone.utc).isoformat(timespec="milliseconds")
    output.line(f"TransactionalId: {txn.transactional_id}  Coordinator: {txn.coordinator}  "
                f"State: {txn.state}  ProducerId: {txn.producer_id}  "
                f"ProducerEpoch: {txn.producer_epoch}  TimeoutMs: {txn.transaction_timeout_ms}  "
                f"StartTime: {start}")
    if txn.partitions:
        output.table(["Topic", "Partition"], txn.partitions)


@app.command("describe-producers")
def describe_producers(
    topic: Annotated[str, typer.Option(help="The partition's topic.")],
    partition: Annotated[int, typer.Option(min=0, help="The partition.")],
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Show a partition's active producers, as its leader knows them: epoch, last sequence
    and timestamp, coordinator epoch and where an open transaction starts."""
    with Kafka(bootstrap_server, command_config) as kafka:
        producers = Transactions(kafka).describe_producers(topic, partition)
    if not producers:
        output.note(f"no active producers on topic {topic} partition {partition}")
        return
    output.table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                  "LastTimestamp", "CurrentTransactionStartOffset"], (
        [p.producer_id, p.producer_epoch, _or_dash(p.coordinator_epoch),
         _or_dash(p.last_sequence), _or_dash(p.last_timestamp),
         _or_dash(p.current_txn_start_offset)] for p in producers))


@app.command()
def abort(
    topic: Annotated[str, typer.Option(help="The partition's topic.")],
    partition: Annotated[int, typer.Option(min=0, help="The partition.")],
    start_offset: Annotated[Optional[int], typer.Option(
        min=0, help="Abort the open transaction that starts at this offset.")] = None,
    producer_id: Annotated[Optional[int], typer.Option(
        help="Instead of --start-offset: the producer whose transaction to abort.")] = None,
    producer_epoch: Annotated[Optional[int], typer.Option(
        help="With --producer-id: its epoch.")] = None,
    coordinator_epoch: Annotated[Optional[int], typer.Option(
        help="With --producer-id: the coordinator epoch of its last marker.")] = None,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Abort a hanging transaction in one partition: write an abort marker for it, so that
    the partition's last stable offset moves past it."""
    explicit = [value is not None for value in (producer_id, producer_epoch, coordinator_epoch)]
    if any(explicit) if start_offset is not None else not all(explicit):
        fail("give --start-offset, or all of --producer-id, --producer-epoch and "
             "--coordinator-epoch")
    with Kafka(bootstrap_server, command_config) as kafka:
        transactions = Transactions(kafka)
        if start_offset is not None:
            producer = _producer_at(transactions.describe_producers(topic, partition),
                                    start_offset, topic, partition)
            # A producer that never had a marker written has no coordinator epoch: Kafka's
            # tool sends 0 for it.
            producer_id, producer_epoch, coordinator_epoch = (
                producer.producer_id, producer.producer_epoch,
                max(producer.coordinator_epoch, 0))
        transactions.abort_transaction(topic, partition, producer_id, producer_epoch,
                                       coordinator_epoch)
    output.line(f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) "
                f"on topic {topic} partition {partition}.")


def _producer_at(producers: list[ProducerState], start_offset: int, topic: str,
                 partition: int) -> ProducerState:
    found = [p for p in producers if p.current_txn_start_offset == start_offset]
    if not found:
        open_at = sorted(p.current_txn_start_offset for p in producers
                         if p.current_txn_start_offset != _NONE)
        fail(f"topic {topic!r} partition {partition}: no open transaction starts at offset "
             f"{start_offset} (open transactions start at: "
             f"{', '.join(map(str, open_at)) or 'none'})")
    return found[0]


def _or_dash(value: int) -> object:
    return "-" if value == _NONE else value
