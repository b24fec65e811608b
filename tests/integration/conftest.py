"""Integration helpers: topics with configs, and one adapter per real Kafka client.

A test is written once against :class:`Client` and runs with confluent-kafka, kafka-python,
aiokafka and kcat (``client`` fixture; ``@pytest.mark.clients(...)`` narrows the list).
Each adapter uses its library the way an application does: a producer that sends and waits
for its delivery reports, a consumer that assigns partitions, seeks and polls (no group:
assign is what a consumer of specific partitions uses). What a test sends is a dict with
the fields of a producer record; what it gets back are :class:`Consumed` and
:class:`Delivered`, the same for every client, in Kafka's vocabulary.

Records to send::

    {"key": b"k", "value": b"v", "headers": [("h", b"1")], "timestamp": 1_700_000_000_000,
     "partition": 0}       # every field but "value" may be left out; None is a null

Every wait is bounded: a consumer that has not received ``count`` records within
``timeout`` seconds raises ``TimeoutError`` naming what it got; clients are closed in
``finally``.

Fixtures: ``client``, ``bootstrap``, ``create_topic(name, partitions=1, **configs)``,
``seed_producer``, ``consuming(client, bootstrap, topic, count, **options)`` (a consumer on
a thread, positioned before the test produces) and ``stored_compression_types(topic)``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

import aiokafka
import aiokafka.errors
import confluent_kafka
import confluent_kafka.admin
import kafka
import kafka.codec
import kafka.errors
import pytest

from odradek.protocol.records import CompressionType, TimestampType, iter_batches
from odradek.protocol.topic_partition import TopicPartition
from odradek.testing.embedded import EmbeddedBroker

# Long enough for a client to bootstrap and move 10k records on a loaded 2-core machine;
# a healthy run never waits for it.
TIMEOUT_SECONDS = 20.0
# How often a consumer loop checks its deadline while polling.
POLL_INTERVAL_SECONDS = 0.1

Start = int | str  # an offset, or "earliest" / "latest" (auto.offset.reset's words)


def create_topic(broker: EmbeddedBroker, name: str, partitions: int = 1, **configs: Any) -> str:
    """Creates ``name`` with confluent-kafka's ``AdminClient.create_topics``, as an
    application does; topic configs are spelt with '_' for '.' (``max_message_bytes=...``)."""
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic = confluent_kafka.admin.NewTopic(
        name, partitions, 1,
        config={key.replace("_", "."): str(value) for key, value in configs.items()})
    admin.create_topics([topic], operation_timeout=TIMEOUT_SECONDS)[name].result(TIMEOUT_SECONDS)
    return name


def stored_compression_types(broker: EmbeddedBroker, topic: str,
                             partition: int = 0) -> set[CompressionType]:
    """The compression codecs of the batches in the partition's log, as stored."""

    async def read() -> bytes:
        replica = broker.broker.replica_manager.get_partition(TopicPartition(topic, partition))
        return replica.log.read(replica.log_start_offset, 2**31 - 1).records

    return {batch.compression_type for batch in iter_batches(broker.call(read()))}


@dataclass(frozen=True, slots=True)
class Consumed:
    """A record as a consumer hands it to the application."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int
    timestamp_type: TimestampType
    # time.monotonic() when the client returned it to the application.
    received_at: float = field(default_factory=time.monotonic, compare=False)

    def as_sent(self) -> dict:
        """The record in the form a test sends it: key, value, and headers if it has any."""
        sent = {"key": self.key, "value": self.value}
        return sent | {"headers": self.headers} if self.headers else sent


@dataclass(frozen=True, slots=True)
class Delivered:
    """A producer's delivery report (record metadata) for one record."""

    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType | None  # None where the client does not say


def _too_few(client: str, got: list[Consumed], count: int, timeout: float) -> TimeoutError:
    return TimeoutError(f"{client} consumed {len(got)} of {count} records in {timeout} s: "
                        f"{[(m.partition, m.offset) for m in got][:20]}")


