"""Followers fetching from leaders (Kafka's ``ReplicaFetcherManager`` and
``ReplicaFetcherThread``).

This broker follows a partition when the partition state names another broker leader.
For each leader it follows, one :class:`ReplicaFetcher` task sends Fetch requests with this
broker's id as ``replica_id`` over the inter-broker listener, for all the partitions it
follows there, and appends what comes back at the offsets the leader gave
(``Partition.append_records_to_follower``). The leader learns each follower's log end
offset from the fetch offsets and moves the high watermark (and the ISR) from them; the
follower takes the leader's high watermark, bounded by its own log end.

**Truncation first (KIP-101, KIP-279).** A partition starts in the *truncating* state
whenever it gets a new leader or leader epoch: its log may hold records the new leader
never had (written by an old leader and never committed). The fetcher asks the leader
(OffsetsForLeaderEpoch) where this broker's latest epoch ends in the leader's log and cuts
its own log there, so replicas never diverge; only then does it fetch. A leader that does
not know the epoch at all (``UNDEFINED_EPOCH``) leads to a cut at the high watermark, as
Kafka did before KIP-101.

**Errors.** A partition the leader no longer leads, or leads at another epoch, waits for
the metadata to say who leads it now (the broker re-adds it with the new state). A
follower whose log ends below the leader's log start (retention moved on while it was
away) starts its log afresh there. A connection that fails is retried after
``replica.fetch.backoff.ms``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.client.connection import BrokerConnectionError, BrokerConnections
from odradek.log import LogError
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.partition import Partition, PartitionError

log = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

# A fetch error that means this broker's partition state is older than the leader's: the
# newer state is on its way through the metadata watches, and re-adds the partition. Any
# other error (the leader has not applied the state this broker has yet, a storage error)
# is retried after replica.fetch.backoff.ms, as Kafka's fetcher delays failed partitions.
_WAIT_FOR_METADATA = frozenset({ErrorCode.fenced_leader_epoch})


class FetchState(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"
    WAITING = "waiting for metadata"


@dataclass(slots=True)
class _FollowedPartition:
    partition: Partition
    leader_epoch: int
    state: FetchState = FetchState.TRUNCATING
    # After an error that may pass (a storage error, an unexpected code): not before this
    # (event loop time).
    delayed_until: float = 0.0

    def ready(self, now: float) -> bool:
        return self.state is not FetchState.WAITING and self.delayed_until <= now


class ReplicaFetcher:
    """Fetches every partition this broker follows on one leader."""

    def __init__(self, leader_id: int, manager: ReplicaFetcherManager) -> None:
        self.leader_id = leader_id
        self._manager = manager
        self.partitions: dict[TopicPartition, _FollowedPartition] = {}
        self._wakeup = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"ReplicaFetcher-{manager.node_id}-{leader_id}")

    def add(self, partition: Partition) -> None:
        self.partitions[partition.topic_partition] = _FollowedPartition(
            partition, partition.leader_epoch)
        self._wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def stop(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass

    async def _run(self) -> None:
        config = self._manager.config
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            if not any(f.ready(now) for f in self.partitions.values()):
                delays = [f.delayed_until for f in self.partitions.values()
                          if f.state is not FetchState.WAITING]
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(),
                                           min(delays) - now if delays else None)
                except TimeoutError:
                    pass
                continue
            try:
                await self._truncate()
                await self._fetch()
            except (BrokerConnectionError, TimeoutError, OSError) as exc:
                log.info("fetcher %d -> %d: %s; retrying in %d ms", self._manager.node_id,
                         self.leader_id, exc, config("replica.fetch.backoff.ms"))
                await asyncio.sleep(config("replica.fetch.backoff.ms") / 1000)
            except Exception:  # a fetcher never dies: the partitions it serves would stall
                log.exception("fetcher %d -> %d failed; retrying in %d ms",
                              self._manager.node_id, self.leader_id,
                              config("replica.fetch.backoff.ms"))
                await asyncio.sleep(config("replica.fetch.backoff.ms") / 1000)

    async def _send(self, request: Any, timeout_ms: int) -> Any:
        endpoint = self._manager.endpoint(self.leader_id)
        if endpoint is None:
            raise BrokerConnectionError(f"broker {self.leader_id} has no endpoint on the "
                                        "inter-broker listener")
        connection = await self._manager.connections.get(self.leader_id, *endpoint)
        return await connection.send(request, timeout_s=timeout_ms / 1000)

    # -- truncation --------------------------------------------------------------------

    async def _truncate(self) -> None:
        now = asyncio.get_running_loop().time()
        truncating = {tp: f for tp, f in self.partitions.items()
                      if f.state is FetchState.TRUNCATING and f.ready(now)}
        if not truncating:
            return
        by_topic: dict[str, list[dict]] = {}
        for tp, followed in truncating.items():
            latest = followed.partition.log.leader_epoch_cache.latest_epoch
            by_topic.setdefault(tp.topic, []).append({
                "partition": tp.partition, "current_leader_epoch": followed.leader_epoch,
                "leader_epoch": UNDEFINED_EPOCH if latest is None else latest})
        request = build(request_class(ApiKey.OFFSET_FOR_LEADER_EPOCH,
                                      OFFSET_FOR_LEADER_EPOCH_VERSION),
                        replica_id=self._manager.node_id,
                        topics=[{"topic": topic, "partitions": partitions}
                                for topic, partitions in by_topic.items()])
        response = await self._send(request, self._manager.config("replica.socket.timeout.ms"))
        for topic in response.topics:
            for answer in topic.partitions:
                tp = TopicPartition(topic.topic, answer.partition)
                followed = self.partitions.get(tp)
                if followed is None or followed is not truncating.get(tp):
                    continue  # removed or re-added while the request was out
                self._truncate_partition(followed, answer)

    def _truncate_partition(self, followed: _FollowedPartition, answer: Any) -> None:
        partition = followed.partition
        if answer.error_code is not ErrorCode.none:
            self._partition_error(followed, answer.error_code)
            return
        log_ = partition.log
        if answer.leader_epoch == UNDEFINED_EPOCH or answer.end_offset == UNDEFINED_EPOCH_OFFSET:
            target = log_.high_watermark
        else:
            local_epoch, local_end = log_.leader_epoch_cache.end_offset_for(
                answer.leader_epoch, log_.log_end_offset)
            # The leader's epoch ends at end_offset in its log; this log's copy of that
            # epoch ends at local_end: anything after the smaller of the two diverges.
            if local_epoch == answer.leader_epoch:
                target = min(answer.end_offset, local_end)
            else:
                target = min(answer.end_offset, log_.log_end_offset)
        if target < log_.log_end_offset:
            log.info("%s: truncating from %d to %d (leader %d, epoch %d)",
                     partition.topic_partition, log_.log_end_offset, target, self.leader_id,
                     followed.leader_epoch)
            log_.truncate_to(target)
        followed.state = FetchState.FETCHING

    # -- fetching ----------------------------------------------------------------------

    async def _fetch(self) -> None:
        now = asyncio.get_running_loop().time()
        fetching = {tp: f for tp, f in self.partitions.items()
                    if f.state is FetchState.FETCHING and f.ready(now)}
        if not fetching:
            return
        config = self._manager.config
        by_topic: dict[str, list[dict]] = {}
        for tp, followed in fetching.items():
            partition = followed.partition
            by_topic.setdefault(tp.topic, []).append({
                "partition": tp.partition, "current_leader_epoch": followed.leader_epoch,
                "fetch_offset": partition.log_end_offset, "last_fetched_epoch": -1,
                "log_start_offset": partition.log_start_offset,
                "partition_max_bytes": config("replica.fetch.max.bytes")})
        request = build(request_class(ApiKey.FETCH, FETCH_VERSION),
                        replica_id=self._manager.node_id,
                        max_wait=config("replica.fetch.wait.max.ms"),
                        min_bytes=config("replica.fetch.min.bytes"),
                        max_bytes=config("replica.fetch.response.max.bytes"),
                        isolation_level=0, session_id=0, session_epoch=-1,
                        topics=[{"topic": topic, "partitions": partitions}
                                for topic, partitions in by_topic.items()],
                        forgotten_topics_data=(), rack_id="")
        timeout_ms = config("replica.socket.timeout.ms") + config("replica.fetch.wait.max.ms")
        response = await self._send(request, timeout_ms)
        if response.error_code is not ErrorCode.none:
            raise BrokerConnectionError(f"fetch from {self.leader_id}: {response.error_code.name}")
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                followed = self.partitions.get(tp)
                if followed is None or followed is not fetching.get(tp):
                    continue
                self._process(followed, data)

    def _process(self, followed: _FollowedPartition, data: Any) -> None:
        partition = followed.partition
        if data.error_code is ErrorCode.offset_out_of_range:
            self._out_of_range(followed, data)
            return
        if data.error_code is not ErrorCode.none:
            self._partition_error(followed, data.error_code)
            return
        try:
            if data.records:
                partition.append_records_to_follower(
                    bytearray(data.records), now_ms=self._manager.clock())
            partition.update_follower_high_watermark(data.high_watermark,
                                                     data.log_start_offset)
        except PartitionError as exc:  # became leader meanwhile
            self._partition_error(followed, exc.error_code)
        except LogError as exc:
            log.error("%s: follower append failed: %s", partition.topic_partition, exc)
            self._delay(followed)

    def _out_of_range(self, followed: _FollowedPartition, data: Any) -> None:
        """The fetch offset is outside the leader's log: below its log start (retention
        went on while this follower was away), so start afresh there; or past its end,
        which truncation should have prevented, so truncate again."""
        partition = followed.partition
        if partition.log_end_offset < data.log_start_offset:
            log.info("%s: log end %d is below the leader's log start %d: starting afresh",
                     partition.topic_partition, partition.log_end_offset,
                     data.log_start_offset)
            partition.log.truncate_fully_and_start_at(data.log_start_offset)
        else:
            followed.state = FetchState.TRUNCATING

    def _partition_error(self, followed: _FollowedPartition, error: ErrorCode) -> None:
        if error in _WAIT_FOR_METADATA:
            followed.state = FetchState.WAITING
        else:
            log.info("%s: fetch from leader %d failed with %s; retrying",
                     followed.partition.topic_partition, self.leader_id, error.name)
            self._delay(followed)

    def _delay(self, followed: _FollowedPartition) -> None:
        followed.delayed_until = (asyncio.get_running_loop().time()
                                  + self._manager.config("replica.fetch.backoff.ms") / 1000)


class ReplicaFetcherManager:
    """One fetcher per leader this broker follows partitions on."""

    def __init__(self, node_id: int, connections: BrokerConnections,
                 endpoint: Callable[[int], tuple[str, int] | None],
                 config: Callable[[str], Any], clock: Callable[[], int]) -> None:
        """``endpoint(node_id)`` is a broker's (host, port) on the inter-broker listener."""
        self.node_id = node_id
        self.connections = connections
        self.endpoint = endpoint
        self.config = config
        self.clock = clock
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._leader_of: dict[TopicPartition, int] = {}

    def add_partitions(self, partitions: list[Partition]) -> None:
        """Follows each partition on its current leader, from a truncation (its leader or
        leader epoch is new)."""
        for partition in partitions:
            tp = partition.topic_partition
            self.remove_partitions([tp])
            if partition.leader_id < 0:
                continue  # no leader to follow: the next state will say
            fetcher = self._fetchers.get(partition.leader_id)
            if fetcher is None:
                fetcher = self._fetchers[partition.leader_id] = ReplicaFetcher(
                    partition.leader_id, self)
            fetcher.add(partition)
            self._leader_of[tp] = partition.leader_id

    def remove_partitions(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            leader = self._leader_of.pop(tp, None)
            if leader is not None:
                self._fetchers[leader].remove(tp)

    def fetch_state(self, tp: TopicPartition) -> FetchState | None:
        leader = self._leader_of.get(tp)
        if leader is None:
            return None
        followed = self._fetchers[leader].partitions.get(tp)
        return followed.state if followed else None

    async def shutdown(self) -> None:
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        self._leader_of.clear()
        await asyncio.gather(*(f.stop() for f in fetchers))
        self.connections.close_all()
