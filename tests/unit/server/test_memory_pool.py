"""queued.max.request.bytes: room for requests being received, a quarter kept for small ones."""

from __future__ import annotations

from odradek.server.memory_pool import MemoryPool


def test_an_unbounded_pool_always_has_room():
    pool = MemoryPool(-1)
    pool.adjust(10**12)
    assert pool.has_room(large=True) and pool.has_room(large=False)


def test_large_requests_may_fill_three_quarters_and_small_ones_the_rest():
    pool = MemoryPool(1000)
    pool.adjust(749)
    assert pool.has_room(large=True)
    pool.adjust(1)
    assert not pool.has_room(large=True) and pool.has_room(large=False)
    pool.adjust(250)
    assert not pool.has_room(large=False)


def test_waiters_are_resumed_in_order_when_room_is_made_and_small_ones_may_pass_large_ones():
    pool = MemoryPool(1000)
    pool.adjust(1000)
    resumed: list[str] = []
    pool.wait("large", True, lambda: resumed.append("large"))
    pool.wait("small", False, lambda: resumed.append("small"))
    pool.adjust(-100)  # 900 used: room for a small request, not a large one
    assert resumed == ["small"]
    pool.adjust(-200)  # 700 used
    assert resumed == ["small", "large"]
    pool.wait("gone", True, lambda: resumed.append("gone"))
    pool.forget("gone")
    pool.adjust(-700)
    assert resumed == ["small", "large"]
