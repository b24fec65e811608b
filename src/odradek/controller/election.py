"""Leader elections, as pure functions of a partition's state (Kafka's
``PartitionLeaderElectionAlgorithms``).

Each returns the partition's next leader and ISR, or None when the election cannot pick a
leader (the partition stays as it is, or goes offline — the caller decides). A new leader
always gets a new leader epoch; that is the caller's job too, since only it knows whether
the leader changed.

* **Offline** (the leader died): the first replica, in assignment order, that is alive and
  in the ISR. With unclean leader election allowed and no such replica, the first live
  replica, which then forms the ISR alone: records the old ISR had and it lacks are lost,
  which is what ``unclean.leader.election.enable`` trades for availability.
* **Preferred** (rebalancing leadership back): the first replica of the assignment, if it
  is alive and in the ISR.
* **Controlled shutdown** (a broker is stopping): the first replica that is alive, in the
  ISR and not stopping; the stopping broker leaves the ISR.
* **Reassignment**: the first replica of the target assignment that is alive and in the ISR.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Election:
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def offline_partition_leader(replicas: Sequence[int], isr: Sequence[int],
                             live: Collection[int], *, unclean_allowed: bool
                             ) -> Election | None:
    for replica in replicas:
        if replica in live and replica in isr:
            return Election(replica, tuple(r for r in isr if r in live))
    if unclean_allowed:
        for replica in replicas:
            if replica in live:
                return Election(replica, (replica,), unclean=True)
    return None


def preferred_replica_leader(replicas: Sequence[int], isr: Sequence[int],
                             live: Collection[int]) -> Election | None:
    preferred = replicas[0] if replicas else None
    if preferred is not None and preferred in live and preferred in isr:
        return Election(preferred, tuple(isr))
    return None


def controlled_shutdown_leader(replicas: Sequence[int], isr: Sequence[int],
                               live: Collection[int], shutting_down: Collection[int]
                               ) -> Election | None:
    remaining_isr = tuple(r for r in isr if r not in shutting_down)
    for replica in replicas:
        if replica in live and replica in remaining_isr:
            return Election(replica, remaining_isr)
    return None


def reassignment_leader(target: Sequence[int], isr: Sequence[int], live: Collection[int]
                        ) -> Election | None:
    for replica in target:
        if replica in live and replica in isr:
            return Election(replica, tuple(isr))
    return None
