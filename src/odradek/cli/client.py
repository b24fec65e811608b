"""librdkafka clients for the client commands, and the one place a KafkaError becomes a line.

Every command opens ``with Kafka(bootstrap_servers, command_config) as kafka:`` and takes
its admin client, producer or consumer from it, so they all share one configuration (short
timeouts, quiet logs, the user's -X properties last). A ``KafkaException`` escaping the block
becomes one error line and exit code 1, never a traceback.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from odradek.cli.arguments import key_value_pairs
from odradek.cli.errors import fail

K = TypeVar("K")

# A command answers or fails within seconds: admin requests and metadata lookups give up
# after this, which also bounds how long an unreachable broker takes to report (~10 s).
REQUEST_TIMEOUT_SECONDS = 10
# How long the controller may take to finish a topic creation or deletion before it answers;
# below the request timeout so that its answer, not our own timeout, is what we report.
OPERATION_TIMEOUT_SECONDS = 5
# An address that swallows SYNs fails after 5 s instead of librdkafka's 30 s.
CONNECTION_SETUP_TIMEOUT_MS = 5_000
# librdkafka's default (300 s) would keep `produce` waiting five minutes on a dead broker.
MESSAGE_TIMEOUT_MS = 30_000
# syslog CRIT: connection failures (logged at ERR) become one error line of ours instead of a
# stream of librdkafka log lines. `-X log_level=7 -X debug=...` brings them back.
QUIET_LOG_LEVEL = 2
# librdkafka's fetch.queue.backoff.ms for consumers. Its default, 1000 ms, stops fetching a
# partition that long once 100,000 of its records wait in the client, which a command drains
# far sooner, so reading a large topic would be mostly pauses (`perf consume`: 150,000
# records/s against 630,000). 0 would spin librdkafka's broker thread on a full queue.
CONSUMER_QUEUE_BACKOFF_MS = 10

ADMIN_TIMEOUTS = {"request_timeout": REQUEST_TIMEOUT_SECONDS}
ADMIN_OPERATION_TIMEOUTS = {**ADMIN_TIMEOUTS, "operation_timeout": OPERATION_TIMEOUT_SECONDS}

_REASONS = {
    KafkaError.UNKNOWN_TOPIC_OR_PART: "does not exist",
    KafkaError.TOPIC_ALREADY_EXISTS: "already exists",
}
_TIMEOUTS = {KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT}

_librdkafka_log = logging.getLogger("odradek.librdkafka")
_librdkafka_log.propagate = False
_librdkafka_log.setLevel(logging.DEBUG)  # librdkafka's log_level does the filtering
_librdkafka_handler = logging.StreamHandler(sys.stderr)
_librdkafka_handler.setFormatter(logging.Formatter("librdkafka %(levelname)s: %(message)s"))
_librdkafka_log.addHandler(_librdkafka_handler)


class Kafka:
    """The librdkafka clients of one command, built from one configuration.

    librdkafka reports a refused or dropped connection only to ``error_cb``; the last such
    error is kept so that a later timeout can say why the broker was not reached.
    Not thread-safe; one per command.
    """

    def __init__(self, bootstrap_servers: str, properties: list[str] | None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._properties = dict(key_value_pairs(properties, "--command-config"))
        self._all_brokers_down = False
        self._transport_error: KafkaError | None = None
        self._admin: AdminClient | None = None
        self._consumers: list[Consumer] = []

    def __enter__(self) -> Kafka:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        for consumer in self._consumers:
            consumer.close()
        if isinstance(exc, KafkaException):
            if self._admin is not None:
                self._admin.poll(0)  # serve error_cb (and logs) queued during a blocking call
            fail(self.describe(_kafka_error(exc)))

    def config(self, **defaults: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "socket.connection.setup.timeout.ms": CONNECTION_SETUP_TIMEOUT_MS,
            "log_level": QUIET_LOG_LEVEL,
            **defaults,
            **self._properties,
            "logger": _librdkafka_log,
            "error_cb": self._on_error,
        }

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.config())
        return self._admin

    def producer(self, **defaults: Any) -> Producer:
        return Producer(self.config(**{"message.timeout.ms": MESSAGE_TIMEOUT_MS, **defaults}))

    def consumer(self, **defaults: Any) -> Consumer:
        consumer = Consumer(self.config(**{"fetch.queue.backoff.ms": CONSUMER_QUEUE_BACKOFF_MS,
                                           **defaults}))
        self._consumers.append(consumer)
        return consumer

    def partitions(self, client: Producer | Consumer, topic: str,
                   only: int | None = None) -> list[int]:
        """The partition ids of ``topic`` (or just ``only``, if given), from a metadata
        request; fails if the topic or that partition does not exist.

        A producer's request may auto-create the topic where the broker allows it, as
        Kafka's console producer does; its partitions may then have no leader yet
        (LEADER_NOT_AVAILABLE), which the producer waits out.
        """
        try:
            metadata = client.list_topics(topic, timeout=REQUEST_TIMEOUT_SECONDS).topics.get(topic)
        except KafkaException:
            client.poll(0)  # serve error_cb: a refused connection explains the failure best
            raise
        error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART) if metadata is None else metadata.error
        if error is not None and error.code() != KafkaError.LEADER_NOT_AVAILABLE:
            fail(self.describe(error, f"topic {topic!r}"))
        if only is None:
            return sorted(metadata.partitions)
        if only not in metadata.partitions:
            fail(f"topic {topic!r} has no partition {only} "
                 f"(it has {len(metadata.partitions)})")
        return [only]

    def settle(
        self,
        futures: Mapping[K, Future],
        subject: Callable[[K], str],
        ignore: Collection[int] = (),
    ) -> Iterator[tuple[K, Any]]:
        """Waits for admin results; yields ``(key, result)`` for each success, then fails with
        one line naming every failure whose error code is not in ``ignore``."""
        self._wait(futures.values())
        failures = []
        for key, future in futures.items():
            error = future.exception()
            if error is None:
                yield key, future.result()
            elif not isinstance(error, KafkaException):
                failures.append(f"{subject(key)}: {error}")
            elif _kafka_error(error).code() not in ignore:
                failures.append(self.describe(_kafka_error(error), subject(key)))
        if failures:
            fail("; ".join(failures))

    def result(self, future: Future, subject: str) -> Any:
        [(_, value)] = self.settle({subject: future}, str)
        return value

    def describe(self, error: KafkaError, subject: str | None = None) -> str:
        """One line for the user: who could not be reached, or what is wrong with what."""
        code = error.code()
        if code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE) or (
            code in _TIMEOUTS and self._all_brokers_down
        ):
            cause = self._transport_error or error
            return f"cannot reach a broker at {self.bootstrap_servers}: {cause.str()}"
        if code in _TIMEOUTS:
            reason = (f"no answer from the broker at {self.bootstrap_servers} in time "
                      f"({error.str()})")
        else:
            reason = _REASONS.get(code) or f"{error.str()} ({error.name()})"
        return f"{subject}: {reason}" if subject else reason

    def _wait(self, futures: Collection[Future]) -> None:
        # Polling serves error_cb and librdkafka's log lines while the background thread
        # resolves the futures; librdkafka's own request timeout ends this loop.
        while not all(future.done() for future in futures):
            self.admin.poll(0.1)

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._all_brokers_down = True
        elif error.code() in (KafkaError._TRANSPORT, KafkaError._RESOLVE):
            self._transport_error = error


def _kafka_error(exc: KafkaException) -> KafkaError:
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        return error
    return KafkaError(KafkaError._FAIL, str(error or exc))
