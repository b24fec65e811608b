"""The waiting list of delayed operations, driven by a fake clock: completion by progress on
a watched key, by deadline, by force; each operation answers exactly once."""

from __future__ import annotations

import pytest

from odradek.replication.purgatory import PURGE_THRESHOLD, DelayedOperation, DelayedOperationPurgatory


class FakeClock:
    def __init__(self) -> None:
        self.now_ms = 1_000

    def __call__(self) -> int:
        return self.now_ms


class WaitForCount(DelayedOperation):
    """Completes once ``counter[0]`` reaches ``target``; records how it ended."""

    def __init__(self, deadline_ms: int, counter: list[int], target: int) -> None:
        super().__init__(deadline_ms)
        self.counter = counter
        self.target = target
        self.answers: list[str] = []
        self.expired = False

    def try_complete(self) -> bool:
        if self.counter[0] >= self.target:
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        self.expired = True

    def on_complete(self) -> None:
        self.answers.append("timed out" if self.expired else f"count {self.counter[0]}")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def purgatory(clock: FakeClock) -> DelayedOperationPurgatory[WaitForCount]:
    return DelayedOperationPurgatory("test", clock)


def test_an_operation_that_can_complete_now_is_never_watched(purgatory, clock):
    op = WaitForCount(clock() + 500, [3], target=1)
    assert purgatory.try_complete_else_watch(op, ["orders-0"]) is True
    assert op.answers == ["count 3"]
    assert purgatory.watched("orders-0") == 0
    assert purgatory.next_deadline_ms() is None


def test_progress_on_a_watched_key_completes_the_waiting_operation(purgatory, clock):
    counter = [0]
    op = WaitForCount(clock() + 500, counter, target=2)
    assert purgatory.try_complete_else_watch(op, ["orders-0", "orders-1"]) is False
    assert purgatory.watched("orders-0") == purgatory.watched("orders-1") == 1
    counter[0] = 1
    assert purgatory.check_and_complete("orders-0") == 0
    counter[0] = 2
    assert purgatory.check_and_complete("orders-1") == 1
    assert op.answers == ["count 2"]
    # Gone from every key it watched, not only the one that completed it.
    assert purgatory.watched("orders-0") == purgatory.watched("orders-1") == 0
    assert purgatory.check_and_complete("orders-0") == 0
    assert op.answers == ["count 2"]


def test_progress_on_another_key_does_not_touch_the_operation(purgatory, clock):
    counter = [0]
    op = WaitForCount(clock() + 500, counter, target=1)
    purgatory.try_complete_else_watch(op, ["orders-0"])
    counter[0] = 1
    assert purgatory.check_and_complete("payments-0") == 0
    assert op.answers == []


def test_an_operation_expires_at_its_deadline_and_not_before(purgatory, clock):
    op = WaitForCount(clock() + 500, [0], target=1)
    purgatory.try_complete_else_watch(op, ["orders-0"])
    assert purgatory.next_deadline_ms() == 1_500
    clock.now_ms = 1_499
    assert purgatory.expire_due() == 0
    assert op.answers == []
    clock.now_ms = 1_500
    assert purgatory.expire_due() == 1
    assert op.answers == ["timed out"]
    assert purgatory.watched("orders-0") == 0
    assert purgatory.next_deadline_ms() is None


def test_deadlines_come_up_in_order(purgatory, clock):
    late = WaitForCount(clock() + 900, [0], target=1)
    early = WaitForCount(clock() + 100, [0], target=1)
    purgatory.try_complete_else_watch(late, ["a"])
    purgatory.try_complete_else_watch(early, ["b"])
    assert purgatory.next_deadline_ms() == 1_100
    clock.now_ms = 1_100
    assert purgatory.expire_due() == 1
    assert early.answers == ["timed out"] and late.answers == []
    assert purgatory.next_deadline_ms() == 1_900


def test_an_operation_completed_before_its_deadline_does_not_expire(purgatory, clock):
    counter = [0]
    op = WaitForCount(clock() + 500, counter, target=1)
    purgatory.try_complete_else_watch(op, ["orders-0"])
    counter[0] = 1
    purgatory.check_and_complete("orders-0")
    assert purgatory.next_deadline_ms() is None
    clock.now_ms = 2_000
    assert purgatory.expire_due() == 0
    assert op.answers == ["count 1"]


def test_complete_all_answers_every_operation_on_a_key_at_once(purgatory, clock):
    ops = [WaitForCount(clock() + 500, [0], target=1) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["orders-0"])
    assert purgatory.complete_all("orders-0") == 3
    assert [op.answers for op in ops] == [["count 0"]] * 3
    assert purgatory.delayed == 0


def test_a_watch_needs_a_key(purgatory, clock):
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(WaitForCount(clock() + 1, [0], target=1), [])


def test_completed_operations_do_not_pile_up_until_their_deadlines(purgatory, clock):
    counter = [0]
    ops = [WaitForCount(clock() + 60_000, counter, target=1)
           for _ in range(PURGE_THRESHOLD * 3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["orders-0"])
    counter[0] = 1
    purgatory.check_and_complete("orders-0")
    assert len(purgatory._timeouts) == 0
    assert all(op.answers == ["count 1"] for op in ops)
