"""A transactional workload and its checker (after Jepsen's Kafka transaction checks).

``TransactionalWriters`` runs several confluent-kafka transactional producers, each on a
thread of its own, each transaction writing unique values to a few partitions and then
committing or aborting at random; some wait between their writes and their EndTxn. Each
transaction's outcome is recorded as the client learnt it:

* ``committed``: ``commit_transaction`` returned;
* ``aborted``: ``abort_transaction`` returned (asked for, or after an abortable error);
* ``unknown``: the client gave up without knowing (a fatal error, or no answer in time):
  its producer is replaced, and the new one's InitProducerId aborts the transaction if it
  was still open, so it may end either way — but whole.

``read_partitions`` reads every partition to its end with one of three clients and an
isolation level; ``check_reads`` then finds the anomalies by class:

* **lost write**: a value of a committed transaction that a read_committed reader lacks;
* **aborted read**: a value of an aborted transaction a read_committed reader returns;
* **torn transaction**: a transaction of which a read_committed reader saw some values
  but not all (in every partition it wrote to, in the partition's order);
* **duplicate**: a value read twice by one reader;
* **out of order**: one producer's values of a partition not in the order it sent them.

read_uncommitted readers must see every committed value once too, and may see aborted ones
(Kafka hands them out: only read_committed readers filter them).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import aiokafka
import confluent_kafka
import kafka

TXN_TIMEOUT_MS = 10_000
CLIENT_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 60.0


@dataclass
class Transaction:
    producer: int
    number: int
    values: dict[int, list[bytes]]  # partition -> values, in the order sent
    outcome: str = "unknown"  # committed, aborted, unknown

    @property
    def all_values(self) -> list[bytes]:
        return [v for values in self.values.values() for v in values]


@dataclass
class Anomalies:
    lost: list[bytes] = field(default_factory=list)
    aborted_read: list[bytes] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)
    duplicate: list[bytes] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {name: len(found) for name, found in vars(self).items()}

    def __bool__(self) -> bool:
        return any(self.counts().values())


class TransactionalWriters:
    def __init__(self, bootstrap: str, topic: str, partitions: int, *, producers: int = 4,
                 seed: int = 7, abort_ratio: float = 0.3, delay_ratio: float = 0.2) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.transactions: list[Transaction] = []
        self.errors: dict[str, int] = defaultdict(int)
        self.producers_replaced = 0
        self._rng = random.Random(seed)
        self._abort_ratio = abort_ratio
        self._delay_ratio = delay_ratio
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(i, random.Random(seed + i)),
                                          daemon=True) for i in range(producers)]

    def transactional_ids(self) -> list[str]:
        return [f"{self.topic}-writer-{i}" for i in range(len(self._threads))]

    def start(self) -> TransactionalWriters:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(CLIENT_TIMEOUT_S * 4)

    def _producer(self, index: int) -> confluent_kafka.Producer | None:
        producer = confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_ids()[index],
            "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 2, "log_level": 2,
            "topic.metadata.refresh.interval.ms": 1000, "socket.timeout.ms": 10_000})
        deadline = time.monotonic() + CLIENT_TIMEOUT_S * 3
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                producer.init_transactions(CLIENT_TIMEOUT_S)
                return producer
            except confluent_kafka.KafkaException as exc:
                self._count(exc)
                if exc.args[0].fatal():
                    return None
                time.sleep(0.5)
        return None

    def _count(self, exc: confluent_kafka.KafkaException) -> None:
        with self._lock:
            self.errors[exc.args[0].name()] += 1

    def _run(self, index: int, rng: random.Random) -> None:
        producer = self._producer(index)
        number = 0
        while not self._stop.is_set():
            if producer is None:
                producer = self._producer(index)
                with self._lock:
                    self.producers_replaced += 1
                continue
            chosen = rng.sample(range(self.partitions), k=min(3, self.partitions))
            txn = Transaction(index, number, {
                p: [f"w{index}-t{number}-p{p}-{k}".encode() for k in range(2)] for p in chosen})
            number += 1
            with self._lock:
                self.transactions.append(txn)
            if not self._one(producer, txn, rng):
                producer = None  # fatal or unknown: a new producer fences this one

    def _one(self, producer: confluent_kafka.Producer, txn: Transaction,
             rng: random.Random) -> bool:
        """Runs one transaction; False when the producer must be replaced."""
        failed: list[confluent_kafka.KafkaError] = []

        def delivered(error, _message) -> None:
            if error is not None:
                failed.append(error)

        try:
            producer.begin_transaction()
            for partition, values in txn.values.items():
                for value in values:
                    producer.produce(self.topic, value=value, partition=partition,
                                     on_delivery=delivered)
            producer.poll(0)
            if rng.random() < self._delay_ratio:
                time.sleep(rng.uniform(0.5, 3.0))  # a producer slow to end its transaction
            commit = rng.random() >= self._abort_ratio and not failed
            if commit:
                return self._commit(producer, txn)
            producer.abort_transaction(CLIENT_TIMEOUT_S)
            txn.outcome = "aborted"
            return True
        except confluent_kafka.KafkaException as exc:
            self._count(exc)
            return self._recover(producer, txn, exc.args[0])

    def _commit(self, producer: confluent_kafka.Producer, txn: Transaction) -> bool:
        for _ in range(5):
            try:
                producer.commit_transaction(CLIENT_TIMEOUT_S)
                txn.outcome = "committed"
                return True
            except confluent_kafka.KafkaException as exc:
                self._count(exc)
                error = exc.args[0]
                if error.retriable() and not error.txn_requires_abort():
                    continue  # librdkafka: call commit again to learn the outcome
                return self._recover(producer, txn, error)
        return False  # still no answer: unknown

    def _recover(self, producer: confluent_kafka.Producer, txn: Transaction,
                 error: confluent_kafka.KafkaError) -> bool:
        if error.txn_requires_abort():
            try:
                producer.abort_transaction(CLIENT_TIMEOUT_S)
                txn.outcome = "aborted"
                return True
            except confluent_kafka.KafkaException as exc:
                self._count(exc)
        return False  # the outcome stays unknown

    def outcomes(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for txn in self.transactions:
            counts[txn.outcome] += 1
        return dict(counts)


# -- reading ---------------------------------------------------------------------------


def end_offsets(bootstrap: str, topic: str, partitions: int,
                isolation: str = "read_uncommitted") -> dict[int, int]:
    """Each partition's end: the high watermark, or for ``read_committed`` the last stable
    offset."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "ends",
                                         "isolation.level": isolation})
    try:
        return {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p),
                                                  timeout=10, cached=False)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def read_partitions(client: str, bootstrap: str, topic: str, ends: dict[int, int],
                    isolation: str) -> dict[int, list[bytes]]:
    """Every value of every partition up to ``ends`` (the high watermarks, once every
    transaction is decided), in partition order, with ``client``."""
    return READERS[client](bootstrap, topic, ends, isolation)


