"""Partition reassignment (KIP-455), as the controller carries it out.

A reassignment moves a partition from its replicas ``RS`` to a target ``TRS`` while
producers and consumers keep running, in Kafka's steps:

1. **Start.** The topic's assignment (``/brokers/topics/<topic>``) names every replica of
   both sets, the target first (``TRS + (RS - TRS)``), with ``adding_replicas = TRS - RS``
   and ``removing_replicas = RS - TRS``. Every broker sees the new replica set in the
   partition's state: the adding ones create the partition and follow the leader, who counts
   them as followers and adds them to the ISR once they have caught up.
2. **Complete**, once every target replica is in the ISR: if the leader is not in the
   target (or is dead), a target replica in the ISR becomes leader (new leader epoch); the
   removed replicas leave the ISR; the assignment becomes the target alone. The partition
   state and the assignment are written in one fenced multi, so no broker ever sees one
   without the other. The brokers that lost their replica delete it.

Cancelling (a null target) is a reassignment back to the original replicas, ``RS`` as it was
before the reassignment started: the adding replicas are removed again.

This module decides; the controller runs it on its queue and writes what it returns.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from odradek.controller.election import reassignment_leader
from odradek.metadata import zk_layout as layout


@dataclass(frozen=True, slots=True)
class ReassignmentError(Exception):
    error_code: ErrorCode
    message: str


def original_replicas(assignment: layout.TopicAssignment, partition: int) -> tuple[int, ...]:
    """The replicas before any ongoing reassignment of ``partition`` started."""
    adding = assignment.adding.get(partition, ())
    return tuple(r for r in assignment.replicas[partition] if r not in adding)


def target_replicas(assignment: layout.TopicAssignment, partition: int) -> tuple[int, ...]:
    """Where ``partition`` is going (where it is, with no reassignment ongoing)."""
    removing = assignment.removing.get(partition, ())
    return tuple(r for r in assignment.replicas[partition] if r not in removing)


def is_reassigning(assignment: layout.TopicAssignment, partition: int) -> bool:
    return bool(assignment.adding.get(partition) or assignment.removing.get(partition))


def start(assignment: layout.TopicAssignment, partition: int,
          target: Sequence[int] | None, live: Collection[int]) -> layout.TopicAssignment:
    """The assignment with ``partition`` reassigned to ``target`` (None: cancelled).
    Raises ``ReassignmentError`` with the code Kafka answers."""
    if partition not in assignment.replicas:
        raise ReassignmentError(ErrorCode.unknown_topic_or_partition,
                                f"Unknown partition {partition}")
    original = original_replicas(assignment, partition)
    if target is None:
        if not is_reassigning(assignment, partition):
            raise ReassignmentError(ErrorCode.no_reassignment_in_progress,
                                    "There is no ongoing reassignment to cancel")
        target = original
    target = tuple(target)
    if not target:
        raise ReassignmentError(ErrorCode.invalid_replica_assignment,
                                "The target replica set is empty")
    if len(set(target)) != len(target):
        raise ReassignmentError(ErrorCode.invalid_replica_assignment,
                                f"Duplicate replicas in {list(target)}")
    dead = sorted(set(target) - set(live) - set(original))
    if dead:
        raise ReassignmentError(ErrorCode.invalid_replica_assignment,
                                f"Replica assignment has brokers that are not alive: {dead}")
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    replicas = dict(assignment.replicas)
    replicas[partition] = target + tuple(r for r in original if r not in target)
    return layout.TopicAssignment(
        assignment.topic_id, replicas,
        _with(assignment.adding, partition, adding),
        _with(assignment.removing, partition, removing))


def _with(mapping: dict[int, tuple[int, ...]], partition: int, replicas: tuple[int, ...]
          ) -> dict[int, tuple[int, ...]]:
    updated = dict(mapping)
    if replicas:
        updated[partition] = replicas
    else:
        updated.pop(partition, None)
    return updated


@dataclass(frozen=True, slots=True)
class Completion:
    """What completing one partition's reassignment writes: its new state (None: unchanged)
    and the assignment with the partition at its target alone."""

    state: layout.LeaderAndIsr | None
    assignment: layout.TopicAssignment


def complete(assignment: layout.TopicAssignment, partition: int, state: layout.LeaderAndIsr,
             live: Collection[int], controller_epoch: int) -> Completion | None:
    """The completion of ``partition``'s reassignment, once every target replica is in
    the ISR and one of them can lead; None while it must wait."""
    if not is_reassigning(assignment, partition):
        return None
    target = target_replicas(assignment, partition)
    if any(r not in state.isr for r in target):
        return None
    isr = tuple(r for r in state.isr if r in target)
    new_state: layout.LeaderAndIsr | None = None
    if state.leader not in target or state.leader not in live:
        election = reassignment_leader(target, isr, live)
        if election is None:
            return None
        new_state = layout.LeaderAndIsr(election.leader, state.leader_epoch + 1, isr,
                                        controller_epoch)
    elif isr != state.isr:
        new_state = layout.LeaderAndIsr(state.leader, state.leader_epoch, isr,
                                        controller_epoch)
    replicas = dict(assignment.replicas)
    replicas[partition] = target
    return Completion(new_state, layout.TopicAssignment(
        assignment.topic_id, replicas, _with(assignment.adding, partition, ()),
        _with(assignment.removing, partition, ())))
