"""The ZooKeeper metadata store and the controller, against a real ZooKeeper.

Three brokers' metadata layers (each a ``ZooKeeperMetadataStore`` with its own session and a
``Controller``) run on one event loop, without logs or listeners: what one writes, the
others must see, and the controller must decide what Kafka's would — initial leaders,
failover when a broker's session ends, a new controller when the controller's does,
controlled shutdown, deletion — with every write fenced.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest

from kio.schema.errors import ErrorCode

from odradek.controller.controller import Controller, ElectionType, NotController
from odradek.metadata import zk_layout as layout
from odradek.metadata.model import BrokerInfo, Endpoint
from odradek.metadata.store import (
    AclsChanged,
    PartitionsAdded,
    PartitionStatesChanged,
    TopicCreated,
    TopicDeleted,
    entity_path,
    group_entity,
)
from odradek.metadata.zk_client import BadVersionError, SetData, ZooKeeperUnavailable
from odradek.metadata.zookeeper import ZooKeeperMetadataStore
from odradek.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

SESSION_TIMEOUT_MS = 4000
# A JVM just started can take seconds over its first connections on a loaded machine.
CONNECTION_TIMEOUT_MS = 20_000
WAIT_S = 15  # every wait for the cluster to converge ends by then


class Node:
    """One broker's metadata layer: its store, its controller, the events it saw."""

    def __init__(self, node_id: int, connect: str, *, unclean: bool = False) -> None:
        self.node_id = node_id
        self.store = ZooKeeperMetadataStore(
            connect, BrokerInfo(node_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + node_id),)),
            {"PLAINTEXT": "PLAINTEXT"}, session_timeout_ms=SESSION_TIMEOUT_MS,
            connection_timeout_ms=CONNECTION_TIMEOUT_MS)
        self.controller = Controller(self.store, node_id,
                                     unclean_election_enabled=lambda topic: unclean,
                                     leader_imbalance=lambda: (False, 10, 300))
        self.events: list[object] = []
        self.store.subscribe(self.events.append)

    async def start(self) -> Node:
        await self.store.start()
        await self.controller.start()
        return self

    async def stop(self) -> None:
        await self.controller.stop()
        self.store.close()


async def eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {WAIT_S} s: {what}")
        await asyncio.sleep(0.05)


def run(scenario: Callable[[str], Awaitable[None]], connect: str) -> None:
    asyncio.run(asyncio.wait_for(scenario(connect), 90))


async def three_nodes(connect: str, **kwargs) -> list[Node]:
    nodes = [await Node(i, connect, **kwargs).start() for i in (1, 2, 3)]
    await eventually(lambda: all(len(n.store.brokers()) == 3 for n in nodes)
                     and len({n.store.controller_id for n in nodes}) == 1
                     and nodes[0].store.controller_id in (1, 2, 3), "three brokers, one controller")
    return nodes


def controller_of(nodes: list[Node]) -> Node:
    return next(n for n in nodes if n.controller.is_active)


def states(node: Node, topic: str) -> dict[int, tuple[int, int, tuple[int, ...]]]:
    metadata = node.store.topic(topic)
    return {} if metadata is None else {
        s.partition: (s.leader, s.leader_epoch, s.isr) for s in metadata.partitions}


def test_one_controller_and_a_topic_every_broker_sees(zookeeper_server):
    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect)
        try:
            assert sum(n.controller.is_active for n in nodes) == 1
            assert controller_of(nodes).controller.epoch == 1
            created = await nodes[1].store.create_topic("orders", 6, 3, {"retention.ms": "1000"})
            assert len(created.partitions) == 6
            await eventually(lambda: all(len(states(n, "orders")) == 6 for n in nodes),
                             "every broker sees the six partitions")
            view = states(nodes[0], "orders")
            assert all(states(n, "orders") == view for n in nodes)
            leaders = [leader for leader, _, _ in view.values()]
            assert sorted(leaders) == [1, 1, 2, 2, 3, 3]  # spread evenly
            for state in nodes[2].store.topic("orders").partitions:
                assert state.leader == state.replicas[0] and state.leader_epoch == 0
                assert sorted(state.isr) == [1, 2, 3]
            assert nodes[2].store.topic("orders").configs == {"retention.ms": "1000"}
            assert any(isinstance(e, TopicCreated) and e.topic.name == "orders"
                       for e in nodes[0].events)
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)


