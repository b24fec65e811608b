"""``SharePersister``: share-partition states read and written where they are kept — the
share coordinator of their partition of ``__share_group_state`` (Kafka's
``DefaultStatePersister``).

The leader of a topic partition serves its share groups' fetches, but the state of each
share-partition lives with the leader of ``abs(hash("group:topicId:partition")) % count`` of
``__share_group_state``, which may be another broker. When it is this one the share
coordinator is called directly; otherwise the question goes to that broker as a
ReadShareGroupState or WriteShareGroupState request. ``__share_group_state`` is created the
first time a share group needs it. Every failure is an error code: NOT_COORDINATOR and
COORDINATOR_NOT_AVAILABLE (the topic is being created, its leader moved or cannot be
reached) make the fetch that needed the state answer an error the client retries.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from kio.schema.errors import ErrorCode

from odradek.client.connection import BrokerConnectionError, BrokerConnections
from odradek.coordinator.share.coordinator import ShareCoordinator
from odradek.coordinator.share.state_records import (
    RecordState,
    ShareState,
    ShareStateKey,
    StateBatch,
    partition_for,
)
from odradek.metadata.model import TopicMetadata
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build
from odradek.server.completion import Completion

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 30.0
NO_START_OFFSET = -1  # ReadShareGroupState's start offset of a share-partition with no state


class SharePersister:
    def __init__(self, node_id: int, coordinator: ShareCoordinator,
                 state_topic: Callable[[], Awaitable[TopicMetadata | None]],
                 connections: BrokerConnections | None = None,
                 endpoint: Callable[[int], tuple[str, int] | None] = lambda _: None) -> None:
        """``state_topic`` gives ``__share_group_state``, creating it if need be (None
        while it cannot be); ``connections`` and ``endpoint`` reach the other brokers (None
        on a single broker)."""
        self._node_id = node_id
        self._coordinator = coordinator
        self._state_topic = state_topic
        self._connections = connections
        self._endpoint = endpoint

    async def _leader(self, key: ShareStateKey) -> int | ErrorCode:
        topic = await self._state_topic()
        if topic is None or not topic.partitions:
            return ErrorCode.coordinator_not_available
        leader = topic.partitions[partition_for(key, len(topic.partitions))].leader
        return leader if leader >= 0 else ErrorCode.coordinator_not_available

    async def read(self, key: ShareStateKey) -> tuple[ErrorCode, ShareState | None]:
        leader = await self._leader(key)
        if isinstance(leader, ErrorCode):
            return leader, None
        if leader == self._node_id:
            return self._coordinator.read(key)
        response = await self._send(leader, build(
            request_class(ApiKey.READ_SHARE_GROUP_STATE, 0), group_id=key.group_id,
            topics=[{"topic_id": key.topic_id, "partitions": [
                {"partition": key.partition, "leader_epoch": -1}]}]))
        if isinstance(response, ErrorCode):
            return response, None
        [result] = response.results[0].partitions
        return result.error_code, _state(result)

    async def write(self, key: ShareStateKey, state: ShareState, leader_epoch: int
                    ) -> ErrorCode:
        leader = await self._leader(key)
        if isinstance(leader, ErrorCode):
            return leader
        if leader == self._node_id:
            written: Completion[ErrorCode] = Completion()
            self._coordinator.write(key, state, leader_epoch, written)
            return await written.wait()
        response = await self._send(leader, build(
            request_class(ApiKey.WRITE_SHARE_GROUP_STATE, 0), group_id=key.group_id,
            topics=[{"topic_id": key.topic_id, "partitions": [{
                "partition": key.partition, "state_epoch": state.state_epoch,
                "leader_epoch": leader_epoch, "start_offset": state.start_offset,
                "state_batches": wire_batches(state.batches)}]}]))
        if isinstance(response, ErrorCode):
            return response
        [result] = response.results[0].partitions
        return result.error_code

    async def read_many(self, keys: list[ShareStateKey]
                        ) -> dict[ShareStateKey, tuple[ErrorCode, ShareState | None]]:
        """The states of many share-partitions (an admin's question): one request per
        broker that keeps some of them."""
        results: dict[ShareStateKey, tuple[ErrorCode, ShareState | None]] = {}
        for leader, group_id, wanted in await self._by_leader(keys, results):
            if leader == self._node_id:
                results |= {key: self._coordinator.read(key) for key in wanted}
                continue
            response = await self._send(leader, build(
                request_class(ApiKey.READ_SHARE_GROUP_STATE, 0), group_id=group_id,
                topics=_topics(wanted, lambda key: {"partition": key.partition,
                                                    "leader_epoch": -1})))
            if isinstance(response, ErrorCode):
                results |= dict.fromkeys(wanted, (response, None))
                continue
            for topic in response.results:
                for result in topic.partitions:
                    key = ShareStateKey(group_id, topic.topic_id, result.partition)
                    results[key] = (result.error_code, _state(result))
        return results

    async def delete(self, keys: list[ShareStateKey]) -> ErrorCode:
        """Deletes the states (DeleteShareGroupStateRequest to the brokers keeping them);
        the first error, if any."""
        failed: dict[ShareStateKey, tuple[ErrorCode, ShareState | None]] = {}
        errors = []
        for leader, group_id, wanted in await self._by_leader(keys, failed):
            if leader == self._node_id:
                deleted: Completion[ErrorCode] = Completion()
                self._coordinator.delete(wanted, deleted)
                errors.append(await deleted.wait())
                continue
            response = await self._send(leader, build(
                request_class(ApiKey.DELETE_SHARE_GROUP_STATE, 0), group_id=group_id,
                topics=_topics(wanted, lambda key: {"partition": key.partition})))
            errors += [response] if isinstance(response, ErrorCode) else [
                result.error_code for topic in response.results for result in topic.partitions]
        errors += [error for error, _ in failed.values()]
        return next((e for e in errors if e is not ErrorCode.none), ErrorCode.none)

    async def _by_leader(self, keys: list[ShareStateKey],
                         failed: dict[ShareStateKey, tuple[ErrorCode, ShareState | None]]
                         ) -> list[tuple[int, str, list[ShareStateKey]]]:
        """(leader, group, keys) for each broker and group; keys without a leader go to
        ``failed``."""
        grouped: dict[tuple[int, str], list[ShareStateKey]] = {}
        for key in keys:
            leader = await self._leader(key)
            if isinstance(leader, ErrorCode):
                failed[key] = (leader, None)
            else:
                grouped.setdefault((leader, key.group_id), []).append(key)
        return [(leader, group_id, wanted) for (leader, group_id), wanted in grouped.items()]

    async def _send(self, leader: int, request: object) -> object | ErrorCode:
        endpoint = self._endpoint(leader)
        if endpoint is None or self._connections is None:
            return ErrorCode.coordinator_not_available
        try:
            connection = await self._connections.get(leader, *endpoint)
            return await connection.send(request, timeout_s=REQUEST_TIMEOUT_S)
        except (BrokerConnectionError, TimeoutError, OSError) as exc:
            log.info("share state: broker %d cannot be reached: %s", leader, exc)
            return ErrorCode.coordinator_not_available


def _state(result) -> ShareState | None:
    """A ReadShareGroupState partition result as a state (None: no state, or an error)."""
    if result.error_code is not ErrorCode.none or result.start_offset == NO_START_OFFSET:
        return None
    return ShareState(result.state_epoch, result.start_offset,
                      state_batches(result.state_batches))


def wire_batches(batches: tuple[StateBatch, ...]) -> list[dict]:
    """State batches as the share-state requests and responses carry them."""
    return [{"first_offset": b.first_offset, "last_offset": b.last_offset,
             "delivery_state": int(b.delivery_state), "delivery_count": b.delivery_count}
            for b in batches]


def state_batches(wire) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b.first_offset, b.last_offset, RecordState(b.delivery_state),
                            b.delivery_count) for b in wire)


def _topics(keys: list[ShareStateKey], partition: Callable[[ShareStateKey], dict]
            ) -> list[dict]:
    by_topic: dict = {}
    for key in keys:
        by_topic.setdefault(key.topic_id, []).append(partition(key))
    return [{"topic_id": topic_id, "partitions": partitions}
            for topic_id, partitions in by_topic.items()]
