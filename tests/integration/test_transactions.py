"""Transactions with real clients (KIP-98): transactional producers of confluent-kafka,
kafka-python and aiokafka commit and abort across partitions, read_committed consumers of
every client see the committed records only, read_uncommitted ones see everything, offsets
committed in a transaction count only if it commits, zombies are fenced, and a transaction
whose producer went away is aborted after its timeout or by its successor."""

from __future__ import annotations

import asyncio
import time

import aiokafka
import confluent_kafka
import kafka
import pytest

from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster.local import free_ports
from odradek.testing.embedded import EmbeddedBroker

TIMEOUT_S = 20.0
TXN_TIMEOUT_MS = 60_000


# -- producers -------------------------------------------------------------------------


def confluent_transactions(bootstrap: str, transactional_id: str, transactions):
    """Runs ``transactions``, a list of (commit?, [(topic, partition, value), ...]), with
    one confluent-kafka transactional producer."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "transactional.id": transactional_id,
                                         "transaction.timeout.ms": TXN_TIMEOUT_MS})
    producer.init_transactions(TIMEOUT_S)
    for commit, records in transactions:
        producer.begin_transaction()
        for topic, partition, value in records:
            producer.produce(topic, value=value, partition=partition)
        if commit:
            producer.commit_transaction(TIMEOUT_S)
        else:
            producer.flush(TIMEOUT_S)  # the records are in the log before the abort
            producer.abort_transaction(TIMEOUT_S)


def kafka_python_transactions(bootstrap: str, transactional_id: str, transactions):
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                                   transaction_timeout_ms=TXN_TIMEOUT_MS)
    try:
        producer.init_transactions()
        for commit, records in transactions:
            producer.begin_transaction()
            for topic, partition, value in records:
                producer.send(topic, value=value, partition=partition)
            producer.flush(timeout=TIMEOUT_S)
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close(timeout=TIMEOUT_S)


def aiokafka_transactions(bootstrap: str, transactional_id: str, transactions):
    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap,
                                             transactional_id=transactional_id,
                                             transaction_timeout_ms=TXN_TIMEOUT_MS)
        await producer.start()
        try:
            for commit, records in transactions:
                await producer.begin_transaction()
                for topic, partition, value in records:
                    await producer.send_and_wait(topic, value=value, partition=partition)
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), TIMEOUT_S * 3))


PRODUCERS = {"confluent-kafka": confluent_transactions,
             "kafka-python": kafka_python_transactions,
             "aiokafka": aiokafka_transactions}


def values_read(client, bootstrap: str, topic: str, count: int, isolation: str,
                partitions=(0, 1)) -> list[bytes]:
    """The first ``count`` values ``client`` (a ``conftest.Client``) reads, sorted."""
    consumed = client.consume(bootstrap, topic, count, partitions=partitions,
                              config={"isolation.level": isolation})
    return sorted(m.value for m in consumed)


def committed_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first ``count`` values of partition 0 for a read_committed confluent-kafka
    consumer, and nothing after them within half a second."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "committed-values",
        "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        got = _poll_values(consumer, until=lambda got: len(got) >= count, seconds=TIMEOUT_S)
    finally:
        consumer.close()
    return sorted(got)


# -- the tests ---------------------------------------------------------------------------


@pytest.mark.clients("confluent-kafka", "kafka-python", "aiokafka")
@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_committed_transactions_are_read_whole_and_aborted_ones_never(
        producer, client, bootstrap, create_topic):
    """Transactions of ``producer`` read by ``client``."""
    topic = create_topic(f"txn-{producer}", partitions=2)
    transactions = [
        (True, [(topic, 0, b"c1-0"), (topic, 1, b"c1-1")]),
        (False, [(topic, 0, b"a1-0"), (topic, 1, b"a1-1")]),
        (True, [(topic, 1, b"c2-1"), (topic, 0, b"c2-0"), (topic, 0, b"c2-0b")]),
        (False, [(topic, 1, b"a2-1")]),
        (True, [(topic, 0, b"end-0"), (topic, 1, b"end-1")]),
    ]
    PRODUCERS[producer](bootstrap, f"tid-{producer}", transactions)
    committed = sorted(v for commit, records in transactions if commit for _, _, v in records)
    everything = sorted(v for _, records in transactions for _, _, v in records)
    # The aborted records come before the last committed ones: a consumer that let one
    # through would return it among the first len(committed).
    assert values_read(client, bootstrap, topic, len(committed), "read_committed") == committed
    assert values_read(client, bootstrap, topic, len(everything), "read_uncommitted") \
        == everything


def test_a_read_committed_consumer_waits_at_an_open_transaction(bootstrap, create_topic):
    topic = create_topic("txn-lso")
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"before", partition=0)
    plain.flush(TIMEOUT_S)
    txn = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "lso"})
    txn.init_transactions(TIMEOUT_S)
    txn.begin_transaction()
    txn.produce(topic, value=b"in-txn", partition=0)
    txn.flush(TIMEOUT_S)
    plain.produce(topic, value=b"after", partition=0)  # not transactional, but beyond the LSO
    plain.flush(TIMEOUT_S)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "lso-reader",
        "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        got = _poll_values(consumer, until=lambda got: len(got) >= 1, seconds=3.0)
        assert got == [b"before"]
        low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                                   cached=False, timeout=TIMEOUT_S)
        assert (low, high) == (0, 1)  # read_committed: the end is the last stable offset
        txn.commit_transaction(TIMEOUT_S)
        got += _poll_values(consumer, until=lambda more: len(more) >= 2, seconds=TIMEOUT_S)
        assert got == [b"before", b"in-txn", b"after"]
    finally:
        consumer.close()


def _poll_values(consumer, *, until, seconds: float) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not until(got):
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            got.append(message.value())
    if until(got):  # nothing more is due: a short look for anything that should not be
        extra = consumer.poll(0.5)
        if extra is not None and not extra.error():
            got.append(extra.value())
    return got


def test_offsets_sent_to_a_transaction_count_only_if_it_commits(bootstrap, create_topic):
    source, sink = create_topic("ctp-in"), create_topic("ctp-out")
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        plain.produce(source, value=b"%d" % i, partition=0)
    plain.flush(TIMEOUT_S)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "ctp", "isolation.level": "read_committed",
        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "transactional.id": "ctp-1"})
    producer.init_transactions(TIMEOUT_S)
    partition = confluent_kafka.TopicPartition(source, 0)
    try:
        consumer.subscribe([source])
        for commit, count in ((True, 4), (False, 3), (True, 6)):
            batch = _consume_batch(consumer, count)
            producer.begin_transaction()
            for message in batch:
                producer.produce(sink, value=b"out-" + message.value(), partition=0)
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), TIMEOUT_S)
            if commit:
                producer.commit_transaction(TIMEOUT_S)
            else:
                producer.abort_transaction(TIMEOUT_S)
                # An application rewinds to what is committed and processes again.
                [committed] = consumer.committed([partition], TIMEOUT_S)
                assert committed.offset == 4
                consumer.seek(confluent_kafka.TopicPartition(source, 0, committed.offset))
        [committed] = consumer.committed([partition], TIMEOUT_S)
        assert committed.offset == 10
    finally:
        consumer.close()
    assert committed_values(bootstrap, sink, 10) == sorted(b"out-%d" % i for i in range(10))


def _consume_batch(consumer, count: int) -> list:
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.consume(count - len(got), 0.5):
            if not message.error():
                got.append(message)
    assert len(got) == count, f"{len(got)} of {count} records"
    return got


def test_a_zombie_is_fenced_by_its_successor(bootstrap, create_topic):
    topic = create_topic("txn-zombie")
    config = {"bootstrap.servers": bootstrap, "transactional.id": "zombie"}
    zombie = confluent_kafka.Producer(config)
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"from-the-zombie", partition=0)
    zombie.flush(TIMEOUT_S)
    successor = confluent_kafka.Producer(config)
    successor.init_transactions(TIMEOUT_S)  # aborts the zombie's transaction
    successor.begin_transaction()
    successor.produce(topic, value=b"from-the-successor", partition=0)
    successor.commit_transaction(TIMEOUT_S)
    with pytest.raises(confluent_kafka.KafkaException) as fenced:
        zombie.commit_transaction(TIMEOUT_S)
    assert fenced.value.args[0].fatal() or fenced.value.args[0].txn_requires_abort()
    assert committed_values(bootstrap, topic, 1) == [b"from-the-successor"]


@pytest.mark.odradek_config(transaction_abort_timed_out_transaction_cleanup_interval_ms=200)
def test_a_transaction_left_open_is_aborted_after_its_timeout(bootstrap, create_topic):
    topic = create_topic("txn-timeout")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "transactional.id": "abandoned",
                                         "transaction.timeout.ms": 1_000})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"never-committed", partition=0)
    producer.flush(TIMEOUT_S)
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"later", partition=0)
    plain.flush(TIMEOUT_S)
    # The broker aborts it: the record after it becomes readable, the aborted one never.
    assert committed_values(bootstrap, topic, 1) == [b"later"]
    with pytest.raises(confluent_kafka.KafkaException):
        producer.commit_transaction(TIMEOUT_S)  # fenced: its epoch was bumped


def test_an_open_transaction_survives_a_broker_restart(tmp_path):
    """The producer keeps its connection details across the restart, so the broker comes
    back on the same port."""
    [port] = free_ports(1)
    with EmbeddedBroker(tmp_path, listeners=f"PLAINTEXT://127.0.0.1:{port}") as broker:
        topic = "txn-restart"
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
        confluent_transactions(bootstrap, "restart-1", [(True, [(topic, 0, b"one")])])
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                             "transactional.id": "restart-2"})
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce(topic, value=b"two", partition=0)
        producer.flush(TIMEOUT_S)
        broker.restart()
        # The coordinator read the open transaction back from __transaction_state.
        producer.commit_transaction(TIMEOUT_S)
        assert committed_values(bootstrap, topic, 2) == [b"one", b"two"]