class Client:
    """What every adapter offers; the class attributes say what the client can do."""

    name: str
    sets_timestamps = True  # the producer can give a record its CreateTime
    null_header_values = True  # the producer can send a header whose value is null
    reports_deliveries = True  # produce() returns the delivery reports

    def codec_skip_reason(self, codec: str) -> str | None:
        """Why this client cannot produce with ``codec`` here, if it cannot."""
        return None

    def produce(self, bootstrap: str, topic: str, records: Sequence[Mapping], *,
                compression: str | None = None,
                security: Mapping[str, Any] | None = None) -> list[Delivered] | None:
        """Sends ``records`` in order and waits for all to be acknowledged; raises the
        client's own error for the first that failed. ``security`` holds the client's own
        connection settings (TLS, SASL), in its own names, given to it as they are."""
        raise NotImplementedError

    def consume(self, bootstrap: str, topic: str, count: int, *, partitions: Sequence[int] = (0,),
                start: Start = "earliest", start_timestamp: int | None = None,
                config: Mapping[str, int | str] | None = None,
                when_positioned: Callable[[], None] | None = None,
                timeout: float = TIMEOUT_SECONDS,
                security: Mapping[str, Any] | None = None) -> list[Consumed]:
        """Assigns ``partitions`` at ``start`` (or the first offset at ``start_timestamp``,
        found with the client's offsets-for-times) and returns the first ``count`` records.

        ``config`` holds consumer settings by their Kafka (Java client) names
        (``fetch.max.wait.ms``, ``fetch.min.bytes``, ``max.partition.fetch.bytes``,
        ``fetch.max.bytes``, ``auto.offset.reset``), translated for each client.
        ``when_positioned`` is called once the start offsets are known to the consumer, so
        that a test can produce what it expects the consumer to wait for.
        """
        raise NotImplementedError

    def is_message_too_large(self, error: BaseException) -> bool:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


# -- confluent-kafka (librdkafka) ------------------------------------------------------


# librdkafka's RD_KAFKA_PARTITION_UA: the producer's partitioner picks the partition.
_ANY_PARTITION = -1
# librdkafka spells one Kafka consumer setting differently; the others are the same.
_LIBRDKAFKA_NAMES = {"fetch.max.wait.ms": "fetch.wait.max.ms"}
_CONFLUENT_TIMESTAMP_TYPES = {
    confluent_kafka.TIMESTAMP_CREATE_TIME: TimestampType.CREATE_TIME,
    confluent_kafka.TIMESTAMP_LOG_APPEND_TIME: TimestampType.LOG_APPEND_TIME,
}


def _librdkafka_configs(config: Mapping[str, int | str] | None) -> dict[str, int | str]:
    configs = {_LIBRDKAFKA_NAMES.get(name, name): value for name, value in (config or {}).items()}
    if "fetch.max.bytes" in configs:
        # librdkafka refuses fetch.max.bytes below message.max.bytes, its request size limit;
        # a consumer's requests are small, so lowering both is how it asks for small fetches.
        configs["message.max.bytes"] = configs["fetch.max.bytes"]
    return configs


