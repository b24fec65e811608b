"""The idempotent producer (KIP-98) as applications use it: InitProducerId, then batches
that a lost response makes the producer send again, written exactly once.

Real producers (confluent-kafka, kafka-python, aiokafka) with idempotence on; a loopback
proxy that drops connections after the broker has answered; raw requests for what no
client sends on purpose (a gap in the sequences, a fenced epoch, a retry after a restart);
and restarts, clean and by SIGKILL, after which a retry is still recognised.
"""

from __future__ import annotations

import asyncio
import signal
import struct
import threading
import time

import aiokafka
import confluent_kafka
import kafka
import pytest
from kio.schema.errors import ErrorCode
from raw_client import RawClient
from test_broker_process import SHUTDOWN_SECONDS, free_port, start_broker

from odradek.protocol.api import ApiKey
from odradek.protocol.records import Record, RecordBatch, build_batch, iter_batches
from odradek.protocol.topic_partition import TopicPartition
from odradek.testing.embedded import EmbeddedBroker

TIMEOUT_SECONDS = 30.0
RECORDS = 20_000
# librdkafka sends at most this many records per request, so that the 20,000 records take
# some 400 Produce requests and the proxy gets to drop its quota of responses.
RECORDS_PER_BATCH = 50
DROP_EVERY = 15  # Produce responses
MAX_DROPS = 20


# -- a proxy that loses responses ----------------------------------------------------------


class DroppingProxy:
    """A loopback TCP proxy in front of a broker. Every ``every``-th Produce response (at
    most ``max_drops`` times) it closes both connections instead of passing the response
    on: the broker has written the batch, the producer never hears so and sends it again.

    It listens from construction, so that the broker can advertise its address; it forwards
    once told the broker's port. It runs its own event loop on a thread.
    """

    _SIZE = struct.Struct(">i")
    _REQUEST_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id

    def __init__(self, *, every: int, max_drops: int) -> None:
        self.every = every
        self.max_drops = max_drops
        self.drops = 0
        self.produce_responses = 0
        self._upstream_port: int | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="proxy", daemon=True)
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port: int = self._server.sockets[0].getsockname()[1]

    def forward_to(self, port: int) -> None:
        self._upstream_port = port

    def _call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(TIMEOUT_SECONDS)

    def close(self) -> None:
        async def close_server() -> None:
            self._server.close()

        self._call(close_server())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(TIMEOUT_SECONDS)

    def __enter__(self) -> DroppingProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def _serve(self, client_reader: asyncio.StreamReader,
                     client_writer: asyncio.StreamWriter) -> None:
        broker_reader, broker_writer = await asyncio.open_connection(
            "127.0.0.1", self._upstream_port)
        api_keys: dict[int, int] = {}  # correlation id -> api key, of requests in flight
        pumps = [asyncio.create_task(self._requests(client_reader, broker_writer, api_keys)),
                 asyncio.create_task(self._responses(broker_reader, client_writer, api_keys))]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            client_writer.close()
            broker_writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        api_keys: dict[int, int]) -> None:
        while frame := await self._read_frame(reader):
            api_key, _, correlation_id = self._REQUEST_HEADER.unpack_from(frame, 4)
            api_keys[correlation_id] = api_key
            writer.write(frame)

    async def _responses(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         api_keys: dict[int, int]) -> None:
        while frame := await self._read_frame(reader):
            (correlation_id,) = self._SIZE.unpack_from(frame, 4)
            if api_keys.pop(correlation_id, None) == ApiKey.PRODUCE:
                self.produce_responses += 1
                if self.produce_responses % self.every == 0 and self.drops < self.max_drops:
                    self.drops += 1
                    return  # the response is lost with the connection
            writer.write(frame)

    async def _read_frame(self, reader: asyncio.StreamReader) -> bytes | None:
        """A whole frame, size prefix included; None when the peer has closed."""
        try:
            size = await reader.readexactly(4)
            return size + await reader.readexactly(self._SIZE.unpack(size)[0])
        except (asyncio.IncompleteReadError, ConnectionError):
            return None


