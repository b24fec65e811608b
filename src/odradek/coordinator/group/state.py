"""The states of a classic consumer group and the one table of their transitions.

Rules of this file (in the manner of h11's ``_state.py``):

1. A group's state changes only through :meth:`Group.transition`, which looks the event up
   in :data:`GROUP_TRANSITIONS`. An event missing from the current state's row is a
   coordinator bug and raises :class:`IllegalGroupTransition`; it is never ignored.
2. The table says which state follows an event, nothing else. What happens alongside a
   transition (answering waiting members, timers, records written to ``__consumer_offsets``)
   is the coordinator's business, in ``coordinator.py``.
3. What a state allows is read from the table where it can be: a rebalance can start in the
   states whose row has ``REBALANCE_TRIGGERED`` (Kafka's ``canRebalance``).

The states are Kafka's (``GroupState`` in the classic ``GroupMetadata.scala``), spelt as
Kafka spells them on the wire (DescribeGroups, ListGroups):

* ``Empty``: no members; committed offsets may remain, and expire after
  ``offsets.retention.minutes`` (a group used only to commit offsets stays here).
* ``PreparingRebalance``: waiting for every member to (re)join, until the rebalance timeout.
* ``CompletingRebalance``: joined; waiting for the leader's assignment in its SyncGroup.
* ``Stable``: assignment handed out; members heartbeat.
* ``Dead``: deleted, expired or no longer coordinated here; answered as unknown.

Events are past-tense: they say what happened, and each means exactly one thing.
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    # A consumer-protocol group (``consumer_group.py``) derives its state from its epochs
    # instead of following this table: Empty, Assigning (a new target assignment is due),
    # Reconciling (members are moving to it), Stable, Dead.
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"

    def __str__(self) -> str:
        return self.value


class GroupEvent(enum.Enum):
    # A member joined, left, expired or changed its protocols; or the leader rejoined.
    REBALANCE_TRIGGERED = enum.auto()
    # The join phase ended with members: a new generation, its leader gets the members.
    MEMBERS_JOINED = enum.auto()
    # The join phase ended with no member left: a new generation with nobody in it.
    ALL_MEMBERS_LEFT = enum.auto()
    # The leader's assignment was written to __consumer_offsets and handed out.
    ASSIGNMENT_STORED = enum.auto()
    # DeleteGroups, expiration of the last offsets, or the partition left this coordinator.
    GROUP_REMOVED = enum.auto()


_S = GroupState
_E = GroupEvent

GROUP_TRANSITIONS: dict[GroupState, dict[GroupEvent, GroupState]] = {
    _S.EMPTY: {
        _E.REBALANCE_TRIGGERED: _S.PREPARING_REBALANCE,
        _E.GROUP_REMOVED: _S.DEAD,
    },
    _S.PREPARING_REBALANCE: {
        _E.MEMBERS_JOINED: _S.COMPLETING_REBALANCE,
        _E.ALL_MEMBERS_LEFT: _S.EMPTY,
        _E.GROUP_REMOVED: _S.DEAD,
    },
    _S.COMPLETING_REBALANCE: {
        _E.REBALANCE_TRIGGERED: _S.PREPARING_REBALANCE,
        _E.ASSIGNMENT_STORED: _S.STABLE,
        _E.GROUP_REMOVED: _S.DEAD,
    },
    _S.STABLE: {
        _E.REBALANCE_TRIGGERED: _S.PREPARING_REBALANCE,
        _E.GROUP_REMOVED: _S.DEAD,
    },
    _S.DEAD: {
        _E.GROUP_REMOVED: _S.DEAD,
    },
}


class IllegalGroupTransition(RuntimeError):
    """An event the current state's row does not have (rule 1): a coordinator bug."""


def next_state(state: GroupState, event: GroupEvent) -> GroupState:
    try:
        return GROUP_TRANSITIONS[state][event]
    except KeyError:
        raise IllegalGroupTransition(f"{event.name} in state {state}") from None


def can_rebalance(state: GroupState) -> bool:
    """Rule 3: Kafka's ``canRebalance``."""
    return GroupEvent.REBALANCE_TRIGGERED in GROUP_TRANSITIONS.get(state, {})