class ConfluentKafka(Client):
    name = "confluent-kafka"

    def produce(self, bootstrap, topic, records, *, compression=None, security=None):
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                             "compression.type": compression or "none",
                                             **(security or {})})
        reports: list[Delivered | None] = [None] * len(records)
        errors: list[confluent_kafka.KafkaError] = []

        def report(index: int, error, message) -> None:
            if error is not None:
                errors.append(error)
                return
            timestamp_type, timestamp = message.timestamp()
            reports[index] = Delivered(message.partition(), message.offset(), timestamp,
                                       _CONFLUENT_TIMESTAMP_TYPES.get(timestamp_type))

        for index, record in enumerate(records):
            producer.produce(topic, value=record["value"], key=record.get("key"),
                             headers=list(record.get("headers", ())) or None,
                             partition=record.get("partition", _ANY_PARTITION),
                             timestamp=record.get("timestamp") or 0,
                             on_delivery=functools.partial(report, index))
            producer.poll(0)
        if producer.flush(TIMEOUT_SECONDS):
            raise TimeoutError(f"{self.name}: records still unacknowledged after flush")
        if errors:
            raise confluent_kafka.KafkaException(errors[0])
        return reports

    def consume(self, bootstrap, topic, count, *, partitions=(0,), start="earliest",
                start_timestamp=None, config=None, when_positioned=None, timeout=TIMEOUT_SECONDS,
                security=None):
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": "odradek-integration",  # required by the client; only assign is used
            "enable.auto.commit": False,
            "enable.partition.eof": True,  # tells when a consumer at "latest" is in place
            **_librdkafka_configs(config),
            **(security or {}),
        })
        deadline = time.monotonic() + timeout
        got: list[Consumed] = []
        try:
            if start_timestamp is not None:
                assignment = consumer.offsets_for_times(
                    [confluent_kafka.TopicPartition(topic, p, start_timestamp) for p in partitions],
                    timeout)
            else:
                offset = {"earliest": confluent_kafka.OFFSET_BEGINNING,
                          "latest": confluent_kafka.OFFSET_END}.get(start, start)
                assignment = [confluent_kafka.TopicPartition(topic, p, offset) for p in partitions]
            consumer.assign(assignment)
            # A logical start is resolved by the client's first fetch; an offset is known now.
            logical_start = isinstance(start, str) and start_timestamp is None
            unresolved = set(partitions) if logical_start else set()
            if not unresolved and when_positioned:
                when_positioned()
            while len(got) < count and time.monotonic() < deadline:
                message = consumer.poll(POLL_INTERVAL_SECONDS)
                if message is None:
                    continue
                error = message.error()
                if error is not None and error.code() != confluent_kafka.KafkaError._PARTITION_EOF:
                    raise confluent_kafka.KafkaException(error)
                if unresolved:
                    unresolved.discard(message.partition())
                    if not unresolved and when_positioned:
                        when_positioned()
                if error is None:
                    timestamp_type, timestamp = message.timestamp()
                    got.append(Consumed(message.partition(), message.offset(), message.key(),
                                        message.value(), message.headers() or [], timestamp,
                                        _CONFLUENT_TIMESTAMP_TYPES[timestamp_type]))
        finally:
            consumer.close()
        if len(got) < count:
            raise _too_few(self.name, got, count, timeout)
        return got

    def is_message_too_large(self, error):
        return (isinstance(error, confluent_kafka.KafkaException)
                and error.args[0].code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE)


# -- kafka-python ----------------------------------------------------------------------


def _python_configs(config: Mapping[str, int | str] | None) -> dict[str, int | str]:
    """kafka-python and aiokafka name settings like Kafka with '_' for '.'."""
    return {name.replace(".", "_"): value for name, value in (config or {}).items()}


def _python_consumed(batches: Mapping[Any, list]) -> list[Consumed]:
    """What kafka-python's poll() and aiokafka's getmany() return, as :class:`Consumed`."""
    return [Consumed(m.partition, m.offset, m.key, m.value, list(m.headers), m.timestamp,
                     TimestampType(m.timestamp_type))
            for messages in batches.values() for m in messages]


class KafkaPython(Client):
    name = "kafka-python"
    null_header_values = False  # send() refuses: "All headers items must be (str, bytes)"

    def codec_skip_reason(self, codec):
        if getattr(kafka.codec, f"has_{codec}")():
            return None
        library = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}[codec]
        return (f"kafka-python {kafka.__version__} has no {codec} codec without the "
                f"{library} package (it does not use cramjam), which is not installed")

    def produce(self, bootstrap, topic, records, *, compression=None, security=None):
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression,
                                       **(security or {}))
        try:
            futures = [
                producer.send(topic, value=record["value"], key=record.get("key"),
                              headers=list(record.get("headers", ())),
                              partition=record.get("partition"),
                              timestamp_ms=record.get("timestamp"))
                for record in records
            ]
            producer.flush(TIMEOUT_SECONDS)
            return [Delivered(m.partition, m.offset, m.timestamp, None)
                    for m in (f.get(TIMEOUT_SECONDS) for f in futures)]
        finally:
            producer.close(timeout=5)

    def consume(self, bootstrap, topic, count, *, partitions=(0,), start="earliest",
                start_timestamp=None, config=None, when_positioned=None, timeout=TIMEOUT_SECONDS,
                security=None):
        consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                       **_python_configs(config), **(security or {}))
        deadline = time.monotonic() + timeout
        got: list[Consumed] = []
        try:
            assigned = [kafka.TopicPartition(topic, p) for p in partitions]
            consumer.assign(assigned)
            if start_timestamp is not None:
                found = consumer.offsets_for_times({tp: start_timestamp for tp in assigned},
                                                   timeout_ms=timeout * 1000)
                for tp, offset_and_timestamp in found.items():
                    if offset_and_timestamp is None:
                        consumer.seek_to_end(tp)
                    else:
                        consumer.seek(tp, offset_and_timestamp.offset)
            elif start == "earliest":
                consumer.seek_to_beginning(*assigned)
            elif start == "latest":
                consumer.seek_to_end(*assigned)
            else:
                for tp in assigned:
                    consumer.seek(tp, start)
            for tp in assigned:
                # Resolves earliest/latest (ListOffsets) now rather than at the first poll.
                consumer.position(tp, timeout_ms=timeout * 1000)
            if when_positioned:
                when_positioned()
            while len(got) < count and time.monotonic() < deadline:
                got += _python_consumed(consumer.poll(timeout_ms=POLL_INTERVAL_SECONDS * 1000))
        finally:
            consumer.close(autocommit=False)
        if len(got) < count:
            raise _too_few(self.name, got, count, timeout)
        return got

    def is_message_too_large(self, error):
        return isinstance(error, kafka.errors.MessageSizeTooLargeError)