def test_a_dead_broker_loses_its_leaderships_and_its_isr_places(zookeeper_server):
    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect)
        try:
            await nodes[0].store.create_topic("t", 6, 3, {})
            await eventually(lambda: len(states(nodes[0], "t")) == 6, "topic visible")
            victim = next(n for n in nodes if not n.controller.is_active)
            before = states(nodes[0], "t")
            await victim.stop()  # its session closes: /brokers/ids/<id> goes at once
            survivors = [n for n in nodes if n is not victim]

            def failed_over(node: Node) -> bool:
                return all(leader != victim.node_id and victim.node_id not in isr
                           for leader, _, isr in states(node, "t").values())

            await eventually(lambda: all(failed_over(n) for n in survivors), "failover")
            after = states(survivors[0], "t")
            for partition, (leader, epoch, isr) in before.items():
                new_leader, new_epoch, new_isr = after[partition]
                # A new leader means a new leader epoch; a follower's loss keeps it.
                assert new_epoch == epoch + (1 if leader == victim.node_id else 0)
                assert new_leader in isr and set(new_isr) == set(isr) - {victim.node_id}
            assert states(survivors[1], "t") == after
            assert any(isinstance(e, PartitionStatesChanged) for e in survivors[0].events)
            nodes.remove(victim)
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)


def test_a_new_controller_is_elected_when_the_controller_goes(zookeeper_server):
    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect)
        try:
            old = controller_of(nodes)
            old_epoch = old.controller.epoch
            await old.stop()
            nodes.remove(old)
            await eventually(lambda: sum(n.controller.is_active for n in nodes) == 1,
                             "a new controller")
            new = controller_of(nodes)
            assert new.controller.epoch == old_epoch + 1
            await eventually(lambda: all(n.store.controller_id == new.node_id for n in nodes),
                             "every broker knows the new controller")
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)


def test_a_deposed_controllers_writes_are_fenced(zookeeper_server):
    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect)
        try:
            await nodes[0].store.create_topic("t", 1, 3, {})
            await eventually(lambda: len(states(nodes[0], "t")) == 1, "topic visible")
            active = controller_of(nodes).controller
            # Another controller was elected meanwhile: it incremented the epoch.
            zk = nodes[0].store.zk
            data, stat = await zk.get(layout.CONTROLLER_EPOCH)
            await zk.set(layout.CONTROLLER_EPOCH, str(int(data) + 1).encode(), stat.version)
            path = layout.partition_state_path("t", 0)
            before, state_stat = await zk.get(path)
            with pytest.raises(NotController):
                await active._write([SetData(path, b"{}", state_stat.version)])
            assert (await zk.get(path))[0] == before
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)


def test_an_isr_change_is_written_only_against_the_state_it_saw(zookeeper_server):
    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect)
        try:
            await nodes[0].store.create_topic("t", 1, 3, {})
            await eventually(lambda: all(len(states(n, "t")) == 1 for n in nodes), "visible")
            state = nodes[0].store.topic("t").partitions[0]
            leader = next(n for n in nodes if n.node_id == state.leader)
            shrunk = tuple(r for r in state.isr if r == state.leader)
            written = await leader.store.alter_isr("t", 0, state, shrunk)
            assert written.isr == shrunk and written.partition_epoch == state.partition_epoch + 1
            with pytest.raises(BadVersionError):  # the same stale state again
                await leader.store.alter_isr("t", 0, state, state.isr)
            await eventually(lambda: all(states(n, "t")[0][2] == shrunk for n in nodes),
                             "every broker sees the new ISR")
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)


def test_controlled_shutdown_moves_leaderships_first(zookeeper_server):
    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect)
        try:
            await nodes[0].store.create_topic("t", 6, 3, {})
            await eventually(lambda: all(len(states(n, "t")) == 6 for n in nodes), "visible")
            stopping = nodes[1]
            assert any(leader == 2 for leader, _, _ in states(stopping, "t").values())
            assert await stopping.store.request_controlled_shutdown(WAIT_S * 1000)
            for leader, _, isr in states(stopping, "t").values():
                assert leader != 2 and 2 not in isr
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)


def test_deleting_and_extending_topics(zookeeper_server):
    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect)
        try:
            await nodes[0].store.create_topic("t", 2, 2, {})
            await nodes[0].store.create_topic("u", 1, 1, {})
            extended = await nodes[2].store.create_partitions("t", 5)
            assert len(extended.partitions) == 5
            await eventually(lambda: all(len(states(n, "t")) == 5 for n in nodes), "extended")
            assert any(isinstance(e, PartitionsAdded) and e.previous_count == 2
                       for e in nodes[0].events)
            await nodes[1].store.delete_topic("t")
            await eventually(lambda: all(n.store.topic("t") is None for n in nodes), "deleted")
            assert any(isinstance(e, TopicDeleted) and e.topic.name == "t"
                       for e in nodes[2].events)
            zk = nodes[0].store.zk
            assert await zk.exists(layout.topic_path("t")) is None
            assert await zk.exists(layout.topic_config_path("t")) is None
            assert await zk.exists(layout.delete_topic_path("t")) is None
            assert nodes[0].store.topic("u") is not None
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)