def _confluent_read(bootstrap, topic, ends, isolation):
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"check-{isolation}",
        "isolation.level": isolation, "enable.auto.commit": False, "log_level": 3})
    got: dict[int, list[bytes]] = defaultdict(list)
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in ends])
        _until_ends(lambda: [(m.partition(), m.offset(), m.value())
                             for m in consumer.consume(500, 0.5) if not m.error()],
                    lambda p: consumer.position([confluent_kafka.TopicPartition(topic, p)])[0]
                    .offset, ends, got)
    finally:
        consumer.close()
    return got


def _kafka_python_read(bootstrap, topic, ends, isolation):
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                   enable_auto_commit=False)
    got: dict[int, list[bytes]] = defaultdict(list)
    try:
        assigned = [kafka.TopicPartition(topic, p) for p in ends]
        consumer.assign(assigned)
        consumer.seek_to_beginning()
        _until_ends(lambda: [(m.partition, m.offset, m.value) for batch in
                             consumer.poll(timeout_ms=500).values() for m in batch],
                    lambda p: consumer.position(kafka.TopicPartition(topic, p)), ends, got)
    finally:
        consumer.close()
    return got


def _aiokafka_read(bootstrap, topic, ends, isolation):
    async def run() -> dict[int, list[bytes]]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap,
                                             isolation_level=isolation,
                                             enable_auto_commit=False)
        await consumer.start()
        got: dict[int, list[bytes]] = defaultdict(list)
        try:
            assigned = [aiokafka.TopicPartition(topic, p) for p in ends]
            consumer.assign(assigned)
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + READ_TIMEOUT_S
            while time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for messages in batches.values():
                    for m in messages:
                        got[m.partition].append(m.value)
                positions = {p: await consumer.position(aiokafka.TopicPartition(topic, p))
                             for p in ends}
                if all(positions[p] >= end for p, end in ends.items()):
                    break
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def _until_ends(poll: Callable[[], list[tuple[int, int, bytes]]],
                position: Callable[[int], int], ends: dict[int, int],
                got: dict[int, list[bytes]]) -> None:
    deadline = time.monotonic() + READ_TIMEOUT_S
    while time.monotonic() < deadline:
        for partition, _offset, value in poll():
            got[partition].append(value)
        if all(position(p) >= end for p, end in ends.items()):
            return


READERS = {"confluent-kafka": _confluent_read, "kafka-python": _kafka_python_read,
           "aiokafka": _aiokafka_read}


# -- checking --------------------------------------------------------------------------


def check_reads(transactions: list[Transaction], read: dict[int, list[bytes]], *,
                committed_only: bool) -> Anomalies:
    """The anomalies of one reader's values (see the module docstring); with
    ``committed_only`` False (read_uncommitted) aborted values are allowed."""
    found = Anomalies()
    seen: dict[bytes, int] = defaultdict(int)
    for values in read.values():
        for value in values:
            seen[value] += 1
    found.duplicate = sorted(v for v, n in seen.items() if n > 1)
    for txn in transactions:
        values = txn.all_values
        present = [v for v in values if seen.get(v)]
        if txn.outcome == "committed":
            found.lost += [v for v in values if not seen.get(v)]
        elif txn.outcome == "aborted" and committed_only:
            found.aborted_read += present
        if committed_only and present and len(present) != len(values):
            found.torn.append(f"writer {txn.producer} transaction {txn.number} ({txn.outcome}):"
                              f" {len(present)} of {len(values)} values")
    sent_order = {v: (txn.producer, txn.number, i) for txn in transactions
                  for i, v in enumerate(txn.all_values)}
    for partition, values in read.items():
        last: dict[int, tuple[int, int]] = {}
        for value in values:
            if value not in sent_order:
                continue
            producer, number, i = sent_order[value]
            if last.get(producer, (-1, -1)) > (number, i):
                found.out_of_order.append(f"partition {partition}: {value!r}")
            last[producer] = (number, i)
    return found


def aborted_values_seen(transactions: list[Transaction], read: dict[int, list[bytes]]) -> int:
    seen = {v for values in read.values() for v in values}
    return sum(v in seen for txn in transactions if txn.outcome == "aborted"
               for v in txn.all_values)