# -- aiokafka --------------------------------------------------------------------------


class AioKafka(Client):
    """aiokafka on a fresh event loop per call, as a synchronous test drives it."""

    name = "aiokafka"

    def produce(self, bootstrap, topic, records, *, compression=None, security=None):
        return asyncio.run(self._produce(bootstrap, topic, records, compression, security))

    async def _produce(self, bootstrap, topic, records, compression, security):
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap,
                                             compression_type=compression,
                                             request_timeout_ms=int(TIMEOUT_SECONDS * 1000),
                                             **(security or {}))
        await producer.start()
        try:
            futures = [
                await producer.send(topic, value=record["value"], key=record.get("key"),
                                    headers=list(record.get("headers", ())),
                                    partition=record.get("partition"),
                                    timestamp_ms=record.get("timestamp"))
                for record in records
            ]
            sent = await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_SECONDS)
        finally:
            await producer.stop()
        return [Delivered(m.partition, m.offset, m.timestamp, TimestampType(m.timestamp_type))
                for m in sent]

    def consume(self, bootstrap, topic, count, *, partitions=(0,), start="earliest",
                start_timestamp=None, config=None, when_positioned=None, timeout=TIMEOUT_SECONDS,
                security=None):
        return asyncio.run(self._consume(bootstrap, topic, count, partitions, start,
                                         start_timestamp, config, when_positioned, timeout,
                                         security))

    async def _consume(self, bootstrap, topic, count, partitions, start, start_timestamp, config,
                       when_positioned, timeout, security):
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap,
                                             enable_auto_commit=False,
                                             **_python_configs(config), **(security or {}))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        got: list[Consumed] = []
        await consumer.start()
        try:
            assigned = [aiokafka.TopicPartition(topic, p) for p in partitions]
            consumer.assign(assigned)
            if start_timestamp is not None:
                found = await consumer.offsets_for_times({tp: start_timestamp for tp in assigned})
                for tp, offset_and_timestamp in found.items():
                    if offset_and_timestamp is None:
                        await consumer.seek_to_end(tp)
                    else:
                        consumer.seek(tp, offset_and_timestamp.offset)
            elif start == "earliest":
                await consumer.seek_to_beginning(*assigned)
            elif start == "latest":
                await consumer.seek_to_end(*assigned)
            else:
                for tp in assigned:
                    consumer.seek(tp, start)
            for tp in assigned:
                await asyncio.wait_for(consumer.position(tp), timeout)
            if when_positioned:
                when_positioned()
            while len(got) < count and loop.time() < deadline:
                got += _python_consumed(
                    await consumer.getmany(timeout_ms=POLL_INTERVAL_SECONDS * 1000))
        finally:
            await consumer.stop()
        if len(got) < count:
            raise _too_few(self.name, got, count, timeout)
        return got

    def is_message_too_large(self, error):
        return isinstance(error, aiokafka.errors.MessageSizeTooLargeError)


# -- kcat ------------------------------------------------------------------------------


