"""Transaction markers: how a transaction's end reaches every partition it wrote to
(Kafka's ``TransactionMarkerChannelManager`` and the WriteTxnMarkers half of ``KafkaApis``).

Once a transaction is prepared (PREPARE_COMMIT or PREPARE_ABORT is in
``__transaction_state``), the coordinator hands its partitions to
:meth:`TransactionMarkerChannel.write_markers`. The channel groups them by leader, writes the
marker through :func:`write_markers_locally` for partitions led by this broker and sends
WriteTxnMarkers to the other leaders, and tries again, after ``RETRY_BACKOFF_S``, for every
partition that failed with a retriable error (its leader moved, not enough replicas, a lost
connection), looking the leader up afresh each time. A partition of a deleted topic needs no
marker. Once every partition has its marker the coordinator is called back and writes
COMPLETE_COMMIT or COMPLETE_ABORT. A marker refused as stale (INVALID_PRODUCER_EPOCH or
TRANSACTION_COORDINATOR_FENCED: a newer coordinator or epoch has taken over) stops the
attempt without calling back, as Kafka does.

:func:`write_markers_locally` appends each marker as leader with acks=-1, so it is answered
once every in-sync replica has it; a marker in a partition of ``__consumer_offsets`` also
tells the group coordinator, which makes the offsets the transaction committed there take
effect (or drops them).

Not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from odradek.client.connection import BrokerConnectionError, BrokerConnections
from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.offsets_topic import OFFSETS_TOPIC
from odradek.log.validator import AppendOrigin
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.control_records import build_end_txn_marker
from odradek.protocol.messages import build
from odradek.protocol.topic_partition import TopicPartition, partitions_by_topic
from odradek.replication.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)

# Kafka appends markers with the broker's request.timeout.ms (30 s) as the acks=-1 timeout.
MARKER_APPEND_TIMEOUT_MS = 30_000
RETRY_BACKOFF_S = 0.1
WRITE_TXN_MARKERS_VERSION = 1
REQUEST_TIMEOUT_S = 30.0

_STALE = (ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced)
# Errors that will not go away by trying again: the marker is given up (and logged).
_FATAL = (ErrorCode.corrupt_message, ErrorCode.message_too_large,
          ErrorCode.record_list_too_large, ErrorCode.invalid_required_acks,
          ErrorCode.unsupported_for_message_format)


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One transaction's end to write to ``partitions``."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


MarkerResults = dict[TopicPartition, ErrorCode]


def write_markers_locally(replica_manager: ReplicaManager, group_coordinator: GroupCoordinator,
                          marker: TxnMarker, respond: Callable[[MarkerResults], None]) -> None:
    """Appends ``marker`` to each of its partitions led here and calls ``respond`` with each
    partition's error once every in-sync replica has it."""
    batch = build_end_txn_marker(
        producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
        coordinator_epoch=marker.coordinator_epoch, commit=marker.commit,
        timestamp_ms=replica_manager.clock())

    def appended(results) -> None:
        errors = {tp: result.error for tp, result in results.items()}
        offsets_partitions = [tp.partition for tp, error in errors.items()
                              if tp.topic == OFFSETS_TOPIC and error is ErrorCode.none]
        if offsets_partitions:
            group_coordinator.complete_transaction(marker.producer_id, offsets_partitions,
                                                   marker.commit)
        respond(errors)

    replica_manager.append_records(
        {tp: bytearray(batch) for tp in marker.partitions}, acks=-1,
        timeout_ms=MARKER_APPEND_TIMEOUT_MS, origin=AppendOrigin.COORDINATOR,
        respond=appended)


class TransactionMarkerChannel:
    def __init__(self, node_id: int, metadata: MetadataStore,
                 write_locally: Callable[[TxnMarker, Callable[[MarkerResults], None]], None],
                 connections: BrokerConnections | None,
                 endpoint: Callable[[int], tuple[str, int] | None]) -> None:
        """``write_locally`` writes a marker to partitions led here; ``connections`` and
        ``endpoint`` (a broker's inter-broker address) reach the other leaders (None on a
        single broker)."""
        self._node_id = node_id
        self._metadata = metadata
        self._write_locally = write_locally
        self._connections = connections
        self._endpoint = endpoint
        self._tasks: set[asyncio.Task[None]] = set()

    def write_markers(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool, coordinator_epoch: int, partitions: Iterable[TopicPartition],
                      on_complete: Callable[[], None]) -> None:
        marker = TxnMarker(producer_id, producer_epoch, commit, coordinator_epoch,
                           tuple(sorted(partitions)))
        task = asyncio.get_running_loop().create_task(
            self._write(transactional_id, marker, on_complete),
            name=f"txn-markers-{transactional_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _write(self, transactional_id: str, marker: TxnMarker,
                     on_complete: Callable[[], None]) -> None:
        pending = set(marker.partitions)
        while pending:
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in list(pending):
                topic = self._metadata.topic(tp.topic)
                if topic is None or tp.partition >= len(topic.partitions):
                    pending.discard(tp)  # deleted: no marker to write
                    continue
                leader = topic.partitions[tp.partition].leader
                if leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            sends = [self._send(leader, marker, tps) for leader, tps in by_leader.items()]
            for results in await asyncio.gather(*sends):
                for tp, error in results.items():
                    if error is ErrorCode.none:
                        pending.discard(tp)
                    elif error in _STALE:
                        logger.info("transaction %s: marker for %s refused (%s): a newer "
                                    "coordinator or epoch took over", transactional_id, tp,
                                    error.name)
                        return
                    elif error in _FATAL:
                        logger.error("transaction %s: marker for %s cannot be written: %s",
                                     transactional_id, tp, error.name)
                        pending.discard(tp)
            if pending:
                await asyncio.sleep(RETRY_BACKOFF_S)
        on_complete()

    async def _send(self, leader: int, marker: TxnMarker,
                    partitions: list[TopicPartition]) -> MarkerResults:
        one = TxnMarker(marker.producer_id, marker.producer_epoch, marker.commit,
                        marker.coordinator_epoch, tuple(partitions))
        if leader == self._node_id:
            done: asyncio.Future[MarkerResults] = asyncio.get_running_loop().create_future()
            self._write_locally(one, lambda results: done.done() or done.set_result(results))
            return await done
        return await self._send_remote(leader, one)

    async def _send_remote(self, leader: int, marker: TxnMarker) -> MarkerResults:
        unavailable = dict.fromkeys(marker.partitions, ErrorCode.coordinator_not_available)
        endpoint = self._endpoint(leader)
        if endpoint is None or self._connections is None:
            return unavailable
        request = build(
            request_class(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION),
            markers=[{"producer_id": marker.producer_id, "producer_epoch": marker.producer_epoch,
                      "transaction_result": marker.commit,
                      "coordinator_epoch": marker.coordinator_epoch,
                      "topics": [{"name": topic, "partition_indexes": partitions}
                                 for topic, partitions in
                                 partitions_by_topic(marker.partitions).items()]}])
        try:
            connection = await self._connections.get(leader, *endpoint)
            response = await connection.send(request, timeout_s=REQUEST_TIMEOUT_S)
        except (BrokerConnectionError, TimeoutError, OSError) as exc:
            logger.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return unavailable
        return {TopicPartition(topic.name, partition.partition_index): partition.error_code
                for result in response.markers for topic in result.topics
                for partition in topic.partitions}