# -- helpers -------------------------------------------------------------------------------


def stored_batches(broker: EmbeddedBroker, topic: str) -> list[RecordBatch]:
    async def read() -> bytes:
        partition = broker.broker.replica_manager.get_partition(TopicPartition(topic, 0))
        return partition.log.read(partition.log_start_offset, 2**31 - 1).records

    return list(iter_batches(broker.call(read())))


def stored_values(broker: EmbeddedBroker, topic: str) -> list[bytes]:
    return [record.value for batch in stored_batches(broker, topic) for record in batch.records()]


def consume_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
        "log_level": 2})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while len(values) < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.2):
                if message.error() is None:
                    values.append(message.value())
        return values
    finally:
        consumer.close()


def idempotent_batch(producer_id: int, first_seq: int, count: int = 1, *, epoch: int = 0,
                     transactional: bool = False) -> bytes:
    """A batch as an idempotent producer sends it; values name the sequence numbers."""
    now = int(time.time() * 1000)
    records = [Record(i, now, None, b"seq-%d" % (first_seq + i)) for i in range(count)]
    return build_batch(records, base_offset=0, producer_id=producer_id, producer_epoch=epoch,
                       base_sequence=first_seq, is_transactional=transactional)


def new_producer_id(raw: RawClient) -> int:
    response = raw.init_producer_id()
    assert response.error_code == ErrorCode.none
    assert response.producer_epoch == 0
    return response.producer_id


# -- real producers ------------------------------------------------------------------------


def test_confluent_kafka_writes_every_record_exactly_once_through_dropped_connections(
        tmp_path):
    topic = "exactly-once"
    values = [b"%d" % i for i in range(RECORDS)]
    with DroppingProxy(every=DROP_EVERY, max_drops=MAX_DROPS) as proxy, EmbeddedBroker(
            tmp_path, advertised_listeners=f"PLAINTEXT://127.0.0.1:{proxy.port}") as broker:
        proxy.forward_to(broker.port)
        proxied = f"127.0.0.1:{proxy.port}"
        producer = confluent_kafka.Producer({
            "bootstrap.servers": proxied,
            "enable.idempotence": True,
            "batch.num.messages": RECORDS_PER_BATCH,
            "linger.ms": 1,
            # Reconnect at once: each drop would otherwise add a growing backoff.
            "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 100,
            "log_level": 2,  # the disconnects are the point: do not log them
        })
        errors: list[confluent_kafka.KafkaError] = []
        for value in values:
            producer.produce(topic, value, partition=0,
                             on_delivery=lambda error, _: error and errors.append(error))
            producer.poll(0)
        assert producer.flush(TIMEOUT_SECONDS) == 0
        assert errors == []

        assert proxy.drops == MAX_DROPS
        assert consume_values(proxied, topic, RECORDS) == values
        batches = stored_batches(broker, topic)
        assert batches[-1].next_offset == RECORDS  # nothing after them either
        assert all(batch.has_producer_id for batch in batches)


@pytest.mark.parametrize("library", ["kafka-python", "aiokafka"])
def test_python_idempotent_producers_deliver(odradek_broker, create_topic, library):
    topic = create_topic(f"idempotent-{library}")
    values = [b"value-%d" % i for i in range(500)]
    if library == "kafka-python":
        producer = kafka.KafkaProducer(bootstrap_servers=odradek_broker.bootstrap_servers,
                                       enable_idempotence=True)
        try:
            offsets = [f.get(TIMEOUT_SECONDS).offset
                       for f in [producer.send(topic, v, partition=0) for v in values]]
        finally:
            producer.close(timeout=5)
    else:
        async def produce() -> list[int]:
            producer = aiokafka.AIOKafkaProducer(
                bootstrap_servers=odradek_broker.bootstrap_servers, enable_idempotence=True)
            await producer.start()
            try:
                futures = [await producer.send(topic, v, partition=0) for v in values]
                return [m.offset for m in await asyncio.gather(*futures)]
            finally:
                await producer.stop()

        offsets = asyncio.run(produce())

    assert offsets == list(range(len(values)))
    assert stored_values(odradek_broker, topic) == values
    assert all(batch.has_producer_id for batch in stored_batches(odradek_broker, topic))