def test_producer_id_blocks_never_overlap(zookeeper_server):
    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect)
        try:
            blocks = await asyncio.gather(*(n.store.allocate_producer_ids(1000)
                                            for n in nodes for _ in range(3)))
            ids = [i for block in blocks for i in block]
            assert len(ids) == len(set(ids)) == 9000
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)


@pytest.mark.parametrize("unclean", [False, True], ids=["clean", "unclean"])
def test_an_unclean_election_only_when_allowed(zookeeper_server, unclean):
    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect, unclean=unclean)
        try:
            await nodes[0].store.create_topic("t", 1, 2, {})
            await eventually(lambda: all(len(states(n, "t")) == 1 for n in nodes), "visible")
            state = nodes[0].store.topic("t").partitions[0]
            leader = next(n for n in nodes if n.node_id == state.leader)
            follower = next(r for r in state.replicas if r != state.leader)
            await leader.store.alter_isr("t", 0, state, (state.leader,))  # follower lagged
            nodes.remove(leader)
            await leader.stop()
            if unclean:
                await eventually(lambda: states(nodes[0], "t")[0][0] == follower,
                                 "the out-of-sync follower leads")
                assert states(nodes[0], "t")[0][2] == (follower,)
            else:
                await eventually(lambda: states(nodes[0], "t")[0][0] == -1, "no leader")
                assert states(nodes[0], "t")[0][2] == (state.leader,)  # kept for its return
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)


def test_an_unreachable_zookeeper_is_a_clear_error():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        unused_tcp_port = probe.getsockname()[1]

    async def scenario() -> None:
        store = ZooKeeperMetadataStore(
            f"127.0.0.1:{unused_tcp_port}", BrokerInfo(1, (Endpoint("PLAINTEXT", "h", 1),)),
            {}, session_timeout_ms=1000, connection_timeout_ms=1000)
        with pytest.raises(ZooKeeperUnavailable, match=f"127.0.0.1:{unused_tcp_port}"):
            await store.start()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_preferred_leaders_come_back_on_demand(zookeeper_server):
    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect)
        try:
            await nodes[0].store.create_topic("t", 6, 3, {})
            await eventually(lambda: all(len(states(n, "t")) == 6 for n in nodes), "visible")
            preferred = {s.partition: s.replicas[0] for s in nodes[0].store.topic("t").partitions}
            # Broker 2 stops for a while: its leaderships move away...
            assert await nodes[1].store.request_controlled_shutdown(WAIT_S * 1000)
            await nodes[1].store.zk.delete(layout.controlled_shutdown_path(2))
            moved = [p for p, broker in preferred.items() if broker == 2]
            assert moved and all(states(nodes[0], "t")[p][0] != 2 for p in moved)
            # ... and comes back: it rejoins the ISRs, and an election brings them back.
            for partition in moved:
                state = nodes[0].store.topic("t").partitions[partition]
                leader = next(n for n in nodes if n.node_id == state.leader)
                await leader.store.alter_isr("t", partition, state, state.isr + (2,))
            await eventually(lambda: all(2 in states(n, "t")[p][2] for n in nodes for p in moved),
                             "every broker sees broker 2 back in the ISRs")
            active = controller_of(nodes).controller
            await eventually(lambda: 2 not in active._shutting_down, "the request is gone")
            wanted = [("t", p) for p in range(6)] + [("t", 9), ("missing", 0)]
            results = await active.elect_leaders(wanted, ElectionType.PREFERRED)
            for partition in range(6):
                assert results[("t", partition)][0] is (
                    ErrorCode.none if partition in moved else ErrorCode.election_not_needed)
            assert results[("t", 9)][0] is ErrorCode.unknown_topic_or_partition
            assert results[("missing", 0)][0] is ErrorCode.unknown_topic_or_partition
            await eventually(lambda: all(states(n, "t")[p][0] == preferred[p]
                                         for n in nodes for p in range(6)), "preferred leaders")
            other = next(n for n in nodes if not n.controller.is_active)
            with pytest.raises(NotController):
                await other.controller.elect_leaders([("t", 0)], ElectionType.PREFERRED)
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)


