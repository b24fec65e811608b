"""``ConnectionQuotas``: ``max.connections`` and ``max.connections.per.ip`` (KIP-402).

Kafka's acceptor stops accepting while the broker is at ``max.connections`` and closes a
new connection from an address already at ``max.connections.per.ip``. An asyncio server
cannot stop accepting, so a connection over either limit is closed as soon as it is
accepted, with a log line; clients reconnect with their usual backoff. The limits are read
at every connection, so a dynamic change (AlterConfigs on the broker) applies at once.

This class is not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any


class ConnectionQuotas:
    def __init__(self, config: Callable[[str], Any]) -> None:
        self._config = config
        self._per_ip: Counter[str] = Counter()
        self._total = 0

    def admit(self, ip: str) -> str | None:
        """Counts a new connection from ``ip``, or returns why it is refused."""
        if self._total >= self._config("max.connections"):
            return f"max.connections ({self._config('max.connections')}) reached"
        limit = self._config("max.connections.per.ip")
        if self._per_ip[ip] >= limit:
            return f"max.connections.per.ip ({limit}) reached for {ip}"
        self._per_ip[ip] += 1
        self._total += 1
        return None

    def release(self, ip: str) -> None:
        self._total -= 1
        self._per_ip[ip] -= 1
        if not self._per_ip[ip]:
            del self._per_ip[ip]
