"""How a consumer-protocol member moves to its part of the target assignment, one heartbeat
at a time (Kafka's ``CurrentAssignmentBuilder``), as one pure function.

Given what the member has now, the target and what it says it owns::

    kept      = current ∩ target
    to revoke = current − target
    to gain   = target − current, less partitions another member still holds

* something to revoke that the member still owns: UNREVOKED_PARTITIONS — it keeps ``kept``,
  is told to revoke the rest, and its epoch does not move until it has (a member that owns
  a partition with its new epoch while another has it at the old one would break "one owner
  at a time");
* otherwise it takes the target's epoch and ``kept ∪ to gain``: STABLE when nothing was held
  back, UNRELEASED_PARTITIONS when a partition is still with a member that has not revoked
  it (a later heartbeat hands it over once it is released).

A member in UNREVOKED_PARTITIONS moves on once its heartbeat no longer lists the revoked
partitions; if it never does, its rebalance timeout fences it (the protocol's business).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from odradek.coordinator.group.consumer_group import ConsumerGroupMember, MemberState
from odradek.coordinator.group.consumer_records import Partitions


class FencedMemberEpoch(Exception):
    """The member's state is unknown here: it must give up its partitions and rejoin."""


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Partitions,
              partition_epoch: Callable[[uuid.UUID, int], int],
              owned: Partitions | None) -> ConsumerGroupMember:
    """The member after this heartbeat. ``partition_epoch`` gives the epoch of whoever holds
    a partition (-1 when free); ``owned`` is what the member's heartbeat says it owns, None
    when the heartbeat left it out (unchanged)."""
    match member.state:
        case MemberState.STABLE:
            if member.member_epoch == target_epoch:
                return member
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch,
                         owned)
        case MemberState.UNREVOKED_PARTITIONS:
            if _owns_any(owned, member.pending_revocation):
                return member
            return _next(member, member.member_epoch + 1, target_epoch, target,
                         partition_epoch, owned)
        case MemberState.UNRELEASED_PARTITIONS:
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch,
                         owned)
        case _:
            if owned is None or any(owned.values()):
                raise FencedMemberEpoch("the member is in an unknown state; it must give up "
                                        "its partitions and rejoin")
            return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    """Whether the member still owns one of ``partitions``; a heartbeat without the owned
    partitions counts as owning them all (it has not said otherwise)."""
    if owned is None:
        return True
    return any(owned.get(topic_id, frozenset()) & parts
               for topic_id, parts in partitions.items())


def _next(member: ConsumerGroupMember, epoch_if_revoking: int, target_epoch: int,
          target: Partitions, partition_epoch: Callable[[uuid.UUID, int], int],
          owned: Partitions | None) -> ConsumerGroupMember:
    kept: Partitions = {}
    to_revoke: Partitions = {}
    to_gain: Partitions = {}
    unreleased = False
    for topic_id in target.keys() | member.assigned.keys():
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        if current & wanted:
            kept[topic_id] = current & wanted
        if current - wanted:
            to_revoke[topic_id] = current - wanted
        free = frozenset(p for p in wanted - current if partition_epoch(topic_id, p) == -1)
        unreleased |= len(free) < len(wanted - current)
        if free:
            to_gain[topic_id] = free
    if to_revoke and _owns_any(owned, to_revoke):
        return _with(member, MemberState.UNREVOKED_PARTITIONS, epoch_if_revoking, kept,
                     to_revoke)
    assigned = {topic_id: kept.get(topic_id, frozenset()) | to_gain.get(topic_id, frozenset())
                for topic_id in kept.keys() | to_gain.keys()}
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with(member, state, target_epoch, assigned, {})


def _with(member: ConsumerGroupMember, state: MemberState, epoch: int, assigned: Partitions,
          pending_revocation: Partitions) -> ConsumerGroupMember:
    """Kafka's ``updateMemberEpoch``: the previous epoch is the one the member had."""
    return dataclasses.replace(
        member, state=state, member_epoch=epoch, previous_member_epoch=member.member_epoch,
        assigned=assigned, pending_revocation=pending_revocation)