class KcatError(Exception):
    """kcat exited with an error; ``stderr`` says why."""

    def __init__(self, returncode: int, stderr: str) -> None:
        super().__init__(f"kcat exited with {returncode}: {stderr.strip()}")
        self.stderr = stderr


# Separators that never occur in test data: kcat splits its input on them (-D, -K).
_KCAT_RECORD_END = b"\x1e"
_KCAT_KEY_END = b"\x1f"
_KCAT_TIMESTAMP_TYPES = {"create": TimestampType.CREATE_TIME,
                         "logappend": TimestampType.LOG_APPEND_TIME}


def _kcat_properties(properties: Mapping[str, Any] | None) -> list[str]:
    """librdkafka properties as kcat's -X options."""
    return [option for name, value in (properties or {}).items()
            for option in ("-X", f"{name}={value}")]


def _kcat_bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


class Kcat(Client):
    """kcat in a subprocess: ``-P`` reads records from stdin, ``-C -J`` prints JSON lines.

    Its command line sets headers, null-ness (``-Z``) and partition for a whole run, so a
    produce() is one kcat run per stretch of records that agree on them.
    """

    name = "kcat"
    sets_timestamps = False  # kcat -P has no option for a record's timestamp
    reports_deliveries = False  # kcat prints nothing per delivered record

    def produce(self, bootstrap, topic, records, *, compression=None, security=None):
        def run_options(record: Mapping) -> tuple:
            key, value = record.get("key"), record["value"]
            if (key is None and value == b"") or (key == b"" and value is None):
                # -Z turns every empty field into a null, and without -K keys are null.
                raise ValueError(f"kcat cannot produce key={key!r} with value={value!r}")
            return (tuple(record.get("headers", ())), key is not None, value is None,
                    record.get("partition"))

        for (headers, keyed, null_values, partition), run in groupby(records, run_options):
            run = list(run)
            if any(record.get("timestamp") is not None for record in run):
                raise ValueError("kcat -P cannot set a record's timestamp")
            command = ["-P", "-t", topic, "-D", r"\x1e"]
            command += ["-K", r"\x1f"] if keyed else []
            command += ["-Z"] if null_values else []
            command += ["-p", str(partition)] if partition is not None else []
            command += ["-z", compression] if compression else []
            for name, value in headers:
                command += ["-H", name if value is None else f"{name}={value.decode()}"]
            command += _kcat_properties(security)
            self.run(bootstrap, *command, stdin=b"".join(
                (record["key"] + _KCAT_KEY_END if keyed else b"") + (record["value"] or b"")
                + _KCAT_RECORD_END for record in run))
        return None

    def run(self, bootstrap: str, *arguments: str, stdin: bytes = b"") -> str:
        """Runs ``kcat -b bootstrap arguments...`` to its end; returns what it printed."""
        done = subprocess.run(["kcat", "-b", bootstrap, *arguments], input=stdin,
                              capture_output=True, timeout=TIMEOUT_SECONDS)
        if done.returncode != 0:
            raise KcatError(done.returncode, done.stderr.decode())
        return done.stdout.decode()

    def consume(self, bootstrap, topic, count, *, partitions=(0,), start="earliest",
                start_timestamp=None, config=None, when_positioned=None, timeout=TIMEOUT_SECONDS,
                security=None):
        """One partition is ``-p``; several mean every partition of the topic (kcat's
        default), which the caller must be asking for."""
        if start_timestamp is not None:
            offset = f"s@{start_timestamp}"
        else:
            offset = {"earliest": "beginning", "latest": "end"}.get(start, str(start))
        command = ["kcat", "-b", bootstrap, "-C", "-J", "-t", topic, "-o", offset,
                   "-c", str(count)]
        command += ["-p", str(partitions[0])] if len(partitions) == 1 else []
        command += _kcat_properties({**_librdkafka_configs(config), **(security or {})})
        # -e ends the run at the end of the partitions; a test waiting for new records
        # (when_positioned) needs kcat to keep consuming until -c records came.
        command += [] if when_positioned else ["-e"]
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as kcat:
            stderr: list[bytes] = []
            watcher = threading.Thread(target=self._watch_stderr,
                                       args=(kcat, stderr, len(partitions), when_positioned),
                                       daemon=True)
            watcher.start()
            killer = threading.Timer(timeout, kcat.kill)
            killer.start()
            try:
                got = [self._consumed(line) for line in kcat.stdout]
                kcat.wait()
            finally:
                killer.cancel()
                watcher.join(timeout)
        if kcat.returncode != 0 and len(got) < count:
            raise KcatError(kcat.returncode, b"".join(stderr).decode())
        if len(got) < count:
            raise _too_few(self.name, got, count, timeout)
        return got

    @staticmethod
    def _watch_stderr(kcat: subprocess.Popen, lines: list[bytes], partitions: int,
                      when_positioned: Callable[[], None] | None) -> None:
        """kcat says "Reached end of topic t [p] at offset n" when it is at the end."""
        at_end: set[bytes] = set()
        for line in kcat.stderr:
            lines.append(line)
            if when_positioned and line.startswith(b"% Reached end of topic"):
                at_end.add(line.split(b"[")[1].split(b"]")[0])
                if len(at_end) == partitions:
                    when_positioned()
                    when_positioned = None

    @staticmethod
    def _consumed(line: bytes) -> Consumed:
        message = json.loads(line)
        pairs = message.get("headers", [])
        return Consumed(
            message["partition"], message["offset"], _kcat_bytes(message["key"]),
            _kcat_bytes(message["payload"]),
            [(name, _kcat_bytes(value)) for name, value in zip(pairs[::2], pairs[1::2])],
            message["ts"], _KCAT_TIMESTAMP_TYPES[message["tstype"]],
        )

    def is_message_too_large(self, error):
        return isinstance(error, KcatError) and "Broker: Message size too large" in error.stderr


