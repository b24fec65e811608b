"""``Broker``: the composition root of one broker process.

It wires the layers together — the logs (``LogManager``), the metadata store, the replica
manager and the listeners (``SocketServer``) — and turns metadata events into partition
changes: the partition states of a created topic, of added partitions, or changed by the
controller go to ``ReplicaManager.become_leader_or_follower``, which makes this broker lead
or follow each partition it hosts (and tells the group coordinator when it gains or loses
an ``__consumer_offsets`` partition); a deleted topic loses its logs and its committed
offsets; a changed config reaches every partition. Request handlers get the narrow services
of :meth:`Broker.services`, never the Broker. The metadata store's backend is chosen from
the configuration: without ``zookeeper.connect``, the embedded local store.

Lifecycle: ``await start()`` binds the listeners and opens the logs; ``await stop()`` stops
accepting, answers the requests already received, then flushes and closes every log and
leaves each log dir's clean shutdown marker. In between, background tasks do the log's
periodic work, as Kafka's scheduler does: retention, flushing dirty logs (``flush.ms`` and
rolled segments; the fsync runs on an executor thread so the event loop never waits for the
disk), writing the recovery point and log start offset checkpoints and the high watermark
checkpoint (``replica.high.watermark.checkpoint.interval.ms``), removing deleted segments'
files after ``file.delete.delay.ms``, and compacting ``cleanup.policy=compact`` logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from odradek.coordinator.group import GROUP_TICK_MS, group_coordinator_over
from odradek.log import KafkaStorageError, LogManager
from odradek.log.cleaner import CleanerConfig, LogCleaner
from odradek.client.connection import BrokerConnections
from odradek.controller.controller import Controller
from odradek.metadata.local import LocalMetadataStore
from odradek.metadata.zk_client import BadVersionError, NoNodeError, ZooKeeperUnavailable
from odradek.metadata.zookeeper import SessionChanged, ZooKeeperMetadataStore
from odradek.coordinator.group.offsets_topic import OFFSETS_TOPIC
from odradek.coordinator.group.storage import ReplicaTopicStore
from odradek.coordinator.share.coordinator import SHARE_STATE_TOPIC, ShareCoordinator
from odradek.coordinator.share.manager import SharePartitionManager
from odradek.coordinator.share.persister import SharePersister
from odradek.coordinator.transaction.log_records import TRANSACTION_STATE_TOPIC
from odradek.coordinator.transaction.marker_channel import (
    TransactionMarkerChannel,
    write_markers_locally,
)
from odradek.coordinator.transaction.replica_store import transaction_coordinator_over
from odradek.coordinator.transaction.verification import TransactionVerifier
from odradek.metadata.model import BrokerInfo, Endpoint, PartitionState, TopicMetadata
from odradek.metadata.store import (
    AclsChanged,
    BrokerConfigChanged,
    EntityConfigsChanged,
    MetadataEvent,
    MetadataStore,
    PartitionsAdded,
    PartitionStatesChanged,
    TopicConfigChanged,
    TopicCreated,
    TopicDeleted,
)
from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.fetcher import ReplicaFetcherManager
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.auto_topic_creation import AutoTopicCreationManager
from odradek.server.config import (
    BrokerConfig,
    ConfigError,
    effective_topic_config,
    to_log_config,
)
from odradek.server.dispatcher import Dispatcher
from odradek.server.group_config import GroupConfigs
from odradek.server.quotas import ClientQuotas
from odradek.server.services import Services
from odradek.security.authorizer import AclAuthorizer, parse_super_users
from odradek.server.client_quota_configs import apply_quotas, load_quotas
from odradek.server.listener_security import inter_broker_security
from odradek.server.socket_server import SocketServer
from odradek.server.user_credentials import scram_credential

log = logging.getLogger(__name__)

# How long a clean shutdown waits for in-flight requests (long polls end at their max_wait,
# which clients keep to a few hundred milliseconds) before closing connections anyway.
SHUTDOWN_DRAIN_SECONDS = 5.0

# Dirty logs are looked at least this often, whatever log.flush.scheduler.interval.ms says
# (Kafka's default: never), so that a topic's flush.ms works on its own and a rolled segment
# is fsynced soon after the roll.
MAX_FLUSH_CHECK_SECONDS = 1.0

# Deleted segments' files are looked at this often: file.delete.delay.ms holds to within it.
FILE_DELETE_CHECK_SECONDS = 1.0
# Logs a clean shutdown let the start defer are loaded this many at a time (about 15 ms of
# the event loop each), between requests.
DEFERRED_LOAD_SLICE = 64


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Opening or loading the partitions builds a few dozen objects per partition that live
    as long as the broker, and no garbage: each full collection would walk the growing heap
    again for nothing (a tenth of the start with 10,000 partitions)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class Broker:
    def __init__(self, config: BrokerConfig, *, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.clock = clock
        self.node_id: int = config.node_id
        self._loop: asyncio.AbstractEventLoop | None = None
        self.log_manager = LogManager(
            config.log_dirs, clock=clock, call_soon_threadsafe=self._call_soon_threadsafe,
            producer_id_expiration_ms=lambda: config.get("producer.id.expiration.ms"),
        )
        self.replica_manager = ReplicaManager(self.node_id, self.log_manager, clock, config.get,
                                              alter_isr=self._alter_isr)
        # Consumer groups and their offsets, kept in __consumer_offsets; each group's own
        # configs, kept with the cluster metadata.
        self.group_configs = GroupConfigs(config)
        self.group_coordinator = group_coordinator_over(
            self.replica_manager, self._topic, config.get, clock,
            topics=lambda: self.metadata.topics() if self.metadata else {},
            racks=lambda: {b.node_id: b.rack for b in self.metadata.brokers()}
            if self.metadata else {}, group_config=self.group_configs.get)
        # Share groups (KIP-932): the durable state of share-partitions, kept in
        # __share_group_state, and ShareFetch/ShareAcknowledge on the partitions led here.
        self.share_coordinator = ShareCoordinator(
            ReplicaTopicStore(replica_manager=self.replica_manager, topic=self._topic,
                              append_timeout_ms=lambda: config.get("offsets.commit.timeout.ms"),
                              topic_name=SHARE_STATE_TOPIC), clock)
        self.share_persister = SharePersister(self.node_id, self.share_coordinator,
                                              self._share_state_topic)
        self.share_partitions = SharePartitionManager(
            self.replica_manager, self.share_persister, config.get, clock,
            group_config=self.group_configs.get)
        self.group_coordinator.share_protocol.on_member_removed = \
            self.share_partitions.close_session
        # Transactional ids and their transactions, kept in __transaction_state; the markers
        # go out through the channel, writes are verified through the verifier (start()).
        self.marker_channel: TransactionMarkerChannel | None = None
        self.transaction_verifier: TransactionVerifier | None = None
        self.transaction_coordinator = transaction_coordinator_over(
            self.replica_manager, self._topic, config.get, clock, self._generate_producer_id,
            self)
        self.metadata: MetadataStore | None = None
        # In a cluster (zookeeper.connect): the controller election this broker takes part
        # in, and the fetchers of the partitions it follows.
        self.controller: Controller | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self.quotas = ClientQuotas(
            quota_window_num=config.get("quota.window.num"),
            quota_window_size_seconds=config.get("quota.window.size.seconds"))
        # The ACL authorizer when authorizer.class.name names one, fed by the metadata store.
        self.authorizer: AclAuthorizer | None = None
        self.dispatcher: Dispatcher | None = None
        self._socket_server: SocketServer | None = None
        # The first listener's bound address, and the port each listener is bound to.
        self.host: str = ""
        self.port: int = 0
        self.bound_ports: dict[str, int] = {}
        self._background: list[asyncio.Task[None]] = []
        self._id_requests: set[asyncio.Task[None]] = set()
        # The marker channel's and the verifier's connections to other brokers (a cluster).
        self._transaction_connections: BrokerConnections | None = None

    def _topic(self, name: str) -> TopicMetadata | None:
        return self.metadata.topic(name) if self.metadata else None

    async def _share_state_topic(self) -> TopicMetadata | None:
        return await AutoTopicCreationManager(self.metadata, self.config).share_state_topic()

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        socket_server = SocketServer(
            self.config, lambda user, mechanism: scram_credential(self.metadata, user, mechanism))
        await socket_server.bind()
        self._socket_server = socket_server
        bound = socket_server.bound_addresses
        self.host, self.port = next(iter(bound.values()))
        self.bound_ports = {name: port for name, (_, port) in bound.items()}
        # An advertised listener without a host or port advertises the bound one (Kafka
        # replaces port 0 with the bound port when it registers the broker).
        me = BrokerInfo(self.node_id, tuple(
            Endpoint(e.name, e.host or bound[e.name][0], e.port or bound[e.name][1])
            for e in self.config.advertised_listeners), self.config.get("broker.rack"))
        self.metadata = await self._open_metadata_store(me)
        self.config.set_dynamic(self.metadata.broker_configs(cluster_default=True),
                                per_broker=False)
        self.config.set_dynamic(self.metadata.broker_configs())
        socket_server.reconfigure()  # listener configs set dynamically before this start
        topics = self.metadata.topics().values()
        hosted = [TopicPartition(topic.name, state.partition) for topic in topics
                  for state in topic.partitions if self.node_id in state.replicas]
        with _collector_paused():
            loaded = self.log_manager.load_all(
                lambda topic: to_log_config(self.topic_config(topic)), hosted=hosted)
            if self.controller is not None:
                # Replicas of topics deleted, or moved elsewhere, while this broker was away.
                for tp in sorted(loaded.keys() - set(hosted)):
                    log.info("deleting the stray replica %s", tp)
                    self.log_manager.delete_partition(tp.topic, tp.partition)
            for topic in topics:
                self._become_leader_or_follower(topic, topic.partitions)
        self._start_transactions()
        self.authorizer = self._new_authorizer()
        load_quotas(self.quotas, self.metadata)
        self.group_configs.attach(self.metadata)
        self.metadata.subscribe(self._on_metadata_event)
        self.group_coordinator.startup()  # replays the __consumer_offsets partitions led here
        self.share_coordinator.startup()  # and the __share_group_state ones
        # Replays the __transaction_state partitions led here, and completes the
        # transactions left prepared.
        self.transaction_coordinator.startup()
        self._start_background_tasks()
        if self.controller is not None:
            await self.controller.start()
        self.dispatcher = Dispatcher(self.services(), self.quotas, self.authorizer)
        try:
            await socket_server.start_serving(self.dispatcher)
        except OSError:
            # A port taken while this broker started: everything else has started, and
            # goes (its ZooKeeper registration, its leaderships, its logs) before the error.
            await self.stop()
            raise
        self._background.append(  # once serving: these wait for no one
            asyncio.create_task(self._load_deferred_logs(), name="deferred-log-loader"))
        for name, (host, port) in bound.items():
            log.info("odradek broker %d listening on %s:%d (listener %s, cluster %s)",
                     self.node_id, host, port, name, self.metadata.cluster_id)

    async def stop(self) -> None:
        if self._socket_server is None:
            return
        if self.controller is not None and self.config.get("controlled.shutdown.enable"):
            await self._controlled_shutdown()
        self._socket_server.stop_accepting()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._background.clear()
        self.group_coordinator.shutdown()  # a JoinGroup or SyncGroup waiting is answered now
        self.share_coordinator.shutdown()
        self.transaction_coordinator.shutdown()
        for closing in (self.marker_channel, self.transaction_verifier):
            if closing is not None:
                await closing.close()
        if self._transaction_connections is not None:
            self._transaction_connections.close_all()
        await self._socket_server.close_connections(SHUTDOWN_DRAIN_SECONDS)
        if (cleaner := getattr(self, "_cleaner", None)) is not None:
            await asyncio.to_thread(cleaner.close)  # the worker process, after its round
        if self.fetchers is not None:
            await self.fetchers.shutdown()
        if self.controller is not None:
            await self.controller.stop()
        self.replica_manager.shutdown()  # waiting produces and fetches answered
        self.log_manager.close_all()  # flush, checkpoints, clean shutdown markers
        if self.metadata is not None:
            self.metadata.close()
        self._socket_server = None
        log.info("odradek broker %d stopped", self.node_id)

    async def _open_metadata_store(self, me: BrokerInfo) -> MetadataStore:
        """The backend the configuration names: ZooKeeper with ``zookeeper.connect`` (then
        this broker also stands for controller and fetches the partitions it follows),
        else the embedded single-node store in the first log dir."""
        get = self.config.get
        connect = get("zookeeper.connect")
        if not connect:
            return LocalMetadataStore(self.config.log_dirs[0], me, get("cluster.id"))
        session_timeout_ms = get("zookeeper.session.timeout.ms")
        store = ZooKeeperMetadataStore(
            connect, me, {name: protocol.value for name, protocol
                          in self.config.listener_security_protocol_map.items()},
            session_timeout_ms=session_timeout_ms,
            connection_timeout_ms=get("zookeeper.connection.timeout.ms") or session_timeout_ms,
            cluster_id=get("cluster.id"))
        try:
            await store.start()
        except (ZooKeeperUnavailable, ValueError) as exc:
            store.close()
            raise ConfigError(str(exc), "zookeeper.connect") from exc
        self.controller = Controller(
            store, self.node_id,
            unclean_election_enabled=lambda topic: self.topic_config(topic)[
                "unclean.leader.election.enable"],
            leader_imbalance=lambda: (get("auto.leader.rebalance.enable"),
                                      get("leader.imbalance.per.broker.percentage"),
                                      get("leader.imbalance.check.interval.seconds")))
        self.fetchers = ReplicaFetcherManager(
            self.node_id,
            BrokerConnections(client_id=f"broker-{self.node_id}-fetcher",
                              connect_timeout_s=get("replica.socket.timeout.ms") / 1000,
                              security=inter_broker_security(self.config)),
            self._inter_broker_endpoint, get, self.clock)
        return store

    def _start_transactions(self) -> None:
        """The marker channel, the transaction verifier and the share persister, once the
        metadata store is open; in a cluster they reach other brokers on connections of
        their own, so that markers and share-partition states never queue behind a
        follower's long poll."""
        connections = self._transaction_connections = None
        if self.controller is not None:
            connections = self._transaction_connections = BrokerConnections(
                client_id=f"broker-{self.node_id}-transactions",
                connect_timeout_s=self.config.get("replica.socket.timeout.ms") / 1000,
                security=inter_broker_security(self.config))
        self.marker_channel = TransactionMarkerChannel(
            self.node_id, self.metadata,
            lambda marker, respond: write_markers_locally(
                self.replica_manager, self.group_coordinator, marker, respond),
            connections, self._inter_broker_endpoint)
        # Share-partition states kept by the share coordinator of another broker.
        self.share_persister = SharePersister(self.node_id, self.share_coordinator,
                                              self._share_state_topic, connections,
                                              self._inter_broker_endpoint)
        self.share_partitions.persister = self.share_persister
        self.transaction_verifier = TransactionVerifier(
            self.node_id, self.metadata, self.transaction_coordinator, connections,
            self._inter_broker_endpoint)
        self.replica_manager.verify_transaction = self.transaction_verifier

    def write_markers(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool, coordinator_epoch: int, partitions: set[TopicPartition],
                      on_complete: Callable[[], None]) -> None:
        """The transaction coordinator's marker writer: the channel, once started."""
        self.marker_channel.write_markers(transactional_id, producer_id, producer_epoch,
                                          commit, coordinator_epoch, partitions, on_complete)

    def _generate_producer_id(self, callback: Callable[[int | None], None]) -> None:
        """A fresh producer id from the metadata store for the transaction coordinator;
        None when no block of ids can be reserved now (the client retries)."""
        async def generate() -> None:
            try:
                producer_id = await self.metadata.generate_producer_id()
            except (OSError, ZooKeeperUnavailable, BadVersionError) as exc:
                log.error("could not reserve producer ids: %s", exc)
                producer_id = None
            callback(producer_id)

        task = self._loop.create_task(generate())
        self._id_requests.add(task)
        task.add_done_callback(self._id_requests.discard)

    def _inter_broker_endpoint(self, node_id: int) -> tuple[str, int] | None:
        listener = self.config.inter_broker_listener_name
        broker = next((b for b in self.metadata.brokers() if b.node_id == node_id), None)
        endpoint = broker.endpoint(listener) if broker is not None else None
        return None if endpoint is None else (endpoint.host, endpoint.port)

    async def _alter_isr(self, tp: TopicPartition, state: PartitionState,
                         isr: tuple[int, ...]) -> PartitionState | None:
        """An ISR change proposed as leader, written conditionally on the partition state's
        version; None when the state moved on (the watch brings the new one)."""
        try:
            return await self.metadata.alter_isr(tp.topic, tp.partition, state, isr)
        except (BadVersionError, NoNodeError, ZooKeeperUnavailable) as exc:
            log.info("%s: ISR change to %s not written: %s", tp, list(isr),
                     type(exc).__name__)
            return None

    async def _controlled_shutdown(self) -> None:
        """Asks the controller to move this broker's leaderships to other ISR members and
        waits until it has (Kafka's controlled shutdown), so that clients only see the
        leaders change; after ``controlled.shutdown.max.retries`` it stops anyway."""
        get = self.config.get
        attempts = get("controlled.shutdown.max.retries") + 1
        for attempt in range(attempts):
            if await self.metadata.request_controlled_shutdown(
                    get("controlled.shutdown.retry.backoff.ms")):
                log.info("controlled shutdown of broker %d done", self.node_id)
                return
            log.warning("controlled shutdown of broker %d not done (attempt %d of %d)",
                        self.node_id, attempt + 1, attempts)

    def _call_soon_threadsafe(self, callback: Callable[[], object]) -> None:
        """Hands work from another thread (a flush) to the event loop."""
        self._loop.call_soon_threadsafe(callback)

    def services(self) -> Services:
        """What the request handlers may use (once started: the metadata store exists)."""
        return Services(
            config=self.config,
            metadata=self.metadata,
            replica_manager=self.replica_manager,
            group_coordinator=self.group_coordinator,
            transaction_coordinator=self.transaction_coordinator,
            auto_topic_creation=AutoTopicCreationManager(self.metadata, self.config),
            share_partitions=self.share_partitions,
            share_coordinator=self.share_coordinator,
            controller=self.controller,
        )

    # -- background tasks --------------------------------------------------------------

    def _start_background_tasks(self) -> None:
        get = self.config.get
        for name, interval_seconds, work in [
            ("kafka-log-retention",
             lambda: get("log.retention.check.interval.ms") / 1000, self._delete_old_segments),
            ("kafka-log-flusher",
             lambda: min(get("log.flush.scheduler.interval.ms") / 1000, MAX_FLUSH_CHECK_SECONDS),
             self._flush_dirty_logs),
            # Both checkpoints are written together, at the shorter of their intervals: how
            # much a restart after a crash recovers again, and how long a crash may forget
            # a DeleteRecords.
            ("kafka-recovery-point-checkpoint",
             lambda: min(get("log.flush.offset.checkpoint.interval.ms"),
                         get("log.flush.start.offset.checkpoint.interval.ms")) / 1000,
             self._write_checkpoints),
            ("highwatermark-checkpoint",
             lambda: get("replica.high.watermark.checkpoint.interval.ms") / 1000,
             self._write_high_watermark_checkpoints),
            ("kafka-delete-logs",
             lambda: FILE_DELETE_CHECK_SECONDS, self._delete_due_files),
            ("group-coordinator", lambda: GROUP_TICK_MS / 1000, self._tick_group_coordinator),
            ("transaction-abort",
             lambda: get("transaction.abort.timed.out.transaction.cleanup.interval.ms") / 1000,
             self._abort_timed_out_transactions),
            ("transactional-id-expiration",
             lambda: get("transaction.remove.expired.transaction.cleanup.interval.ms") / 1000,
             self._remove_expired_transactional_ids),
        ] + self._log_cleaner_task() + self._isr_expiration_task():
            self._background.append(
                asyncio.create_task(self._every(name, interval_seconds, work), name=name)
            )

    def _log_cleaner_task(self) -> list[tuple[str, Callable[[], float],
                                              Callable[[], Awaitable[None]]]]:
        """Compaction (Kafka's ``kafka-log-cleaner-thread``): reading and writing segments
        runs in a worker process, the swap on the event loop."""
        if not self.config.get("log.cleaner.enable"):
            return []
        get = self.config.get
        cleaner = self._cleaner = LogCleaner(
            logs=self.log_manager.compacted_logs, log_dirs=self.log_manager.log_dirs,
            clock=self.clock,
            config=CleanerConfig(
                dedupe_buffer_size=get("log.cleaner.dedupe.buffer.size"),
                io_buffer_load_factor=get("log.cleaner.io.buffer.load.factor")),
            run_in_executor=functools.partial(self._loop.run_in_executor, None),
        )

        async def clean_logs() -> None:
            await cleaner.clean_logs()

        return [("kafka-log-cleaner",
                 lambda: self.config.get("log.cleaner.backoff.ms") / 1000, clean_logs)]

    def _isr_expiration_task(self) -> list[tuple[str, Callable[[], float],
                                                 Callable[[], Awaitable[None]]]]:
        """Followers that stopped catching up leave the ISR (Kafka's ``isr-expiration``,
        every half ``replica.lag.time.max.ms``)."""
        if self.controller is None:
            return []

        async def shrink() -> None:
            self.replica_manager.maybe_shrink_isr()

        return [("isr-expiration",
                 lambda: self.config.get("replica.lag.time.max.ms") / 2000, shrink)]

    @staticmethod
    async def _every(
        name: str, interval_seconds: Callable[[], float], work: Callable[[], Awaitable[None]]
    ) -> None:
        """Runs ``work`` every interval (read again each time: configs change at runtime)."""
        while True:
            await asyncio.sleep(interval_seconds())
            try:
                await work()
            except OSError:
                log.exception("%s failed", name)

    async def _load_deferred_logs(self) -> None:
        """Loads the logs the start deferred (see ``LogManager.load_deferred``), a slice at
        a time, so that requests are served meanwhile; a request for one loads it first."""
        count = self.log_manager.deferred_count
        started = time.monotonic()
        while True:
            with _collector_paused():
                remaining = self.log_manager.load_deferred(DEFERRED_LOAD_SLICE)
            if not remaining:
                break
            await asyncio.sleep(0)
        if count:
            log.info("loaded the %d partitions deferred at startup in %.1f s", count,
                     time.monotonic() - started)

    async def _delete_old_segments(self) -> None:
        """retention.ms / retention.bytes (Kafka's kafka-log-retention task)."""
        deleted = self.log_manager.delete_old_segments()
        if deleted:
            log.info("retention deleted %d segments", deleted)

    async def _flush_dirty_logs(self) -> None:
        """flush.ms and rolled segments, one fsync at a time, off the event loop."""
        for partition_log, offset in self.log_manager.logs_to_flush():
            try:
                await self._loop.run_in_executor(None, partition_log.flush_to, offset)
            except KafkaStorageError:
                continue  # the log said why; its dir is going offline

    async def _write_checkpoints(self) -> None:
        snapshot = self.log_manager.checkpoint_snapshot()
        await self._loop.run_in_executor(None, self.log_manager.write_checkpoints, snapshot)

    async def _write_high_watermark_checkpoints(self) -> None:
        """``replication-offset-checkpoint``: a restart opens each log at the high watermark
        saved here, not at its log end, which followers may not have."""
        snapshot = self.log_manager.high_watermark_checkpoint_snapshot()
        await self._loop.run_in_executor(
            None, self.log_manager.write_high_watermark_checkpoints, snapshot)

    async def _delete_due_files(self) -> None:
        self.log_manager.delete_due_files()

    async def _tick_group_coordinator(self) -> None:
        """Group sessions, rebalance timeouts and offset retention; share-partition records
        whose acquisition lock ended."""
        self.group_coordinator.tick()
        self.share_partitions.tick()

    async def _abort_timed_out_transactions(self) -> None:
        """Transactions open longer than their timeout are aborted, their producers fenced;
        completions whose write failed are written again."""
        self.transaction_coordinator.retry_completions()
        self.transaction_coordinator.abort_timed_out_transactions()

    async def _remove_expired_transactional_ids(self) -> None:
        self.transaction_coordinator.remove_expired_transactional_ids()

    # -- topics ------------------------------------------------------------------------

    def topic_config(self, topic: str) -> dict[str, Any]:
        """The effective, parsed topic-level configs: overrides, then broker, then defaults."""
        metadata = self.metadata.topic(topic) if self.metadata else None
        return effective_topic_config(metadata.configs if metadata else {}, self.config)

    def _become_leader_or_follower(self, topic: TopicMetadata,
                                   states: tuple[PartitionState, ...]) -> None:
        topic_config = self.topic_config(topic.name)
        changes = self.replica_manager.become_leader_or_follower(
            topic.name, states, log_config=to_log_config(topic_config),
            topic_config=topic_config, topic_id=topic.topic_id)
        if self.fetchers is not None:
            self.fetchers.remove_partitions(changes.became_leader + changes.removed)
            self.fetchers.add_partitions([self.replica_manager.get_partition(tp)
                                          for tp in changes.became_follower])
        for tp in changes.became_follower + changes.removed:
            self.share_partitions.on_resigned(tp)  # the new leader reads their state
        if topic.name == OFFSETS_TOPIC:
            for tp in changes.became_leader:
                self.group_coordinator.on_elected(tp.partition)
            for tp in changes.became_follower + changes.removed:
                self.group_coordinator.on_resigned(tp.partition)
        elif topic.name == SHARE_STATE_TOPIC:
            for tp in changes.became_leader:
                self.share_coordinator.on_elected(tp.partition)
            for tp in changes.became_follower + changes.removed:
                self.share_coordinator.on_resigned(tp.partition)
        elif topic.name == TRANSACTION_STATE_TOPIC:
            # The coordinator epoch is the partition's leader epoch.
            for tp in changes.became_leader:
                self.transaction_coordinator.on_elected(
                    tp.partition, self.replica_manager.get_partition(tp).leader_epoch)
            for tp in changes.became_follower:
                self.transaction_coordinator.on_resigned(
                    tp.partition, self.replica_manager.get_partition(tp).leader_epoch)
            for tp in changes.removed:
                self.transaction_coordinator.on_resigned(tp.partition)

    def _refresh_configs(self, topic: TopicMetadata) -> None:
        topic_config = self.topic_config(topic.name)
        log_config = to_log_config(topic_config)
        for state in topic.partitions:
            self.replica_manager.update_config(
                TopicPartition(topic.name, state.partition), log_config, topic_config
            )

    def _new_authorizer(self) -> AclAuthorizer | None:
        """The ACL authorizer with the cluster's ACLs, when ``authorizer.class.name`` is set;
        AclsChanged events keep it current."""
        if not self.config.get("authorizer.class.name"):
            return None
        try:
            super_users = parse_super_users(self.config.get("super.users") or "")
        except ValueError as exc:
            raise ConfigError(f"super.users: {exc}", "super.users") from None
        authorizer = AclAuthorizer(super_users, self.config.get("allow.everyone.if.no.acl.found"))
        for pattern, entries in self.metadata.acls().items():
            authorizer.set_acls(pattern, entries)
        return authorizer

    def _on_metadata_event(self, event: MetadataEvent) -> None:
        match event:
            case TopicCreated(topic):
                self._become_leader_or_follower(topic, topic.partitions)
                self.group_coordinator.on_topics_changed()
            case PartitionsAdded(topic, previous_count):
                self._become_leader_or_follower(topic, topic.partitions[previous_count:])
                self.group_coordinator.on_topics_changed()
            case PartitionStatesChanged(topic, states):
                self._become_leader_or_follower(topic, states)
            case TopicDeleted(topic):
                partitions = [TopicPartition(topic.name, s.partition) for s in topic.partitions]
                for tp in partitions:
                    self.replica_manager.stop_replica(tp, delete=True)
                    if tp.topic == TRANSACTION_STATE_TOPIC:
                        self.transaction_coordinator.on_resigned(tp.partition)
                self.group_coordinator.on_partitions_deleted(partitions)
                self.group_coordinator.on_topics_changed()
            case TopicConfigChanged(topic):
                self._refresh_configs(topic)
            case SessionChanged(valid):
                self.replica_manager.fence_leaderships(not valid)
            case EntityConfigsChanged(entity, configs):
                apply_quotas(self.quotas, entity, configs)
            case AclsChanged(pattern, entries):
                if self.authorizer is not None:
                    self.authorizer.set_acls(pattern, entries)
            case BrokerConfigChanged(configs, cluster_default):
                self.config.set_dynamic(configs, per_broker=not cluster_default)
                if self._socket_server is not None:
                    self._socket_server.reconfigure()
                for topic in self.metadata.topics().values():
                    self._refresh_configs(topic)
