"""The group coordinator, classic protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), and
committed offsets kept in ``__consumer_offsets``.

Modules, from the bottom: ``state`` (the state table), ``offsets_topic`` (record formats and
the group's partition), ``group`` (a group and its members), ``metadata_manager`` (groups in
memory and in the topic), ``timers``, ``membership`` (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup and rebalances), ``coordinator`` (the entry point: status checks, offsets,
admin), and ``storage`` (the topic through the replica manager, the one module that
reaches the log).
"""

from odradek.coordinator.group.coordinator import GROUP_TICK_MS, GroupCoordinator
from odradek.coordinator.group.metadata_manager import GroupMetadataManager
from odradek.coordinator.group.storage import ReplicaTopicStore

__all__ = ["GROUP_TICK_MS", "GroupCoordinator", "GroupMetadataManager", "ReplicaTopicStore",
           "group_coordinator_over"]


def group_coordinator_over(replica_manager, topic, config, clock) -> GroupCoordinator:
    """The broker's coordinator: groups kept in ``__consumer_offsets`` through the replica
    manager; ``topic`` looks a topic up in the metadata store, ``config`` reads a broker
    config by name."""
    store = ReplicaTopicStore(replica_manager, topic,
                              lambda: config("offsets.commit.timeout.ms"))
    return GroupCoordinator(GroupMetadataManager(store, config, clock), config, clock)