# -- InitProducerId ------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(6))
def test_init_producer_id_hands_out_a_new_id_at_epoch_0_in_every_version(odradek_broker, version):
    with RawClient(odradek_broker.port) as raw:
        first = raw.init_producer_id(version)
        second = raw.init_producer_id(version)
    assert (first.error_code, second.error_code) == (ErrorCode.none, ErrorCode.none)
    assert (first.producer_epoch, second.producer_epoch) == (0, 0)
    assert second.producer_id != first.producer_id


def test_producer_ids_are_never_handed_out_again_after_a_restart(odradek_broker):
    with RawClient(odradek_broker.port) as raw:
        before = {new_producer_id(raw) for _ in range(5)}
    odradek_broker.restart()
    with RawClient(odradek_broker.port) as raw:
        after = new_producer_id(raw)
    assert after > max(before)


def test_an_idempotent_producer_asking_again_gets_a_new_id(odradek_broker):
    # KIP-360 requests carry the current id and epoch; without a transactional id Kafka
    # answers with a fresh id at epoch 0 (the producer bumps its epoch itself).
    with RawClient(odradek_broker.port) as raw:
        producer_id = new_producer_id(raw)
        again = raw.init_producer_id(producer_id=producer_id, producer_epoch=0)
    assert again.error_code == ErrorCode.none
    assert (again.producer_id != producer_id, again.producer_epoch) == (True, 0)


@pytest.mark.parametrize(("fields", "error"), [
    ({"transactional_id": "payments"}, ErrorCode.not_coordinator),  # no FindCoordinator yet
    ({"transactional_id": ""}, ErrorCode.invalid_request),
    ({"producer_id": 7}, ErrorCode.invalid_request),  # an id without its epoch
    ({"producer_epoch": 3}, ErrorCode.invalid_request),
], ids=["transactional", "empty-transactional-id", "id-without-epoch", "epoch-without-id"])
def test_init_producer_id_refusals(odradek_broker, fields, error):
    with RawClient(odradek_broker.port) as raw:
        response = raw.init_producer_id(**fields)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (error, -1, -1)


# -- Produce with a producer id ------------------------------------------------------------


def test_a_retried_batch_gets_its_original_offset_and_is_written_once(odradek_broker,
                                                                      create_topic):
    topic = create_topic("retried")
    with RawClient(odradek_broker.port) as raw:
        producer_id = new_producer_id(raw)
        first = raw.produce(topic, idempotent_batch(producer_id, 0, 3))
        second = raw.produce(topic, idempotent_batch(producer_id, 3, 2))
        retry = raw.produce(topic, idempotent_batch(producer_id, 0, 3))
    assert [(r.error_code, r.base_offset) for r in (first, second, retry)] == [
        (ErrorCode.none, 0), (ErrorCode.none, 3), (ErrorCode.none, 0)]
    assert stored_values(odradek_broker, topic) == [b"seq-%d" % i for i in range(5)]


def test_a_gap_in_the_sequences_is_out_of_order_sequence_number(odradek_broker, create_topic):
    topic = create_topic("gap")
    with RawClient(odradek_broker.port) as raw:
        producer_id = new_producer_id(raw)
        assert raw.produce(topic, idempotent_batch(producer_id, 0, 2)).error_code == 0
        gap = raw.produce(topic, idempotent_batch(producer_id, 3))
    assert gap.error_code == ErrorCode.out_of_order_sequence_number
    assert gap.base_offset == -1
    assert stored_values(odradek_broker, topic) == [b"seq-0", b"seq-1"]


def test_a_fenced_epoch_is_invalid_producer_epoch(odradek_broker, create_topic):
    topic = create_topic("fenced")
    with RawClient(odradek_broker.port) as raw:
        producer_id = new_producer_id(raw)
        assert raw.produce(topic, idempotent_batch(producer_id, 0, epoch=1)).error_code == 0
        zombie = raw.produce(topic, idempotent_batch(producer_id, 1, epoch=0))
    assert zombie.error_code == ErrorCode.invalid_producer_epoch


