"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455) for the CLI.

librdkafka has no API for these two, so the CLI speaks them itself, over
``odradek.client.BrokerConnection``, to the controller: the broker Metadata names as
``controller_id``. Any other broker answers NOT_CONTROLLER, and so does one that stopped
being the controller since we asked; then the controller is looked up again, as Kafka's
admin client does, a bounded number of times.

Answers become plain values: :class:`OngoingReassignment` for each listed partition and a
:class:`PartitionError` (Kafka's error name and the broker's message) for each refused one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.cli.broker_requests import (
    BrokerAddress,
    client_security,
    describe_error,
    error_reason,
    exchange,
    kafka_error_name,
)
from odradek.cli.client import REQUEST_TIMEOUT_SECONDS, Kafka
from odradek.cli.errors import fail
from odradek.client.connection import BrokerConnectionError
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build

# Tries at finding the controller, half a second apart: enough to ride out a controller
# that resigned (the next one is elected within a second) without keeping a command
# waiting long when there is none. A crashed controller is replaced only once its
# ZooKeeper session expires; until then the error names the broker that cannot be reached.
CONTROLLER_ATTEMPTS = 10
CONTROLLER_RETRY_BACKOFF_S = 0.5
# What the controller is given to answer in: starting a reassignment writes one znode per
# topic, so this is the CLI's usual bound on a request.
REQUEST_TIMEOUT_MS = REQUEST_TIMEOUT_SECONDS * 1000

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """One partition being reassigned: its replicas now (the target first, then the ones
    being removed), the ones being added and the ones being removed."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """Where the partition was before; where a cancel takes it back to."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


@dataclass(frozen=True, slots=True)
class PartitionError:
    """The controller refused to start or cancel one partition's reassignment."""

    topic: str
    partition: int
    error_name: str  # Kafka's, e.g. INVALID_REPLICA_ASSIGNMENT
    message: str

    def __str__(self) -> str:
        return (f"topic {self.topic!r} partition {self.partition}: {self.message} "
                f"({self.error_name})")


class Reassignments:
    """The controller's reassignment APIs, for one command. Remembers where the controller
    was last found; not thread-safe."""

    def __init__(self, kafka: Kafka) -> None:
        self._kafka = kafka
        self._controller: BrokerAddress | None = None
        self._security = client_security(kafka.config())  # the command's -X properties

    def alter(self, targets: Mapping[TopicPartition, Sequence[int] | None]
              ) -> list[PartitionError]:
        """Starts each partition's reassignment to its target replicas, or cancels it where
        the target is None; returns the partitions the controller refused."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), replicas in targets.items():
            by_topic.setdefault(topic, []).append({
                "partition_index": partition,
                "replicas": None if replicas is None else list(replicas)})
        response = self._send(build(
            request_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0), timeout=REQUEST_TIMEOUT_MS,
            topics=[{"name": topic, "partitions": partitions}
                    for topic, partitions in by_topic.items()]))
        return [PartitionError(topic.name, partition.partition_index,
                               kafka_error_name(partition.error_code),
                               partition.error_message or error_reason(partition.error_code))
                for topic in response.responses for partition in topic.partitions
                if partition.error_code != ErrorCode.none]

    def ongoing(self, partitions: Mapping[str, Collection[int]] | None = None
                ) -> list[OngoingReassignment]:
        """The reassignments in progress, of the given partitions of each topic, or of
        every partition when None; sorted by topic and partition."""
        topics = None if partitions is None else [
            {"name": topic, "partition_indexes": sorted(indexes)}
            for topic, indexes in partitions.items()]
        response = self._send(build(
            request_class(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0), timeout=REQUEST_TIMEOUT_MS,
            topics=topics))
        return sorted(
            (OngoingReassignment(topic.name, p.partition_index, tuple(p.replicas),
                                 tuple(p.adding_replicas), tuple(p.removing_replicas))
             for topic in response.topics for p in topic.partitions),
            key=lambda r: (r.topic, r.partition))

    def _send(self, request: Any) -> Any:
        """The controller's answer to ``request``; fails with one line if no controller
        answered within the attempts, or it answered with a top-level error."""
        name = type(request).__name__.removesuffix("Request")
        problem = ""
        for attempt in range(CONTROLLER_ATTEMPTS):
            if attempt:
                time.sleep(CONTROLLER_RETRY_BACKOFF_S)
            controller = self._controller or self._find_controller()
            if controller is None:
                problem = "the cluster has no controller"
                continue
            try:
                response = asyncio.run(exchange(controller, request, self._security))
            except BrokerConnectionError as exc:
                # The controller may have died: Metadata will name the next one.
                self._controller, problem = None, str(exc)
                continue
            except TimeoutError as exc:
                fail(f"{name}: {exc}")
            if response.error_code == ErrorCode.not_controller:
                self._controller = None
                problem = f"broker {controller.node_id} is not the controller (NOT_CONTROLLER)"
                continue
            if response.error_code != ErrorCode.none:
                fail(f"{name}: {describe_error(response.error_code, response.error_message)}")
            self._controller = controller
            return response
        fail(f"{name}: no controller answered in {CONTROLLER_ATTEMPTS} attempts: {problem}")

    def _find_controller(self) -> BrokerAddress | None:
        cluster = self._kafka.admin.list_topics(timeout=REQUEST_TIMEOUT_SECONDS)
        broker = cluster.brokers.get(cluster.controller_id)
        return None if broker is None else BrokerAddress(broker.id, broker.host, broker.port)


