"""Transactional clients run as processes of their own, so that a test can kill them -9.

``python txn_processes.py ctp BOOTSTRAP SOURCE SINK`` is a consume-transform-produce loop:
a consumer in group ``<SINK>-ctp`` reads SOURCE with read_committed, and a transactional
producer (``transactional.id`` ``<SINK>-ctp``) writes ``out-<value>`` to SINK and the
consumer's position with ``send_offsets_to_transaction`` in one transaction per batch. It
prints ``committed <n>`` after each commit, and runs until killed.

``python txn_processes.py hang BOOTSTRAP TOPIC TRANSACTIONAL_ID`` begins a transaction,
writes ``hanging`` to partition 0, prints ``written`` once it is in the log, and waits
(for the test to kill it mid-transaction).
"""

from __future__ import annotations

import sys
import time

import confluent_kafka

CLIENT_TIMEOUT_S = 30.0


def consume_transform_produce(bootstrap: str, source: str, sink: str) -> None:
    # The loop started after one was killed gets the partitions once the killed member's
    # session has ended: a short one (the test's brokers allow it) keeps that wait short.
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"{sink}-ctp",
        "isolation.level": "read_committed", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": 3000, "heartbeat.interval.ms": 1000,
        "log_level": 2})
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "transactional.id": f"{sink}-ctp",
        "transaction.timeout.ms": 10_000, "log_level": 2})
    producer.init_transactions(CLIENT_TIMEOUT_S)
    consumer.subscribe([source])
    committed = 0
    while True:
        messages = [m for m in consumer.consume(100, 0.5) if not m.error()]
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            producer.produce(sink, value=b"out-" + message.value(), partition=message.partition())
        if _commit(producer, consumer):
            committed += len(messages)
            print(f"committed {committed}", flush=True)
            continue
        # Aborted: back to what the group committed, and the batch is processed again.
        for tp in consumer.committed(consumer.assignment(), CLIENT_TIMEOUT_S):
            consumer.seek(confluent_kafka.TopicPartition(
                tp.topic, tp.partition,
                tp.offset if tp.offset >= 0 else confluent_kafka.OFFSET_BEGINNING))


def _commit(producer: confluent_kafka.Producer, consumer: confluent_kafka.Consumer) -> bool:
    """Commits the records and the consumer's position together; False if the transaction
    was aborted instead. A fatal error, or no answer after a few tries, ends the process
    (the test starts it again, and its InitProducerId fences what is left)."""
    for _ in range(5):
        try:
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(),
                                                 CLIENT_TIMEOUT_S)
            producer.commit_transaction(CLIENT_TIMEOUT_S)
            return True
        except confluent_kafka.KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                producer.abort_transaction(CLIENT_TIMEOUT_S)
                return False
            if error.fatal() or not error.retriable():
                raise
    raise TimeoutError("the transaction's outcome is unknown")


def hang(bootstrap: str, topic: str, transactional_id: str) -> None:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
        "transaction.timeout.ms": 2_000})
    producer.init_transactions(CLIENT_TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"hanging", partition=0)
    producer.flush(CLIENT_TIMEOUT_S)
    print("written", flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    {"ctp": consume_transform_produce, "hang": hang}[mode](*args)
