"""The controller: one broker of the cluster decides leaders and ISRs and writes them to
ZooKeeper (Kafka's ``KafkaController`` in ZooKeeper mode).

**Election.** Every broker tries to create the ephemeral ``/controller`` znode; the one
that succeeds increments ``/controller_epoch`` and is the controller until its session
ends. The others watch ``/controller`` (through the metadata store) and try again when it
disappears, so a dead controller is replaced within ``zookeeper.session.timeout.ms``.

**Fencing.** Every write the controller makes is a ZooKeeper multi that also checks the
version of ``/controller_epoch`` it set when elected: once another broker became
controller (and incremented the epoch), a deposed controller's writes fail as a whole.
Writes to a partition's state are also conditional on the state znode's version, so a
leader's ISR change and a controller decision never overwrite each other; the loser reads
again and decides again.

**Work.** Everything the controller does runs on one queue, one event at a time, as in
Kafka's ``ControllerEventManager``: becoming controller, brokers coming and going, topics
created, extended or deleted, a broker asking to shut down, and the periodic preferred
leader check. Brokers learn the results from the partition state znodes they watch; the
controller sends them nothing.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.controller import reassignment
from odradek.controller.election import (
    Election,
    controlled_shutdown_leader,
    offline_partition_leader,
    preferred_replica_leader,
)
from odradek.metadata import zk_layout as layout
from odradek.metadata.zk_client import (
    BadVersionError,
    Check,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    SetData,
    WatchedEvent,
    ZooKeeperUnavailable,
)
from odradek.metadata.store import PartitionStatesChanged
from odradek.metadata.zookeeper import (
    BrokersChanged,
    ControllerChanged,
    SessionChanged,
    TopicAssignmentChanged,
    ZooKeeperMetadataStore,
)

log = logging.getLogger(__name__)

# Operations per ZooKeeper multi: well within its 1 MB request limit for state znodes.
MULTI_BATCH = 500
# A conditional write that loses a race is decided again this many times, then left to the
# next event that touches the partition.
WRITE_ATTEMPTS = 5


class NotController(Exception):
    """This broker is not (or no longer) the controller."""


class ElectionType(enum.IntEnum):
    """ElectLeaders' election_type."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class _StateUpdate:
    """A decision about one partition: ``decide`` gets the current state (as read from
    ZooKeeper) and returns the new one, or None to leave it."""

    topic: str
    partition: int
    decide: Callable[[layout.LeaderAndIsr], layout.LeaderAndIsr | None]