def test_a_reassignment_moves_a_partition_once_the_new_replicas_catch_up(zookeeper_server):
    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect)
        try:
            await nodes[0].store.create_topic("t", 1, 2, {}, assignment={0: (1, 2)})
            await eventually(lambda: all(len(states(n, "t")) == 1 for n in nodes), "visible")
            active = controller_of(nodes).controller
            results = await active.alter_reassignments({
                ("t", 0): (2, 3), ("t", 5): (1,), ("missing", 0): (1,)})
            assert results[("t", 0)] == (ErrorCode.none, None)
            assert results[("t", 5)][0] is ErrorCode.unknown_topic_or_partition
            assert results[("missing", 0)][0] is ErrorCode.unknown_topic_or_partition
            await eventually(lambda: all(n.store.topic("t").partitions[0].replicas == (2, 3, 1)
                                         for n in nodes), "every broker sees the new replicas")
            assert active.list_reassignments(None) == {"t": {0: ((2, 3, 1), (3,), (1,))}}
            # The leader (1) sees broker 3 catch up and adds it to the ISR.
            state = nodes[0].store.topic("t").partitions[0]
            assert state.leader == 1
            await nodes[0].store.alter_isr("t", 0, state, state.isr + (3,))
            await eventually(lambda: all(n.store.topic("t").partitions[0].replicas == (2, 3)
                                         for n in nodes), "the reassignment completed")
            done = nodes[2].store.topic("t").partitions[0]
            assert done.leader == 2 and done.leader_epoch == state.leader_epoch + 1
            assert sorted(done.isr) == [2, 3]
            assert active.list_reassignments(None) == {}
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)


def test_a_reassignment_can_be_cancelled_and_bad_ones_are_refused(zookeeper_server):
    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect)
        try:
            await nodes[0].store.create_topic("t", 2, 1, {}, assignment={0: (1,), 1: (2,)})
            await eventually(lambda: all(len(states(n, "t")) == 2 for n in nodes), "visible")
            active = controller_of(nodes).controller
            refused = await active.alter_reassignments({
                ("t", 0): (), ("t", 1): (3, 3)})
            assert refused[("t", 0)][0] is ErrorCode.invalid_replica_assignment
            assert refused[("t", 1)][0] is ErrorCode.invalid_replica_assignment
            assert (await active.alter_reassignments({("t", 0): (1, 9)}))[("t", 0)][0] \
                is ErrorCode.invalid_replica_assignment  # broker 9 is not alive
            assert (await active.alter_reassignments({("t", 0): None}))[("t", 0)][0] \
                is ErrorCode.no_reassignment_in_progress
            assert (await active.alter_reassignments({("t", 0): (3,)}))[("t", 0)][0] \
                is ErrorCode.none
            await eventually(lambda: "t" in active.list_reassignments(None), "in progress")
            assert (await active.alter_reassignments({("t", 0): None}))[("t", 0)][0] \
                is ErrorCode.none
            await eventually(lambda: all(n.store.topic("t").partitions[0].replicas == (1,)
                                         for n in nodes), "back where it was")
            assert active.list_reassignments(None) == {}
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)


def test_acls_and_entity_configs_written_by_one_broker_reach_every_other(zookeeper_server):
    pattern = ResourcePattern(ResourceType.TOPIC, "orders-", PatternType.PREFIXED)
    alice = AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    bob = AccessControlEntry("User:bob", "*", AclOperation.READ, AclPermissionType.DENY)

    async def scenario(connect: str) -> None:
        nodes = await three_nodes(connect)
        try:
            # two brokers change the same pattern at once: neither change is lost
            await asyncio.gather(nodes[0].store.alter_acls(pattern, add=frozenset({alice})),
                                 nodes[1].store.alter_acls(pattern, add=frozenset({bob})))
            await eventually(lambda: all(n.store.acls().get(pattern) == {alice, bob}
                                         for n in nodes), "both ACLs on every broker")
            assert AclsChanged(pattern, frozenset({alice, bob})) in nodes[2].events
            await nodes[2].store.alter_acls(pattern, remove=frozenset({alice, bob}))
            await eventually(lambda: all(pattern not in n.store.acls() for n in nodes),
                             "the pattern gone everywhere")
            entity = entity_path("alice", "app 1")  # Kafka's layout, names URL-encoded
            await nodes[0].store.set_entity_configs(entity, {"producer_byte_rate": "1024"})
            await eventually(lambda: all(n.store.entity_configs().get(entity) == {
                "producer_byte_rate": "1024"} for n in nodes), "the quota on every broker")
            assert entity == "users/alice/clients/app%201"
            assert await nodes[0].store.zk.exists("/config/users/alice/clients/app%201")
            group = group_entity("orders app")  # a group's configs, beside them
            await nodes[1].store.set_entity_configs(group, {"share.auto.offset.reset": "earliest"})
            await eventually(lambda: all(n.store.entity_configs().get(group) == {
                "share.auto.offset.reset": "earliest"} for n in nodes), "the group's configs")
            assert await nodes[0].store.zk.exists("/config/groups/orders%20app")
            assert await nodes[0].store.zk.exists("/kafka-acl-extended/prefixed/Topic") \
                is not None
        finally:
            for node in nodes:
                await node.stop()

    run(scenario, zookeeper_server.connect_string)
