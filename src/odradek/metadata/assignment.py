"""Placing a topic's replicas on brokers (Kafka's ``AdminUtils.assignReplicasToBrokers``).

Goals, in Kafka's order: replicas of a partition on distinct brokers; leaders (the first
replica of each partition) spread evenly over the brokers; the followers of a broker's
leaders spread over the other brokers rather than all on its neighbour; and with racks,
each partition's replicas on as many distinct racks as there are, so that losing a rack
loses no partition.

Without racks, partition ``p``'s first replica is broker ``(p + start) mod n``, and the
followers come after it at a distance that shifts by one every ``n`` partitions. With racks,
the brokers are first listed alternating between racks, and a follower is skipped when its
rack (or the broker) already holds a replica of the partition, until every rack holds one.
``start`` and the first shift are random, as in Kafka, so that many small topics do not
all lead on the same broker.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from odradek.metadata.model import BrokerInfo


class AssignmentError(ValueError):
    """The replicas cannot be placed (INVALID_REPLICATION_FACTOR)."""


def assign_replicas(brokers: Sequence[BrokerInfo], partitions: int, replication_factor: int,
                    *, first_partition: int = 0, start_index: int | None = None,
                    shift: int | None = None, rng: random.Random | None = None
                    ) -> dict[int, tuple[int, ...]]:
    """Replicas for partitions ``first_partition`` to ``first_partition + partitions - 1``."""
    if replication_factor <= 0:
        raise AssignmentError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(f"Replication factor: {replication_factor} larger than available "
                              f"brokers: {len(brokers)}.")
    rng = rng or random.Random()
    racks = {b.node_id: b.rack for b in brokers}
    if any(rack is None for rack in racks.values()) or len(set(racks.values())) <= 1:
        ids = sorted(racks)
        return _spread(ids, partitions, replication_factor, first_partition,
                       rng.randrange(len(ids)) if start_index is None else start_index,
                       rng.randrange(len(ids)) if shift is None else shift)
    ids = _alternate_racks(racks)
    return _spread_over_racks(ids, racks, partitions, replication_factor, first_partition,
                              rng.randrange(len(ids)) if start_index is None else start_index,
                              rng.randrange(len(ids)) if shift is None else shift)


def _follower_index(first: int, shift: int, replica: int, n: int) -> int:
    # The distance from the first replica is 1 + (shift + replica) mod (n - 1): never 0,
    # so never the first replica itself, and distinct for distinct replicas.
    return (first + 1 + (shift + replica) % (n - 1)) % n


def _spread(ids: list[int], partitions: int, replication_factor: int, first_partition: int,
            start_index: int, shift: int) -> dict[int, tuple[int, ...]]:
    n = len(ids)
    assignment = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        assignment[p] = (ids[first], *(ids[_follower_index(first, shift, r, n)]
                                        for r in range(replication_factor - 1)))
    return assignment


def _alternate_racks(racks: dict[int, str | None]) -> list[int]:
    """Brokers listed rack by rack in turn: rack1's first, rack2's first, ..., rack1's
    second, ... so consecutive brokers are on different racks."""
    by_rack: dict[str | None, list[int]] = {}
    for node_id in sorted(racks):
        by_rack.setdefault(racks[node_id], []).append(node_id)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    ordered = []
    while any(queues):
        for queue in queues:
            if queue:
                ordered.append(queue.pop(0))
    return ordered


def _spread_over_racks(ids: list[int], racks: dict[int, str | None], partitions: int,
                       replication_factor: int, first_partition: int, start_index: int,
                       shift: int) -> dict[int, tuple[int, ...]]:
    n = len(ids)
    rack_count = len(set(racks.values()))
    assignment = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        leader = ids[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        k = 0
        while len(replicas) < replication_factor:
            candidate = ids[_follower_index(first, shift, k, n)]
            k += 1
            if candidate in replicas:
                continue
            # Until every rack holds a replica, skip brokers on racks that already do.
            if racks[candidate] in racks_used and len(racks_used) < rack_count:
                continue
            replicas.append(candidate)
            racks_used.add(racks[candidate])
        assignment[p] = tuple(replicas)
    return assignment
