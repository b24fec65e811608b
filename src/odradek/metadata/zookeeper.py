"""The ZooKeeper metadata backend: a broker's view of the cluster, kept fresh by watches.

Every broker keeps the whole cluster's metadata in memory — live brokers, the controller,
each topic's replica assignment, configs and every partition's state — and answers
Metadata from it, so all brokers give the same answer within a ZooKeeper round trip of a
change. Each cached znode is read with a watch; when the watch fires the znode is read
again (with the watch set again), and a read older than what the cache holds (by the
znode's ``mzxid``, ZooKeeper's global order of changes) is dropped, so concurrent re-reads
can never move the cache backwards.

From these reads the store publishes the same events as the local store: a topic appears
(``TopicCreated``) once the controller has written the state of every partition, a
partition count grows (``PartitionsAdded``), a partition's leader, epoch, replicas or ISR
change (``PartitionStatesChanged``), a topic disappears (``TopicDeleted``), configs change.
It adds ``BrokersChanged`` and ``ControllerChanged`` for the controller.

Writes are a client's requests: creating a topic writes its configs and replica
assignment, and the controller (watching ``/brokers/topics``) elects leaders and writes the
partition states; deleting one asks the controller through ``/admin/delete_topics``.
The calls return once this broker's cache shows the result, or after ``wait_ms``.

The broker registers as the ephemeral ``/brokers/ids/<id>``. When its session expires
ZooKeeper removes that znode and the broker's watches; kazoo opens a new session, and the
store registers again and reads everything again, publishing what changed meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from odradek.metadata.assignment import AssignmentError, assign_replicas
from odradek.metadata.model import BrokerInfo, PartitionState, TopicMetadata
from odradek.metadata.store import (
    CLIENTS,
    GROUPS,
    USERS,
    AclsChanged,
    BrokerConfigChanged,
    EntityConfigsChanged,
    MetadataStore,
    PartitionsAdded,
    PartitionStatesChanged,
    TopicConfigChanged,
    TopicCreated,
    TopicDeleted,
    TopicExistsError,
    UnknownTopicError,
    new_cluster_id,
)
from odradek.metadata import zk_layout as layout
from odradek.security.acl import (
    ACL_STORE_PATHS,
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    acl_path,
    acl_type_path,
    decode_acls,
    encode_acls,
)

# The resource types whose ACLs are loaded (every type Kafka stores ACLs for).
ACL_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                      ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN,
                      ResourceType.USER)
from odradek.metadata.zk_client import (
    AsyncZooKeeper,
    BadVersionError,
    Check,
    SetData,
    KazooState,
    NodeExistsError,
    NoNodeError,
    WatchedEvent,
    ZnodeStat,
    ZooKeeperUnavailable,
)

log = logging.getLogger(__name__)

# How long a change waits to show in this broker's cache before the call returns anyway.
DEFAULT_WAIT_MS = 30_000


@dataclass(frozen=True, slots=True)
class BrokersChanged:
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class ControllerChanged:
    controller_id: int


@dataclass(frozen=True, slots=True)
class TopicAssignmentChanged:
    """``/brokers/topics/<topic>`` was written: a new topic, new partitions, or a
    reassignment. The controller creates the states of partitions that have none."""

    topic: str


@dataclass(frozen=True, slots=True)
class SessionChanged:
    """The ZooKeeper session is suspended (the connection is lost; ``valid`` False), has
    expired (``expired``: its ephemeral znodes and watches are gone), or is valid again
    (the same session back, or a new one with this broker registered again)."""

    valid: bool
    expired: bool = False


class ZooKeeperMetadataStore(MetadataStore):
    def __init__(self, connect: str, me: BrokerInfo, security_protocols: dict[str, str], *,
                 session_timeout_ms: int, connection_timeout_ms: int,
                 cluster_id: str | None = None) -> None:
        super().__init__()
        self._connect = connect
        self._me = me
        self._security_protocols = security_protocols
        self._session_timeout_ms = session_timeout_ms
        self._connection_timeout_ms = connection_timeout_ms
        self._wanted_cluster_id = cluster_id
        self._cluster_id = ""
        self.zk: AsyncZooKeeper | None = None
        self._brokers: dict[int, BrokerInfo] = {}
        self._controller_id = -1
        self._assignments: dict[str, layout.TopicAssignment] = {}
        self._assignment_versions: dict[str, int] = {}  # the znode versions they were read at
        self._states: dict[str, dict[int, tuple[layout.LeaderAndIsr, int]]] = {}
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._broker_configs: dict[str, str] = {}
        self._default_broker_configs: dict[str, str] = {}
        self._entity_configs: dict[str, dict[str, str]] = {}
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}
        self._mzxid: dict[str, int] = {}  # per cached path: the newest change applied
        self._watches: dict[str, Callable[[WatchedEvent], None]] = {}
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future]] = []
        self._tasks: set[asyncio.Task] = set()
        self._session_lost = False
        # Set while the connection is down: a CONNECTED state that ends no outage (the first
        # connection) calls for no re-read.
        self._disconnected = False
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Connects, registers this broker and loads the cluster's metadata."""
        self.zk = AsyncZooKeeper(self._connect, session_timeout_ms=self._session_timeout_ms,
                                 connection_timeout_ms=self._connection_timeout_ms,
                                 on_state=self._on_session_state)
        await self.zk.start()
        for path in layout.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)
        self._cluster_id = await self._read_or_create_cluster_id()
        await self._register()
        await self._load()

    def close(self) -> None:
        self._closed = True
        for task in self._tasks:
            task.cancel()
        if self.zk is not None:
            self.zk.close()

    async def _read_or_create_cluster_id(self) -> str:
        wanted = self._wanted_cluster_id or new_cluster_id()
        try:
            await self.zk.create(layout.CLUSTER_ID, layout.encode_cluster_id(wanted),
                                 makepath=True)
            return wanted
        except NodeExistsError:
            data, _ = await self.zk.get(layout.CLUSTER_ID)
            existing = layout.decode_cluster_id(data)
            if self._wanted_cluster_id and existing != self._wanted_cluster_id:
                raise ValueError(f"cluster.id {self._wanted_cluster_id} does not match the "
                                 f"cluster id {existing} stored in ZooKeeper") from None
            return existing

    async def _register(self) -> None:
        """Creates ``/brokers/ids/<id>``; waits out a registration left by this broker's
        previous session (it goes when that session times out), refuses a live twin."""
        path = layout.broker_path(self._me.node_id)
        data = layout.encode_broker(self._me, self._security_protocols)
        deadline = asyncio.get_running_loop().time() + self._session_timeout_ms / 1000 + 5
        while True:
            try:
                await self.zk.create(path, data, ephemeral=True)
                return
            except NodeExistsError:
                got = await self.zk.get_or_none(path)
                if got is not None and got[1].ephemeralOwner == self.zk.session_id:
                    return
                if asyncio.get_running_loop().time() > deadline:
                    raise ValueError(f"broker id {self._me.node_id} is registered in ZooKeeper "
                                     "by another live broker") from None
                await asyncio.sleep(0.5)

    def _on_session_state(self, state: KazooState) -> None:
        if self._closed:
            return
        if state == KazooState.LOST:
            self._session_lost = self._disconnected = True
            self._publish(SessionChanged(False, expired=True))
        elif state == KazooState.SUSPENDED:
            self._disconnected = True
            self._publish(SessionChanged(False))
        elif state == KazooState.CONNECTED and self._disconnected:
            self._disconnected = False
            if self._session_lost:
                # A new session: ephemeral znodes and watches of the old one are gone.
                self._session_lost = False
                self._watches.clear()
                self.zk.forget_watches()
                self._spawn(self._reestablish())
            else:
                # The same session: its watches held, but a re-read a watch started while
                # the connection was down failed, and set no watch again. Read it all again.
                self._spawn(self._reload_after_suspension())

    async def _reestablish(self) -> None:
        """A new session: register again and read everything again, since what changed
        while this broker had no session reached it through no watch."""
        await self._register()
        await self._load(everything=True)
        self._publish(SessionChanged(True))

    async def _reload_after_suspension(self) -> None:
        await self._load(everything=True)
        self._publish(SessionChanged(True))

    async def _load(self, *, everything: bool = False) -> None:
        await asyncio.gather(self._refresh_brokers(), self._refresh_controller(),
                             self._refresh_topic_list(everything=everything),
                             self._refresh_entities(USERS), self._refresh_entities(CLIENTS),
                             self._refresh_entities(GROUPS),
                             self._refresh_all_acls(),
                             self._refresh_broker_config(None),
                             self._refresh_broker_config(self._me.node_id))

    # -- reads -------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def controller_id(self) -> int:
        return self._controller_id

    @property
    def node_id(self) -> int:
        return self._me.node_id

    def brokers(self) -> tuple[BrokerInfo, ...]:
        return tuple(self._brokers[node_id] for node_id in sorted(self._brokers))

    def topics(self) -> dict[str, TopicMetadata]:
        return self._topics

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def broker_configs(self, *, cluster_default: bool = False) -> dict[str, str]:
        return dict(self._default_broker_configs if cluster_default else self._broker_configs)

    def entity_configs(self) -> dict[str, dict[str, str]]:
        return {entity: dict(configs) for entity, configs in self._entity_configs.items()}

    def acls(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        return dict(self._acls)

    def assignment(self, topic: str) -> layout.TopicAssignment | None:
        return self._assignments.get(topic)

    def topics_pending_states(self) -> dict[str, layout.TopicAssignment]:
        """Topics whose assignment is written and some partition has no state yet."""
        return {name: a for name, a in self._assignments.items()
                if len(self._states.get(name, {})) < len(a.replicas)}

    def leader_and_isr(self, topic: str, partition: int
                       ) -> tuple[layout.LeaderAndIsr, int] | None:
        """A partition's state as read from ZooKeeper and its znode version."""
        return self._states.get(topic, {}).get(partition)

    # -- watched reads -----------------------------------------------------------------

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if task.cancelled() or self._closed or (error := task.exception()) is None:
            return
        if isinstance(error, ZooKeeperUnavailable):
            # The session is suspended or gone: a new one reads everything again.
            log.warning("ZooKeeper metadata refresh failed: %s", error)
        else:
            log.error("ZooKeeper metadata refresh failed", exc_info=error)

    def _watch(self, path: str, refresh: Callable[[], Coroutine[Any, Any, None]]
               ) -> Callable[[WatchedEvent], None]:
        """The one watch of ``path``: when it fires, ``refresh`` reads the path again."""
        watch = self._watches.get(path)
        if watch is None:
            def watch(event: WatchedEvent) -> None:
                if not self._closed and event.type is not None:
                    self._spawn(refresh())

            self._watches[path] = watch
        return watch

    def _fresh(self, path: str, stat: ZnodeStat | None) -> bool:
        """True when ``stat`` is newer than what the cache holds for ``path`` (and records
        it); a read that lost a race with a newer one is dropped."""
        mzxid = stat.mzxid if stat is not None else -1
        if mzxid < self._mzxid.get(path, -1):
            return False
        self._mzxid[path] = mzxid
        return True

    async def _refresh_brokers(self) -> None:
        ids = await self.zk.children(layout.BROKER_IDS,
                                     self._watch(layout.BROKER_IDS, self._refresh_brokers))
        brokers = {}
        for node_id, got in zip(ids, await asyncio.gather(
                *(self.zk.get_or_none(layout.BROKER_IDS + "/" + i) for i in ids))):
            if got is not None:
                brokers[int(node_id)] = layout.decode_broker(int(node_id), got[0])
        if brokers != self._brokers:
            self._brokers = brokers
            self._publish(BrokersChanged(self.brokers()))
            self._check_waiters()

    async def _refresh_controller(self) -> None:
        got = await self.zk.get_or_none(
            layout.CONTROLLER, self._watch(layout.CONTROLLER, self._refresh_controller))
        controller_id = layout.decode_controller(got[0]) if got is not None else -1
        if controller_id != self._controller_id:
            self._controller_id = controller_id
            self._publish(ControllerChanged(controller_id))
            self._check_waiters()

    async def _refresh_topic_list(self, *, everything: bool = False) -> None:
        """New topics are read, gone ones forgotten; with ``everything``, every topic is
        read again, every partition state included."""
        names = set(await self.zk.children(
            layout.TOPICS, self._watch(layout.TOPICS, self._refresh_topic_list)))
        for name in set(self._assignments) - names:
            self._forget_topic(name)
        await asyncio.gather(*(self._refresh_topic(name, every_state=everything)
                               for name in names
                               if everything or name not in self._assignments))

    async def _refresh_topic(self, name: str, *, every_state: bool = False) -> None:
        path = layout.topic_path(name)
        got = await self.zk.get_or_none(path, self._watch(path, lambda: self._refresh_topic(name)))
        if got is None:
            self._forget_topic(name)
            return
        if not self._fresh(path, got[1]) and not every_state:
            return
        assignment = layout.decode_assignment(got[0])
        previous = self._assignments.get(name)
        if previous is not None and previous.topic_id != assignment.topic_id:
            self._forget_topic(name)  # deleted and created again while we looked away
        self._assignments[name] = assignment
        self._assignment_versions[name] = got[1].version
        await asyncio.gather(
            self._refresh_topic_config(name, rebuild=False),
            *(self._refresh_state(name, p, rebuild=False) for p in assignment.replicas
              if every_state or p not in self._states.get(name, {})))
        self._rebuild(name)
        self._publish(TopicAssignmentChanged(name))

    async def refresh_topic(self, name: str) -> None:
        """Reads a topic's assignment and partition states now (the controller, right after
        writing them)."""
        await self._refresh_topic(name, every_state=True)

    async def refresh_partition_state(self, name: str, partition: int) -> None:
        """Reads a partition's state now (the controller, right after writing it)."""
        await self._refresh_state(name, partition)

    async def _refresh_state(self, name: str, partition: int, *, rebuild: bool = True) -> None:
        path = layout.partition_state_path(name, partition)
        got = await self.zk.get_or_none(
            path, self._watch(path, lambda: self._refresh_state(name, partition)))
        if name not in self._assignments or not self._fresh(path, got[1] if got else None):
            return
        states = self._states.setdefault(name, {})
        if got is None:
            states.pop(partition, None)
        else:
            states[partition] = (layout.decode_leader_and_isr(got[0]), got[1].version)
        if rebuild:
            self._rebuild(name)

    async def _refresh_topic_config(self, name: str, *, rebuild: bool = True) -> None:
        path = layout.topic_config_path(name)
        got = await self.zk.get_or_none(
            path, self._watch(path, lambda: self._refresh_topic_config(name)))
        if name not in self._assignments or not self._fresh(path, got[1] if got else None):
            return
        self._topic_configs[name] = layout.decode_config(got[0]) if got else {}
        if rebuild:
            self._rebuild(name)

    async def _refresh_broker_config(self, node_id: int | None) -> None:
        path = layout.broker_config_path(node_id)
        got = await self.zk.get_or_none(
            path, self._watch(path, lambda: self._refresh_broker_config(node_id)))
        if not self._fresh(path, got[1] if got else None):
            return
        configs = layout.decode_config(got[0]) if got else {}
        default = node_id is None
        if configs != (self._default_broker_configs if default else self._broker_configs):
            if default:
                self._default_broker_configs = configs
            else:
                self._broker_configs = configs
            self._publish(BrokerConfigChanged(dict(configs), default))

    async def _watched_children(self, path: str,
                                refresh: Callable[[], Coroutine[Any, Any, None]]) -> list[str]:
        """The children of ``path``, watched; none (and the path's creation watched) while
        the path does not exist."""
        watch = self._watch(path, refresh)
        try:
            return await self.zk.children(path, watch)
        except NoNodeError:
            if await self.zk.exists(path, watch) is None:
                return []
            return await self.zk.children(path, watch)

    async def _refresh_entities(self, parent: str) -> None:
        """The entities under ``/config/<parent>`` ("users", "clients", "groups", or a
        user's "users/<user>/clients"), each read and watched; a user's clients are watched
        too."""
        names = await self._watched_children(layout.entity_config_path(parent),
                                             lambda: self._refresh_entities(parent))
        entities = [f"{parent}/{name}" for name in names]
        for gone in [e for e in self._entity_configs
                     if e.rpartition("/")[0] == parent and e not in entities]:
            del self._entity_configs[gone]
            self._mzxid.pop(layout.entity_config_path(gone), None)
            self._publish(EntityConfigsChanged(gone, {}))
        refreshes = [self._refresh_entity(entity) for entity in entities]
        if parent == USERS:
            refreshes += [self._refresh_entities(f"{entity}/{CLIENTS}") for entity in entities]
        await asyncio.gather(*refreshes)

    async def _refresh_entity(self, entity: str) -> None:
        path = layout.entity_config_path(entity)
        got = await self.zk.get_or_none(
            path, self._watch(path, lambda: self._refresh_entity(entity)))
        if not self._fresh(path, got[1] if got else None):
            return
        configs = layout.decode_config(got[0]) if got else {}
        if configs != self._entity_configs.get(entity, {}):
            if configs:
                self._entity_configs[entity] = configs
            else:
                self._entity_configs.pop(entity, None)
            self._publish(EntityConfigsChanged(entity, dict(configs)))

    async def _refresh_all_acls(self) -> None:
        await asyncio.gather(*(self._refresh_acl_names(pattern_type, resource_type)
                               for pattern_type in ACL_STORE_PATHS
                               for resource_type in ACL_RESOURCE_TYPES))

    async def _refresh_acl_names(self, pattern_type: PatternType,
                                 resource_type: ResourceType) -> None:
        names = await self._watched_children(
            acl_type_path(pattern_type, resource_type),
            lambda: self._refresh_acl_names(pattern_type, resource_type))
        listed = {ResourcePattern(resource_type, name, pattern_type) for name in names}
        for gone in [p for p in self._acls if p not in listed
                     and (p.resource_type, p.pattern_type) == (resource_type, pattern_type)]:
            # A deleted znode's data watch reads nothing newer than what is cached: the
            # parent's children say it is gone.
            del self._acls[gone]
            self._mzxid.pop(acl_path(gone), None)
            self._publish(AclsChanged(gone, frozenset()))
        await asyncio.gather(*(self._refresh_acl(pattern) for pattern in listed))

    async def _refresh_acl(self, pattern: ResourcePattern) -> None:
        path = acl_path(pattern)
        got = await self.zk.get_or_none(
            path, self._watch(path, lambda: self._refresh_acl(pattern)))
        if not self._fresh(path, got[1] if got else None):
            return
        entries = decode_acls(got[0]) if got else frozenset()
        if entries != self._acls.get(pattern, frozenset()):
            if entries:
                self._acls[pattern] = entries
            else:
                self._acls.pop(pattern, None)
            self._publish(AclsChanged(pattern, entries))

    # -- the topics' view --------------------------------------------------------------

    def _rebuild(self, name: str) -> None:
        """Publishes what changed in ``name``'s metadata after a read."""
        assignment = self._assignments.get(name)
        if assignment is None:
            return
        states = self._states.get(name, {})
        old = self._topics.get(name)
        # A topic, or the partitions a CreatePartitions added, become visible together, once
        # the controller wrote every one's state: a partition count seen is never partial
        # (the group coordinator maps groups to partitions by it).
        count = len(assignment.replicas)
        if any(p not in states for p in range(count)):
            count = len(old.partitions) if old is not None else 0
        if count == 0 or any(p not in states for p in range(count)):
            return  # not created yet, or being deleted (the topic's znode going says so)
        partitions = [layout.partition_state(p, assignment.replicas[p], *states[p])
                      for p in range(count)]
        topic = TopicMetadata(name, assignment.topic_id, tuple(partitions),
                              dict(self._topic_configs.get(name, {})))
        self._topics[name] = topic
        self._by_id[topic.topic_id] = topic
        if old is None:
            self._publish(TopicCreated(topic))
        else:
            if old.configs != topic.configs:
                self._publish(TopicConfigChanged(topic))
            changed = tuple(new for new, before in zip(topic.partitions, old.partitions)
                            if new != before)
            if changed:
                self._publish(PartitionStatesChanged(topic, changed))
            if len(topic.partitions) > len(old.partitions):
                self._publish(PartitionsAdded(topic, len(old.partitions)))
        self._check_waiters()

    def _forget_topic(self, name: str) -> None:
        self._assignments.pop(name, None)
        self._assignment_versions.pop(name, None)
        states = self._states.pop(name, {})
        self._topic_configs.pop(name, None)
        for path in [layout.topic_path(name), layout.topic_config_path(name),
                     *(layout.partition_state_path(name, p) for p in states)]:
            self._mzxid.pop(path, None)
            if (watch := self._watches.pop(path, None)) is not None:
                self.zk.forget_watch(watch)
        topic = self._topics.pop(name, None)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
            self._publish(TopicDeleted(topic))
        self._check_waiters()

    # -- waiting for the cache ---------------------------------------------------------

    def _check_waiters(self) -> None:
        still = []
        for predicate, future in self._waiters:
            if future.done():
                continue
            if predicate():
                future.set_result(None)
            else:
                still.append((predicate, future))
        self._waiters = still

    async def wait_for(self, predicate: Callable[[], bool], wait_ms: int) -> bool:
        """Waits until ``predicate()`` holds in this broker's cache; False on timeout."""
        if predicate():
            return True
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, future))
        try:
            await asyncio.wait_for(future, wait_ms / 1000)
            return True
        except TimeoutError:
            return False

    # -- changes -----------------------------------------------------------------------

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: dict[str, str], *,
                           assignment: dict[int, tuple[int, ...]] | None = None,
                           wait_ms: int = DEFAULT_WAIT_MS) -> TopicMetadata:
        if name in self._topics or await self.zk.exists(layout.topic_path(name)):
            raise TopicExistsError(name)
        if assignment is None:
            try:
                assignment = assign_replicas(self.brokers(), num_partitions,
                                             replication_factor)
            except AssignmentError as exc:
                raise ValueError(str(exc)) from None
        topic_id = uuid.uuid4()
        await self._set_or_create(layout.topic_config_path(name), layout.encode_config(configs))
        try:
            await self.zk.create(layout.topic_path(name), layout.encode_assignment(
                layout.TopicAssignment(topic_id, dict(assignment), {}, {})))
        except NodeExistsError:
            raise TopicExistsError(name) from None
        await self.wait_for(lambda: self._visible(name, len(assignment), topic_id), wait_ms)
        return self._topics.get(name) or TopicMetadata(name, topic_id, (), dict(configs))

    def _visible(self, name: str, partitions: int, topic_id: uuid.UUID | None = None) -> bool:
        topic = self._topics.get(name)
        return (topic is not None and len(topic.partitions) >= partitions
                and (topic_id is None or topic.topic_id == topic_id))

    async def delete_topic(self, name: str, *, wait_ms: int = DEFAULT_WAIT_MS) -> TopicMetadata:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(name)
        try:
            await self.zk.create(layout.delete_topic_path(name), makepath=True)
        except NodeExistsError:
            pass  # already asked
        await self.wait_for(lambda: self._topics.get(name) is not topic
                            and (self._topics.get(name) is None
                                 or self._topics[name].topic_id != topic.topic_id), wait_ms)
        return topic

    async def create_partitions(self, name: str, total_count: int, *,
                                assignments: list[tuple[int, ...]] | None = None,
                                wait_ms: int = DEFAULT_WAIT_MS) -> TopicMetadata:
        path = layout.topic_path(name)
        while True:
            try:
                data, stat = await self.zk.get(path)
            except NoNodeError:
                raise UnknownTopicError(name) from None
            current = layout.decode_assignment(data)
            previous = len(current.replicas)
            if assignments is not None:
                added = {previous + i: tuple(r) for i, r in enumerate(assignments)}
            else:
                added = assign_replicas(self.brokers(), total_count - previous,
                                        len(current.replicas[0]), first_partition=previous)
            updated = layout.TopicAssignment(current.topic_id, current.replicas | added,
                                             current.adding, current.removing)
            try:
                await self.zk.set(path, layout.encode_assignment(updated), stat.version)
                break
            except BadVersionError:
                continue  # changed meanwhile (a reassignment): place the new ones again
        await self.wait_for(lambda: self._visible(name, total_count), wait_ms)
        return self._topics[name] if name in self._topics else self._require(name)

    def _require(self, name: str) -> TopicMetadata:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(name)
        return topic

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicMetadata:
        self._require(name)
        path = layout.topic_config_path(name)
        stat = await self._set_or_create(path, layout.encode_config(configs))
        if self._fresh(path, stat):
            self._topic_configs[name] = dict(configs)
            self._rebuild(name)
        return self._require(name)

    async def set_broker_configs(self, configs: dict[str, str], *,
                                 cluster_default: bool = False) -> None:
        node_id = None if cluster_default else self._me.node_id
        path = layout.broker_config_path(node_id)
        await self._set_or_create(path, layout.encode_config(configs))
        await self._refresh_broker_config(node_id)

    async def alter_acls(self, pattern: ResourcePattern, *,
                         add: frozenset[AccessControlEntry] = frozenset(),
                         remove: frozenset[AccessControlEntry] = frozenset()
                         ) -> frozenset[AccessControlEntry]:
        """A read-modify-write conditional on the znode's version, retried when another
        broker changed the pattern's ACLs in between (Kafka's AclAuthorizer does the same)."""
        path = acl_path(pattern)
        while True:
            got = await self.zk.get_or_none(path)
            before = decode_acls(got[0]) if got else frozenset()
            after = (before | add) - remove
            if after == before:
                return after
            try:
                if got is None:
                    await self.zk.create(path, encode_acls(after), makepath=True)
                elif after:
                    await self.zk.set(path, encode_acls(after), got[1].version)
                else:
                    await self.zk.delete(path, got[1].version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            await self._refresh_acl(pattern)
            return after

    async def set_entity_configs(self, entity: str, configs: dict[str, str]) -> None:
        await self._set_or_create(layout.entity_config_path(entity), layout.encode_config(configs))
        await self._refresh_entity(entity)

    async def allocate_producer_ids(self, count: int) -> range:
        """Kafka's ZooKeeper producer id manager: the next block after the one recorded in
        ``/latest_producer_id_block``, claimed with a conditional write."""
        path = layout.PRODUCER_ID_BLOCK
        while True:
            got = await self.zk.get_or_none(path)
            if got is None:
                try:
                    await self.zk.create(path, b"", makepath=True)
                except NodeExistsError:
                    pass
                continue
            data, stat = got
            start = layout.decode_producer_id_block_end(data) + 1
            block = range(start, start + count)
            try:
                await self.zk.set(path, layout.encode_producer_id_block(
                    self._me.node_id, block.start, block.stop - 1), stat.version)
                return block
            except BadVersionError:
                continue  # another broker took that block

    async def _set_or_create(self, path: str, data: bytes) -> ZnodeStat:
        try:
            return await self.zk.set(path, data)
        except NoNodeError:
            try:
                await self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                pass
            return await self.zk.set(path, data)

    # -- controlled shutdown -----------------------------------------------------------

    async def request_controlled_shutdown(self, wait_ms: int) -> bool:
        """Asks the controller, through ``/odradek/controlled_shutdown/<id>``, to move this
        broker's leaderships to other ISR members; True once it marked the request done and
        this broker's cache shows no partition it leads that another live ISR member could
        lead, False after ``wait_ms``."""
        path = layout.controlled_shutdown_path(self._me.node_id)
        try:
            await self.zk.create(path, b"", ephemeral=True)
        except NodeExistsError:
            await self.zk.set(path, b"")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        while loop.time() < deadline:
            got = await self.zk.get_or_none(path)
            if got is not None and got[0] == b"done":
                remaining_ms = max(0, int((deadline - loop.time()) * 1000))
                return await self.wait_for(lambda: not self._movable_leaderships(),
                                           remaining_ms)
            await asyncio.sleep(0.05)
        return False

    def _movable_leaderships(self) -> list[tuple[str, int]]:
        me, live = self._me.node_id, self._brokers.keys()
        return [(topic.name, state.partition) for topic in self._topics.values()
                for state in topic.partitions
                if state.leader == me and any(r != me and r in live for r in state.isr)]

    # -- the leader's ISR changes ------------------------------------------------------

    async def alter_isr(self, topic: str, partition: int, state: PartitionState,
                        isr: tuple[int, ...]) -> PartitionState:
        """Writes ``isr`` for a partition this broker leads, conditionally on the state
        being the one it knows (``state.partition_epoch``, the znode version) and on the
        topic's assignment being the one it knows: an ISR change never overwrites a
        controller decision it has not seen, nor adds a replica a reassignment removed
        meanwhile. Raises ``BadVersionError`` when either moved on."""
        known = self.leader_and_isr(topic, partition)
        controller_epoch = known[0].controller_epoch if known else 0
        new = layout.LeaderAndIsr(state.leader, state.leader_epoch, isr, controller_epoch)
        path = layout.partition_state_path(topic, partition)
        _, stat = await self.zk.multi([
            Check(layout.topic_path(topic), self._assignment_versions.get(topic, -1)),
            SetData(path, layout.encode_leader_and_isr(new), state.partition_epoch)])
        if self._fresh(path, stat):
            self._states.setdefault(topic, {})[partition] = (new, stat.version)
            self._rebuild(topic)
        return PartitionState(partition, new.leader, new.leader_epoch, state.replicas, isr,
                              partition_epoch=stat.version)