def test_a_transactional_batch_belonging_to_no_transaction_is_invalid_txn_state(
        odradek_broker, create_topic):
    """A transactional batch is written in a transaction its producer has started in the
    partition (AddPartitionsToTxn first; from Produce v12 the write adds it). A producer
    with no transaction going has none for the batch to belong to: the partition leader,
    asking the transaction coordinator (KIP-890), refuses it and writes nothing."""
    topic = create_topic("transactional")
    with RawClient(odradek_broker.port) as raw:
        initialized = raw.init_transactional_id("no-transaction")
        assert (initialized.error_code, initialized.producer_epoch) == (ErrorCode.none, 0)
        response = raw.produce(topic, idempotent_batch(initialized.producer_id, 0,
                                                       transactional=True),
                               transactional_id="no-transaction")
    assert (response.error_code, response.base_offset) == (ErrorCode.invalid_txn_state, -1)
    assert stored_values(odradek_broker, topic) == []


# -- restarts ------------------------------------------------------------------------------


def test_a_retry_after_a_clean_restart_is_still_recognised(odradek_broker, create_topic):
    topic = create_topic("clean-restart")
    with RawClient(odradek_broker.port) as raw:
        producer_id = new_producer_id(raw)
        offsets = [raw.produce(topic, idempotent_batch(producer_id, seq)).base_offset
                   for seq in range(4)]
    odradek_broker.restart()
    # The clean stop left a snapshot at the log end offset: nothing to replay.
    assert (odradek_broker.data_dir / f"{topic}-0" / f"{4:020d}.snapshot").exists()
    with RawClient(odradek_broker.port) as raw:
        retries = [raw.produce(topic, idempotent_batch(producer_id, seq)).base_offset
                   for seq in range(4)]
        gap = raw.produce(topic, idempotent_batch(producer_id, 5))
        following = raw.produce(topic, idempotent_batch(producer_id, 4))
    assert retries == offsets  # all four were in flight: each is still known
    assert gap.error_code == ErrorCode.out_of_order_sequence_number
    assert (following.error_code, following.base_offset) == (ErrorCode.none, 4)


def test_a_retry_after_the_broker_is_killed_is_still_recognised(tmp_path):
    """SIGKILL: no snapshot at shutdown. The state comes from the last roll's snapshot and
    the batches after it, replayed from the log."""
    port = free_port()
    topic = "killed"
    broker = start_broker(tmp_path, port)
    try:
        with RawClient(port) as raw:
            created = raw.request(ApiKey.CREATE_TOPICS, 7, timeout=10_000, validate_only=False,
                                  topics=[{"name": topic, "num_partitions": 1,
                                           "replication_factor": 1, "assignments": [],
                                           "configs": [{"name": "segment.bytes",
                                                        "value": "2048"}]}])
            assert created.topics[0].error_code == ErrorCode.none
            producer_id = new_producer_id(raw)
            offsets = [raw.produce(topic, idempotent_batch(producer_id, 5 * i, 5)).base_offset
                       for i in range(40)]
        assert offsets == [5 * i for i in range(40)]
        rolled = sorted((tmp_path / f"{topic}-0").glob("*.snapshot"))
        assert rolled, "a segment roll snapshots the producer state"
        broker.send_signal(signal.SIGKILL)
        broker.wait(SHUTDOWN_SECONDS)

        broker = start_broker(tmp_path, port)
        with RawClient(port) as raw:
            retries = [raw.produce(topic, idempotent_batch(producer_id, 5 * i, 5)).base_offset
                       for i in range(35, 40)]
            following = raw.produce(topic, idempotent_batch(producer_id, 200))
        assert retries == offsets[35:]
        assert (following.error_code, following.base_offset) == (ErrorCode.none, 200)
    finally:
        broker.kill()
        broker.communicate(timeout=SHUTDOWN_SECONDS)