class Controller:
    def __init__(self, store: ZooKeeperMetadataStore, node_id: int,
                 unclean_election_enabled: Callable[[str], bool],
                 leader_imbalance: Callable[[], tuple[bool, float, float]]) -> None:
        """``unclean_election_enabled(topic)`` reads the topic's effective config;
        ``leader_imbalance()`` is (auto.leader.rebalance.enable,
        leader.imbalance.per.broker.percentage, leader.imbalance.check.interval.seconds)."""
        self._store = store
        self._node_id = node_id
        self._unclean_enabled = unclean_election_enabled
        self._leader_imbalance = leader_imbalance
        self._queue: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue()
        self._worker: asyncio.Task | None = None
        self._rebalancer: asyncio.Task | None = None
        self.epoch = -1
        self._epoch_version = -1
        self._active = False
        self._live: frozenset[int] = frozenset()
        self._shutting_down: set[int] = set()
        self._stopped = False

    @property
    def is_active(self) -> bool:
        return self._active

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        self._store.subscribe(self._on_event)
        self._worker = asyncio.get_running_loop().create_task(self._work(),
                                                              name="controller-event-thread")
        self._enqueue(self._try_to_become_controller)

    async def stop(self) -> None:
        """Resigns (deleting ``/controller`` if this broker holds it) and stops."""
        self._stopped = True
        for task in (self._worker, self._rebalancer):
            if task is not None:
                task.cancel()
        if self._active:
            self._active = False
            try:
                await self._store.zk.delete(layout.CONTROLLER)
            except (NoNodeError, ZooKeeperUnavailable):
                pass

    def _enqueue(self, work: Callable[[], Awaitable[None]]) -> None:
        if not self._stopped:
            self._queue.put_nowait(work)

    async def _work(self) -> None:
        while True:
            work = await self._queue.get()
            try:
                await work()
            except NotController:
                self._resign()
            except ZooKeeperUnavailable as exc:
                log.warning("controller: ZooKeeper unavailable (%s)", exc)
            except Exception:
                log.exception("controller event failed")

    def _on_event(self, event: object) -> None:
        match event:
            case ControllerChanged(controller_id):
                if controller_id == -1:
                    self._enqueue(self._try_to_become_controller)
                elif controller_id != self._node_id and self._active:
                    self._resign()
            case SessionChanged(valid, expired):
                # A suspended session may come back with /controller still ours: only an
                # expired one has lost it (and its writes would fail meanwhile anyway).
                if expired:
                    self._resign()
                if valid:
                    self._enqueue(self._try_to_become_controller)
            case BrokersChanged(brokers):
                live = frozenset(b.node_id for b in brokers)
                self._enqueue(lambda: self._on_brokers_changed(live))
            case TopicAssignmentChanged(topic):
                self._enqueue(lambda: self._on_topic_assignment(topic))
            case PartitionStatesChanged(topic, _) if self._active and self._reassigning(
                    topic.name):
                # A new replica may have joined the ISR: its reassignment may complete.
                self._enqueue(lambda: self._complete_reassignments(topic.name))

    # -- becoming controller -----------------------------------------------------------

    async def _try_to_become_controller(self) -> None:
        if self._active or self._stopped:
            return
        zk = self._store.zk
        try:
            await zk.create(layout.CONTROLLER, layout.encode_controller(self._node_id),
                            ephemeral=True)
        except NodeExistsError:
            got = await zk.get_or_none(layout.CONTROLLER)
            if got is None or got[1].ephemeralOwner != zk.session_id:
                return  # another broker is controller; the watch tells us when it goes
            # Our own znode, from before this session was suspended: still controller, but
            # a new epoch all the same, since what happened meanwhile is unknown.
        self.epoch, self._epoch_version = await self._increment_epoch()
        self._active = True
        log.info("broker %d is the controller (epoch %d)", self._node_id, self.epoch)
        self._live = frozenset(b.node_id for b in self._store.brokers())
        await self._watch_admin_paths()
        await self._create_missing_states(self._store.topics_pending_states())
        await self._elect_offline_partitions()
        # Brokers that died before this controller was elected (the previous controller
        # among them) leave the ISRs now, as they would have then.
        dead = frozenset(replica for topic in self._store.topics().values()
                         for state in topic.partitions for replica in state.isr) - self._live
        if dead:
            await self._remove_from_isr(dead)
        await self._delete_requested_topics()
        await self._handle_controlled_shutdowns()
        for topic in [t for t in self._store.topics() if self._reassigning(t)]:
            await self._complete_reassignments(topic)  # reassignments a controller started
        self._rebalancer = asyncio.get_running_loop().create_task(
            self._check_preferred_leaders_periodically(), name="controller-leader-rebalance")

    async def _increment_epoch(self) -> tuple[int, int]:
        zk = self._store.zk
        while True:
            got = await zk.get_or_none(layout.CONTROLLER_EPOCH)
            if got is None:
                try:
                    await zk.create(layout.CONTROLLER_EPOCH, b"1")
                    stat = await zk.exists(layout.CONTROLLER_EPOCH)
                    return 1, stat.version
                except NodeExistsError:
                    continue
            data, stat = got
            epoch = int(data) + 1
            try:
                new_stat = await zk.set(layout.CONTROLLER_EPOCH, str(epoch).encode(),
                                        stat.version)
                return epoch, new_stat.version
            except BadVersionError:
                continue

    def _resign(self) -> None:
        if not self._active:
            return
        log.info("broker %d is no longer the controller (epoch %d)", self._node_id,
                 self.epoch)
        self._active = False
        if self._rebalancer is not None:
            self._rebalancer.cancel()
            self._rebalancer = None

    def _require_active(self) -> None:
        if not self._active:
            raise NotController()

    async def _watch_admin_paths(self) -> None:
        zk = self._store.zk
        await zk.children(layout.DELETE_TOPICS, self._on_delete_topics_watch)
        await zk.children(layout.CONTROLLED_SHUTDOWN, self._on_controlled_shutdown_watch)

    def _on_delete_topics_watch(self, event: WatchedEvent) -> None:
        self._enqueue(self._rewatch_and(layout.DELETE_TOPICS, self._on_delete_topics_watch,
                                        self._delete_requested_topics))

    def _on_controlled_shutdown_watch(self, event: WatchedEvent) -> None:
        self._enqueue(self._rewatch_and(layout.CONTROLLED_SHUTDOWN,
                                        self._on_controlled_shutdown_watch,
                                        self._handle_controlled_shutdowns))

    def _rewatch_and(self, path: str, watch: Callable[[WatchedEvent], None],
                     work: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        async def rewatch_and_work() -> None:
            await self._store.zk.children(path, watch)
            if self._active:
                await work()
        return rewatch_and_work

    # -- writing partition states ------------------------------------------------------

    async def _write(self, operations: list[tuple]) -> list:
        """One fenced multi: fails as a whole once another controller was elected."""
        self._require_active()
        try:
            return await self._store.zk.multi(
                [Check(layout.CONTROLLER_EPOCH, self._epoch_version), *operations])
        except BadVersionError as exc:
            if getattr(exc, "operation_index", None) == 0:
                raise NotController() from exc
            raise

    async def _update_states(self, updates: Iterable[_StateUpdate]) -> None:
        """Applies decisions in batches; a batch that loses a race on some partition's
        state is applied again partition by partition, each decided again on a fresh read."""
        pending = []
        for update in updates:
            current = self._store.leader_and_isr(update.topic, update.partition)
            if current is None:
                continue
            state, version = current
            new = update.decide(state)
            if new is not None and new != state:
                pending.append((update, new, version))
        for start in range(0, len(pending), MULTI_BATCH):
            batch = pending[start:start + MULTI_BATCH]
            try:
                await self._write([SetData(
                    layout.partition_state_path(u.topic, u.partition),
                    layout.encode_leader_and_isr(new), version) for u, new, version in batch])
            except (BadVersionError, NoNodeError):
                for update, _, _ in batch:
                    await self._update_one(update)
                continue
            await self._refresh_states((u.topic, u.partition) for u, _, _ in batch)

    async def _update_one(self, update: _StateUpdate) -> None:
        path = layout.partition_state_path(update.topic, update.partition)
        for _ in range(WRITE_ATTEMPTS):
            got = await self._store.zk.get_or_none(path)
            if got is None:
                return
            state = layout.decode_leader_and_isr(got[0])
            new = update.decide(state)
            if new is None or new == state:
                return
            try:
                await self._write([SetData(path, layout.encode_leader_and_isr(new),
                                           got[1].version)])
                await self._refresh_states([(update.topic, update.partition)])
                return
            except BadVersionError:
                continue
            except NoNodeError:
                return
        log.warning("controller: gave up deciding %s-%d for now", update.topic,
                    update.partition)

    async def _refresh_states(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Reads the written states back into the cache at once, so the next decision
        starts from them rather than waiting for the watches."""
        await asyncio.gather(*(self._store.refresh_partition_state(topic, partition)
                               for topic, partition in partitions))

    def _new_leader(self, state: layout.LeaderAndIsr, election: Election | None
                    ) -> layout.LeaderAndIsr | None:
        """The state after ``election``: a new leader epoch when the leader changes (or
        the partition goes offline), the same one when only the ISR changes."""
        if election is None:
            if state.leader == layout.NO_LEADER:
                return None
            return layout.LeaderAndIsr(layout.NO_LEADER, state.leader_epoch + 1, state.isr,
                                       self.epoch)
        epoch = state.leader_epoch + (1 if election.leader != state.leader else 0)
        if election.unclean:
            log.warning("controller: unclean leader election, broker %d leads without being "
                        "in the ISR %s", election.leader, list(state.isr))
        return layout.LeaderAndIsr(election.leader, epoch, election.isr, self.epoch)

    def _without_in_isr(self, current: layout.LeaderAndIsr, leaving: Collection[int]
                        ) -> layout.LeaderAndIsr | None:
        """``current`` with ``leaving`` out of its ISR, same leader and leader epoch; None
        when none of them is in it, or when it would leave the ISR empty (the last member
        stays, so that it can lead again)."""
        isr = tuple(r for r in current.isr if r not in leaving)
        if isr == current.isr or not isr:
            return None
        return layout.LeaderAndIsr(current.leader, current.leader_epoch, isr, self.epoch)

    # -- new topics and partitions -----------------------------------------------------

    async def _on_topic_assignment(self, topic: str) -> None:
        if not self._active:
            return
        pending = self._store.topics_pending_states()
        if topic in pending:
            await self._create_missing_states({topic: pending[topic]})
        if self._reassigning(topic):
            await self._complete_reassignments(topic)

    async def _create_missing_states(self, pending: dict[str, layout.TopicAssignment]) -> None:
        """Initial leader and ISR of new partitions: the live replicas, the first of them
        leading. A partition with no live replica waits for one to come up."""
        self._require_active()
        zk = self._store.zk
        for topic, assignment in pending.items():
            existing = set(await _children_or_empty(zk, layout.partitions_path(topic)))
            operations: list[tuple] = []
            created = []
            if not await zk.exists(layout.partitions_path(topic)):
                operations.append(Create(layout.partitions_path(topic), b""))
            for partition, replicas in sorted(assignment.replicas.items()):
                live = tuple(r for r in replicas if r in self._live)
                if not live:
                    continue
                partition_path = f"{layout.partitions_path(topic)}/{partition}"
                if str(partition) in existing:
                    if await zk.exists(partition_path + "/state"):
                        continue
                else:
                    operations.append(Create(partition_path, b""))
                operations.append(Create(partition_path + "/state", layout.encode_leader_and_isr(
                    layout.LeaderAndIsr(live[0], 0, live, self.epoch))))
                created.append((topic, partition))
            for start in range(0, len(operations), MULTI_BATCH):
                try:
                    await self._write(operations[start:start + MULTI_BATCH])
                except (NodeExistsError, NoNodeError) as exc:
                    log.warning("controller: creating partitions of %s: %s", topic, exc)
                    break
            await self._refresh_states(created)

    # -- brokers coming and going ------------------------------------------------------

    async def _on_brokers_changed(self, live: frozenset[int]) -> None:
        if not self._active:
            self._live = live
            return
        gone, came = self._live - live, live - self._live
        self._live = live
        if gone:
            log.info("controller: brokers %s went away", sorted(gone))
            self._shutting_down -= gone
        if came:
            log.info("controller: brokers %s came up", sorted(came))
        await self._elect_offline_partitions()
        if gone:
            await self._remove_from_isr(gone)
        if came:
            await self._create_missing_states(self._store.topics_pending_states())
        await self._handle_controlled_shutdowns()

    async def _elect_offline_partitions(self) -> None:
        """Partitions whose leader is not alive get a leader from their ISR."""
        live = self._live
        updates = []
        for topic in list(self._store.topics().values()):
            unclean = self._unclean_enabled(topic.name)
            for state in topic.partitions:
                if state.leader in live:
                    continue

                def decide(current: layout.LeaderAndIsr, replicas=state.replicas,
                           unclean=unclean) -> layout.LeaderAndIsr | None:
                    if current.leader in self._live:
                        return None
                    return self._new_leader(current, offline_partition_leader(
                        replicas, current.isr, self._live, unclean_allowed=unclean))

                updates.append(_StateUpdate(topic.name, state.partition, decide))
        await self._update_states(updates)

    async def _remove_from_isr(self, brokers: frozenset[int]) -> None:
        """Dead followers leave the ISR (the leader keeps its epoch); a partition whose
        only ISR member died keeps it, so that it can lead again when it comes back."""
        updates = []
        for topic in list(self._store.topics().values()):
            for state in topic.partitions:
                if state.leader in self._live and set(state.isr) & brokers:
                    def decide(current: layout.LeaderAndIsr) -> layout.LeaderAndIsr | None:
                        if current.leader not in self._live:
                            return None
                        return self._without_in_isr(current, brokers)

                    updates.append(_StateUpdate(topic.name, state.partition, decide))
        await self._update_states(updates)

    # -- controlled shutdown -----------------------------------------------------------

    async def _handle_controlled_shutdowns(self) -> None:
        """A stopping broker created ``/odradek/controlled_shutdown/<id>``: its leaderships
        move to other ISR members and it leaves every ISR, then the znode is marked done
        (the broker waits for that before it stops)."""
        if not self._active:
            return
        zk = self._store.zk
        requests = {int(child) for child in await _children_or_empty(
            zk, layout.CONTROLLED_SHUTDOWN)}
        self._shutting_down = requests & self._live
        for node_id in sorted(self._shutting_down):
            path = layout.controlled_shutdown_path(node_id)
            got = await zk.get_or_none(path)
            if got is None or got[0] == b"done":
                continue
            await self._move_leaderships_away(node_id)
            try:
                await self._write([SetData(path, b"done", got[1].version)])
            except (BadVersionError, NoNodeError):
                pass

    async def _move_leaderships_away(self, node_id: int) -> None:
        stopping = self._shutting_down | {node_id}
        updates = []
        for topic in list(self._store.topics().values()):
            for state in topic.partitions:
                if node_id not in state.isr and state.leader != node_id:
                    continue

                def decide(current: layout.LeaderAndIsr, replicas=state.replicas
                           ) -> layout.LeaderAndIsr | None:
                    if current.leader == node_id:
                        election = controlled_shutdown_leader(replicas, current.isr,
                                                              self._live, stopping)
                        # The only ISR member stays leader until it stops.
                        return None if election is None else self._new_leader(current,
                                                                                election)
                    return self._without_in_isr(current, {node_id})

                updates.append(_StateUpdate(topic.name, state.partition, decide))
        await self._update_states(updates)

    # -- topic deletion ----------------------------------------------------------------

    async def _delete_requested_topics(self) -> None:
        if not self._active:
            return
        zk = self._store.zk
        for topic in await _children_or_empty(zk, layout.DELETE_TOPICS):
            await self._delete_topic(topic)

    async def _delete_topic(self, topic: str) -> None:
        """Removes the topic's znodes in one fenced multi per batch; every broker sees
        ``/brokers/topics/<topic>`` go and deletes its replicas' logs."""
        zk = self._store.zk
        operations: list[tuple] = []
        partitions = await _children_or_empty(zk, layout.partitions_path(topic))
        for partition in partitions:
            partition_path = f"{layout.partitions_path(topic)}/{partition}"
            if await zk.exists(partition_path + "/state"):
                operations.append(Delete(partition_path + "/state"))
            operations.append(Delete(partition_path))
        if await zk.exists(layout.partitions_path(topic)):
            operations.append(Delete(layout.partitions_path(topic)))
        # The states go first, in batches; the topic's own znodes go together, last.
        for start in range(0, max(0, len(operations) - MULTI_BATCH), MULTI_BATCH):
            await self._write(operations[start:start + MULTI_BATCH])
            operations = operations[MULTI_BATCH:]
        last = list(operations)
        if await zk.exists(layout.topic_path(topic)):
            last.append(Delete(layout.topic_path(topic)))
        if await zk.exists(layout.topic_config_path(topic)):
            last.append(Delete(layout.topic_config_path(topic)))
        last.append(Delete(layout.delete_topic_path(topic)))
        try:
            await self._write(last)
            log.info("controller: deleted topic %s", topic)
        except NoNodeError:
            # Someone deleted part of it meanwhile: take what is left, piece by piece.
            for operation in last:
                try:
                    await self._write([operation])
                except NoNodeError:
                    pass

    # -- preferred leaders -------------------------------------------------------------

    async def _check_preferred_leaders_periodically(self) -> None:
        while True:
            enabled, _, interval_s = self._leader_imbalance()
            await asyncio.sleep(interval_s)
            if enabled:
                self._enqueue(self._rebalance_leaders)

    async def _rebalance_leaders(self) -> None:
        """``auto.leader.rebalance.enable``: for each broker whose share of partitions led
        by someone else than their preferred (first) replica is above
        ``leader.imbalance.per.broker.percentage``, those partitions go back to it."""
        if not self._active:
            return
        _, percentage, _ = self._leader_imbalance()
        preferring: dict[int, list[tuple[str, int]]] = {}
        not_led: dict[int, list[tuple[str, int]]] = {}
        for topic in self._store.topics().values():
            for state in topic.partitions:
                if not state.replicas:
                    continue
                preferred = state.replicas[0]
                preferring.setdefault(preferred, []).append((topic.name, state.partition))
                if state.leader != preferred:
                    not_led.setdefault(preferred, []).append((topic.name, state.partition))
        chosen = []
        for broker, partitions in not_led.items():
            if broker not in self._live or broker in self._shutting_down:
                continue
            if len(partitions) * 100 / len(preferring[broker]) > percentage:
                chosen.extend(partitions)
        await self.elect_preferred_leaders(chosen)

    async def elect_preferred_leaders(self, partitions: Iterable[tuple[str, int]]) -> None:
        await self._update_states([self._preferred_election(topic, partition)
                                    for topic, partition in partitions
                                    if self._store.topic(topic) is not None])

    def _preferred_election(self, topic: str, partition: int) -> _StateUpdate:
        replicas = self._store.topic(topic).partitions[partition].replicas

        def decide(current: layout.LeaderAndIsr) -> layout.LeaderAndIsr | None:
            if replicas and current.leader == replicas[0]:
                return None
            election = preferred_replica_leader(replicas, current.isr, self._live)
            return None if election is None else self._new_leader(current, election)

        return _StateUpdate(topic, partition, decide)

    def _unclean_election(self, topic: str, partition: int) -> _StateUpdate:
        replicas = self._store.topic(topic).partitions[partition].replicas

        def decide(current: layout.LeaderAndIsr) -> layout.LeaderAndIsr | None:
            if current.leader in self._live:
                return None
            return self._new_leader(current, offline_partition_leader(
                replicas, current.isr, self._live, unclean_allowed=True))

        return _StateUpdate(topic, partition, decide)

    # -- ElectLeaders ------------------------------------------------------------------

    async def elect_leaders(self, partitions: list[tuple[str, int]],
                            election_type: ElectionType
                            ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders: elections on demand, run on the controller's queue like its own
        decisions. Raises ``NotController`` on a broker that is not the controller."""
        return await self._on_queue(lambda: self._elect_leaders(partitions, election_type))

    async def _on_queue(self, work: Callable[[], Awaitable[Any]]) -> Any:
        """Runs a client's request on the controller's queue, after what is already there,
        and returns its result. Raises ``NotController`` on a broker that is not the
        controller (or stops being it meanwhile)."""
        if not self._active:
            raise NotController()
        future: asyncio.Future = asyncio.get_running_loop().create_future()

        async def run() -> None:
            try:
                future.set_result(await work())
            except Exception as exc:
                future.set_exception(exc)
                raise

        self._enqueue(run)
        return await future

    async def _elect_leaders(self, partitions: list[tuple[str, int]],
                             election_type: ElectionType
                             ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        self._require_active()
        results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        updates = []
        for topic, partition in partitions:
            metadata = self._store.topic(topic)
            if metadata is None or not 0 <= partition < len(metadata.partitions):
                results[(topic, partition)] = (ErrorCode.unknown_topic_or_partition, None)
                continue
            state = metadata.partitions[partition]
            if election_type is ElectionType.PREFERRED:
                if state.leader == state.replicas[0]:
                    results[(topic, partition)] = (ErrorCode.election_not_needed, None)
                elif preferred_replica_leader(state.replicas, state.isr, self._live) is None:
                    results[(topic, partition)] = (
                        ErrorCode.preferred_leader_not_available,
                        f"Failed to elect leader for partition {topic}-{partition} under "
                        "strategy PreferredReplicaPartitionLeaderElectionStrategy")
                else:
                    updates.append(self._preferred_election(topic, partition))
            elif state.leader in self._live:
                results[(topic, partition)] = (ErrorCode.election_not_needed, None)
            elif offline_partition_leader(state.replicas, state.isr, self._live,
                                          unclean_allowed=True) is None:
                results[(topic, partition)] = (
                    ErrorCode.eligible_leaders_not_available,
                    f"Failed to elect leader for partition {topic}-{partition} under "
                    "strategy OfflinePartitionLeaderElectionStrategy")
            else:
                updates.append(self._unclean_election(topic, partition))
        await self._update_states(updates)
        for update in updates:
            state = self._store.topic(update.topic).partitions[update.partition]
            elected = (state.leader == state.replicas[0]
                       if election_type is ElectionType.PREFERRED else state.leader in self._live)
            results[(update.topic, update.partition)] = (
                (ErrorCode.none, None) if elected else
                (ErrorCode.preferred_leader_not_available
                 if election_type is ElectionType.PREFERRED
                 else ErrorCode.eligible_leaders_not_available,
                 "the partition's state changed during the election"))
        return results

    # -- reassignment ------------------------------------------------------------------

    async def alter_reassignments(self, targets: dict[tuple[str, int], tuple[int, ...] | None]
                                  ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments: starts (or, for a None target, cancels) each
        partition's reassignment; they complete as their new replicas catch up."""
        return await self._on_queue(lambda: self._alter_reassignments(targets))

    def list_reassignments(self, topics: Iterable[str] | None
                           ) -> dict[str, dict[int, tuple[tuple[int, ...], tuple[int, ...],
                                                      tuple[int, ...]]]]:
        """ListPartitionReassignments: per topic and partition, (replicas, adding,
        removing) of the reassignments in progress."""
        if not self._active:
            raise NotController()
        names = self._store.topics().keys() if topics is None else topics
        ongoing = {}
        for name in names:
            assignment = self._store.assignment(name)
            if assignment is None:
                continue
            partitions = {p: (assignment.replicas[p], assignment.adding.get(p, ()),
                              assignment.removing.get(p, ()))
                          for p in sorted(assignment.replicas)
                          if reassignment.is_reassigning(assignment, p)}
            if partitions:
                ongoing[name] = partitions
        return ongoing

    async def _alter_reassignments(self, targets: dict[tuple[str, int], tuple[int, ...] | None]
                                   ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        self._require_active()
        results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        by_topic: dict[str, dict[int, tuple[int, ...] | None]] = {}
        for (topic, partition), target in targets.items():
            by_topic.setdefault(topic, {})[partition] = target
        for topic, wanted in by_topic.items():
            got = await self._store.zk.get_or_none(layout.topic_path(topic))
            if got is None:
                for partition in wanted:
                    results[(topic, partition)] = (ErrorCode.unknown_topic_or_partition, None)
                continue
            before = changed = layout.decode_assignment(got[0])
            for partition, target in wanted.items():
                try:
                    changed = reassignment.start(changed, partition, target, self._live)
                    results[(topic, partition)] = (ErrorCode.none, None)
                except reassignment.ReassignmentError as exc:
                    results[(topic, partition)] = (exc.error_code, exc.message)
            if changed != before:
                try:
                    await self._write([SetData(layout.topic_path(topic),
                                               layout.encode_assignment(changed),
                                               got[1].version)])
                except (BadVersionError, NoNodeError):
                    for partition in wanted:  # the topic changed meanwhile: ask again
                        results[(topic, partition)] = (
                            ErrorCode.request_timed_out,
                            "the topic's assignment changed meanwhile; try again")
                    continue
                log.info("controller: reassigning %s: %s", topic, {
                    p: list(changed.replicas[p]) for p in wanted if p in changed.replicas})
                await self._store.refresh_topic(topic)
            await self._complete_reassignments(topic)
        return results

    async def _complete_reassignments(self, topic: str) -> None:
        """Completes each reassignment of ``topic`` whose target replicas are all in the
        ISR: the partition's state and the topic's assignment in one fenced multi."""
        if not self._active:
            return
        zk = self._store.zk
        got = await zk.get_or_none(layout.topic_path(topic))
        if got is None:
            return
        assignment, version = layout.decode_assignment(got[0]), got[1].version
        for partition in sorted(assignment.replicas):
            if not reassignment.is_reassigning(assignment, partition):
                continue
            state_path = layout.partition_state_path(topic, partition)
            current = await zk.get_or_none(state_path)
            if current is None:
                continue
            done = reassignment.complete(assignment, partition,
                                         layout.decode_leader_and_isr(current[0]),
                                         self._live, self.epoch)
            if done is None:
                continue
            operations = [] if done.state is None else [
                SetData(state_path, layout.encode_leader_and_isr(done.state),
                        current[1].version)]
            operations.append(SetData(layout.topic_path(topic),
                                      layout.encode_assignment(done.assignment), version))
            try:
                await self._write(operations)
            except (BadVersionError, NoNodeError):
                return  # something moved meanwhile: the event it caused tries again
            log.info("controller: reassignment of %s-%d done: replicas %s", topic, partition,
                     list(done.assignment.replicas[partition]))
            assignment, version = done.assignment, version + 1
        await self._store.refresh_topic(topic)

    def _reassigning(self, topic: str) -> bool:
        assignment = self._store.assignment(topic)
        return assignment is not None and any(
            reassignment.is_reassigning(assignment, p) for p in assignment.replicas)


async def _children_or_empty(zk, path: str) -> list[str]:
    try:
        return await zk.children(path)
    except NoNodeError:
        return []
