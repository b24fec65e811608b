"""The group coordinator's timers, advanced by :meth:`GroupTimers.tick` with the time it is.

Kafka keeps one delayed operation per timer in a purgatory; here each group carries its
deadlines and every tick looks at all of them (a few thousand groups are a few
milliseconds). The timers, and what ends them:

=====================  ==========================================  ===========================
timer                  deadline                                    when it passes
=====================  ==========================================  ===========================
member session         last heartbeat (or join, sync, commit)      the member is removed
                       + ``session.timeout.ms``; a new member:     (rebalance)
                       join + 5 minutes
pending member         MEMBER_ID_REQUIRED + ``session.timeout.ms`` its id lapses
join phase             prepare + rebalance timeout (the largest    members that did not
                       ``max.poll.interval.ms``); ends early when  rejoin are removed; next
                       every member has rejoined                   generation
initial join delay     prepare + ``group.initial.rebalance.delay   another delay if a member
                       .ms`` (a new group only; never early)       came, else next generation
pending sync           join complete + rebalance timeout           members that sent no
                                                                   SyncGroup leave (rebalance)
offset retention       every ``offsets.retention.check.interval``  see GroupMetadataManager
=====================  ==========================================  ===========================
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from odradek.coordinator.group.consumer_group import ConsumerGroup
from odradek.coordinator.group.group import Group, RebalanceTimer
from odradek.coordinator.group.state import GroupState

if TYPE_CHECKING:
    from odradek.coordinator.group.membership import GroupMembership

log = logging.getLogger(__name__)


class GroupTimers:
    def __init__(self, membership: GroupMembership, config: Callable[[str], Any]) -> None:
        self._membership = membership
        self._config = config
        self._next_retention_check_ms = 0

    def start_join_phase(self, group: Group, now_ms: int, *, initial: bool | None = None) -> None:
        """Arms the join phase of a rebalance; a group rebalancing from Empty first waits
        ``group.initial.rebalance.delay.ms`` so that members starting together join one
        generation instead of one each (Kafka's InitialDelayedJoin)."""
        if initial is None:
            initial = group.is_(GroupState.EMPTY)
        rebalance_timeout_ms = group.rebalance_timeout_ms()
        delay_ms = self._config("group.initial.rebalance.delay.ms")
        if initial and delay_ms > 0:
            group.new_member_added = False
            group.rebalance = RebalanceTimer(
                now_ms + delay_ms, initial_remaining_ms=max(rebalance_timeout_ms - delay_ms, 0))
        else:
            group.rebalance = RebalanceTimer(now_ms + rebalance_timeout_ms)

    def maybe_complete_join(self, group: Group, now_ms: int) -> None:
        """Ends the join phase as soon as every member has rejoined (Kafka's DelayedJoin
        ``tryComplete``); an initial delay is always waited out."""
        if (group.is_(GroupState.PREPARING_REBALANCE) and group.rebalance is not None
                and group.rebalance.initial_remaining_ms is None
                and group.has_all_members_joined()):
            self._membership.complete_join(group, now_ms)

    def tick(self, now_ms: int) -> None:
        for group in list(self._membership.manager.groups.values()):
            if isinstance(group, ConsumerGroup):  # the consumer protocol's own timers
                continue
            try:
                self._advance(group, now_ms)
            except Exception:  # a bug in one group must not stop the timers of all
                log.exception("group %s: advancing its timers failed", group.group_id)
        if now_ms >= self._next_retention_check_ms:
            self._next_retention_check_ms = (
                now_ms + self._config("offsets.retention.check.interval.ms"))
            self._membership.manager.remove_expired_offsets()

    def _advance(self, group: Group, now_ms: int) -> None:
        membership = self._membership
        for member_id, deadline_ms in list(group.pending_members.items()):
            if now_ms >= deadline_ms:
                group.remove(member_id)
                self.maybe_complete_join(group, now_ms)
        for member in list(group.members.values()):
            if member.member_id in group.members and not member.has_satisfied_heartbeat(now_ms):
                membership.expire_member(group, member, now_ms)
        if group.sync_deadline_ms is not None and now_ms >= group.sync_deadline_ms:
            membership.expire_pending_sync(group, now_ms)
        timer = group.rebalance
        if (group.is_(GroupState.PREPARING_REBALANCE) and timer is not None
                and now_ms >= timer.deadline_ms):
            self._join_phase_over(group, timer, now_ms)

    def _join_phase_over(self, group: Group, timer: RebalanceTimer, now_ms: int) -> None:
        remaining_ms = timer.initial_remaining_ms
        if remaining_ms is not None and group.new_member_added and remaining_ms > 0:
            # Someone joined during the delay: wait once more, within the rebalance timeout.
            delay_ms = self._config("group.initial.rebalance.delay.ms")
            group.new_member_added = False
            group.rebalance = RebalanceTimer(now_ms + min(delay_ms, remaining_ms),
                                             initial_remaining_ms=max(remaining_ms - delay_ms, 0))
            return
        self._membership.complete_join(group, now_ms)
