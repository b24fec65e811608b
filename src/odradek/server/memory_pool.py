"""``MemoryPool``: ``queued.max.request.bytes``, the memory requests may hold while they are
still being received (Kafka's ``SimpleMemoryPool``, KIP-72).

A connection holds the bytes of the request it is receiving. Without a bound, clients that
announce large requests and send them slowly make the broker hold all of it: sixty
connections each sending 4 MB of a 100 MB request hold 240 MB. With
``queued.max.request.bytes`` set, every byte kept for a request not yet complete is counted
here, and a connection whose next bytes find no room stops being read until room is made
(by requests completing, or connections closing); its bytes wait in the kernel, whose socket
buffers are bounded.

Kafka reserves a request's announced size when its size prefix arrives, so a few large
requests sent slowly can take all the room and keep every other client waiting. Here bytes
are counted as they arrive, and a quarter of the room is kept for requests of at most
``SMALL_REQUEST_BYTES`` (what ordinary clients send: a produce batch of librdkafka's default
1 MB, metadata, fetches, heartbeats), so that large slow requests are held back while
ordinary clients are served. A connection overshoots the bound by at most one read (the
bytes asyncio hands over at once) before it stops being read.

Not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

# Requests up to this size may use the quarter of the pool large requests may not.
SMALL_REQUEST_BYTES = 1024 * 1024
LARGE_REQUEST_SHARE = 0.75


class MemoryPool:
    def __init__(self, capacity: int) -> None:
        """``capacity``: ``queued.max.request.bytes``; -1 (Kafka's default) bounds nothing."""
        self.capacity = capacity
        self.used = 0
        # Connections waiting for room, oldest first: key -> (large request, resume).
        self._waiting: OrderedDict[object, tuple[bool, Callable[[], None]]] = OrderedDict()

    @property
    def bounded(self) -> bool:
        return self.capacity >= 0

    def _limit(self, large: bool) -> float:
        return self.capacity * LARGE_REQUEST_SHARE if large else self.capacity

    def has_room(self, large: bool) -> bool:
        return not self.bounded or self.used < self._limit(large)

    def adjust(self, delta: int) -> None:
        """Counts ``delta`` more (or, negative, fewer) bytes held; room made wakes waiters."""
        self.used += delta
        if delta < 0 and self._waiting:
            self._wake()

    def wait(self, key: object, large: bool, resume: Callable[[], None]) -> None:
        """``resume`` is called once there is room for a request of that kind."""
        self._waiting[key] = (large, resume)

    def forget(self, key: object) -> None:
        self._waiting.pop(key, None)

    def _wake(self) -> None:
        for key, (large, resume) in list(self._waiting.items()):
            if not self.has_room(large):
                if large:
                    continue  # a small request behind it may still fit
                break
            del self._waiting[key]
            resume()
