"""Transaction verification: a partition leader asks a producer's transaction coordinator
about a transactional write before taking it (KIP-890 part 1; Kafka's
``AddPartitionsToTxnManager``).

The transaction of ``transactional_id`` is coordinated by the leader of its partition of
``__transaction_state``. When this broker is that leader the coordinator is called
directly; otherwise the question goes as an AddPartitionsToTxn v4+ request in its broker
form, ``verify_only`` true (is the partition in the ongoing transaction of this producer id
and epoch?) or, for transactions v2 writes, false (add it). Every partition gets an error:
NONE lets the write in, INVALID_TXN_STATE refuses it (a write delayed past the end of its
transaction), and a coordinator that cannot be reached answers COORDINATOR_NOT_AVAILABLE,
which the produce path turns into a retriable error.

Not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from odradek.client.connection import BrokerConnectionError, BrokerConnections
from odradek.coordinator.transaction.log_records import TRANSACTION_STATE_TOPIC, partition_for
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build
from odradek.protocol.topic_partition import TopicPartition, partitions_by_topic

logger = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN_BROKER_VERSION = 4
REQUEST_TIMEOUT_S = 30.0

Errors = dict[TopicPartition, ErrorCode]


class TransactionVerifier:
    def __init__(self, node_id: int, metadata: MetadataStore, coordinator,
                 connections: BrokerConnections | None,
                 endpoint: Callable[[int], tuple[str, int] | None]) -> None:
        """``coordinator`` is this broker's transaction coordinator; ``connections`` and
        ``endpoint`` reach the others (None on a single broker)."""
        self._node_id = node_id
        self._metadata = metadata
        self._coordinator = coordinator
        self._connections = connections
        self._endpoint = endpoint
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, transactional_id: str, producer_id: int, producer_epoch: int,
                 partitions: list[TopicPartition], add: bool,
                 callback: Callable[[Errors], None]) -> None:
        topic = self._metadata.topic(TRANSACTION_STATE_TOPIC)
        if topic is None or not topic.partitions:
            callback(dict.fromkeys(partitions, ErrorCode.coordinator_not_available))
            return
        leader = topic.partitions[partition_for(transactional_id, len(topic.partitions))].leader
        if leader == self._node_id:
            if add:
                self._coordinator.add_partitions(transactional_id, producer_id, producer_epoch,
                                                 set(partitions), callback,
                                                 client_transaction_version=2)
            else:
                callback(self._coordinator.verify_partitions(
                    transactional_id, producer_id, producer_epoch, set(partitions)))
            return
        task = asyncio.get_running_loop().create_task(self._ask(
            leader, transactional_id, producer_id, producer_epoch, partitions, add, callback))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ask(self, leader: int, transactional_id: str, producer_id: int,
                   producer_epoch: int, partitions: list[TopicPartition], add: bool,
                   callback: Callable[[Errors], None]) -> None:
        errors = dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        endpoint = self._endpoint(leader) if leader >= 0 else None
        if endpoint is None or self._connections is None:
            callback(errors)
            return
        request = build(
            request_class(ApiKey.ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_TO_TXN_BROKER_VERSION),
            transactions=[{"transactional_id": transactional_id, "producer_id": producer_id,
                           "producer_epoch": producer_epoch, "verify_only": not add,
                           "topics": [{"name": topic, "partitions": indexes}
                                      for topic, indexes in
                                      partitions_by_topic(partitions).items()]}])
        try:
            connection = await self._connections.get(leader, *endpoint)
            response = await connection.send(request, timeout_s=REQUEST_TIMEOUT_S)
        except (BrokerConnectionError, TimeoutError, OSError) as exc:
            logger.info("verifying transaction %s with broker %d failed: %s",
                        transactional_id, leader, exc)
            callback(errors)
            return
        if response.error_code is not ErrorCode.none:
            callback(dict.fromkeys(partitions, response.error_code))
            return
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for partition in topic.results_by_partition:
                    errors[TopicPartition(topic.name, partition.partition_index)] = \
                        partition.partition_error_code
        callback(errors)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
