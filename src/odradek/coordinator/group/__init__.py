"""The group coordinator: the classic protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup),
the consumer protocol of KIP-848 (ConsumerGroupHeartbeat), and committed offsets, all kept in
``__consumer_offsets``.

Modules, from the bottom: ``state`` (the states), ``offsets_topic`` (record formats and
the group's partition), ``group`` (a classic group and its members), ``consumer_records``
and ``consumer_group`` (a consumer-protocol group, its records and their replay),
``assignors`` (the server-side assignors) and ``reconciliation`` (a member's next step
towards its target), ``metadata_manager`` (groups of both kinds in memory and in the topic),
``timers``, ``membership`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup and rebalances),
``consumer_protocol`` (ConsumerGroupHeartbeat and its timers), ``coordinator`` (the entry
point: status checks, offsets, admin), and ``storage`` (the topic through the replica
manager, the one module that reaches the log).
"""

from odradek.coordinator.group.coordinator import GROUP_TICK_MS, GroupCoordinator
from odradek.coordinator.group.metadata_manager import GroupMetadataManager
from odradek.coordinator.group.storage import ReplicaTopicStore

__all__ = ["GROUP_TICK_MS", "GroupCoordinator", "GroupMetadataManager", "ReplicaTopicStore",
           "group_coordinator_over"]


def group_coordinator_over(replica_manager, topic, config, clock, *, topics=dict,
                           racks=dict, group_config=None) -> GroupCoordinator:
    """The broker's coordinator: groups kept in ``__consumer_offsets`` through the replica
    manager; ``topic`` looks a topic up in the metadata store, ``topics`` lists them all by
    name, ``racks`` gives each broker's rack, ``config`` reads a broker config by name and
    ``group_config`` a group's own config."""
    store = ReplicaTopicStore(replica_manager, topic,
                              lambda: config("offsets.commit.timeout.ms"))
    return GroupCoordinator(GroupMetadataManager(store, config, clock), config, clock,
                            topics=topics, racks=racks, group_config=group_config)