CLIENTS: dict[str, Client] = {c.name: c for c in
                               (ConfluentKafka(), KafkaPython(), AioKafka(), Kcat())}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "clients(*names): run the test with these clients only (default: all)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "client" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("clients")
    names = marker.args if marker else tuple(CLIENTS)
    metafunc.parametrize("client", [
        pytest.param(CLIENTS[name], id=name, marks=_client_marks(name)) for name in names
    ])


def _client_marks(name: str) -> list[pytest.MarkDecorator]:
    if name != "kcat":
        return []
    return [pytest.mark.kcat,
            pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")]


@pytest.fixture
def bootstrap(odradek_broker: EmbeddedBroker) -> str:
    return odradek_broker.bootstrap_servers


@pytest.fixture(name="create_topic")
def create_topic_on_broker(odradek_broker: EmbeddedBroker) -> Callable[..., str]:
    """``create_topic(name, partitions=1, **configs)`` on this test's broker."""
    return functools.partial(create_topic, odradek_broker)


@pytest.fixture(name="stored_compression_types")
def stored_compression_types_on_broker(odradek_broker: EmbeddedBroker) -> Callable[..., set]:
    """``stored_compression_types(topic, partition=0)`` on this test's broker."""
    return functools.partial(stored_compression_types, odradek_broker)


@pytest.fixture
def seed_producer() -> Client:
    """confluent-kafka's producer, for data a test only consumes with the client under test
    (records with timestamps for kcat, which cannot set them)."""
    return CLIENTS["confluent-kafka"]


@contextmanager
def consuming_in_background(client: Client, bootstrap: str, topic: str, count: int,
                            **options: Any) -> Iterator[Future[list[Consumed]]]:
    """Runs ``client.consume(...)`` on a thread; the body runs once the consumer is
    positioned, so that what it produces is what the consumer is waiting for. The future
    holds the consumed records; leaving the block waits for the consumer to finish."""
    positioned = threading.Event()
    with ThreadPoolExecutor(1, thread_name_prefix=f"{client.name}-consumer") as pool:
        future = pool.submit(client.consume, bootstrap, topic, count,
                             when_positioned=positioned.set, **options)
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while not positioned.wait(POLL_INTERVAL_SECONDS):
            if future.done():
                future.result()  # raises why the consumer ended
                raise AssertionError(f"{client.name} consumer ended before it was positioned")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{client.name} consumer not positioned in {TIMEOUT_SECONDS} s")
        yield future


@pytest.fixture
def consuming() -> Callable[..., Any]:
    """``with consuming(client, bootstrap, topic, count, **options) as future:`` (see
    :func:`consuming_in_background`)."""
    return consuming_in_background
