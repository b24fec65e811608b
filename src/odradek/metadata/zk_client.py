"""kazoo's ZooKeeper client, awaited from the broker's event loop.

kazoo runs its connection on a thread of its own and completes requests and fires watches
there. :class:`AsyncZooKeeper` turns each completion into an asyncio future resolved on
the loop and delivers watches and session state changes as calls on the loop, so the
metadata store and the controller never touch a thread: every ZooKeeper read, write and
watch is handled on the event loop, in the order ZooKeeper produced them.

Writes that must be fenced use versions: ``set(path, data, version)`` fails with
``BadVersionError`` when the znode changed since it was read, and :meth:`multi` commits
several operations atomically (a controller's write carries a check of the controller
epoch znode's version, so a deposed controller's writes fail).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionDropped,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.protocol.states import KazooState, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

__all__ = [
    "AsyncZooKeeper", "BadVersionError", "KazooState", "NoNodeError", "NodeExistsError",
    "NotEmptyError", "WatchedEvent", "ZnodeStat", "ZooKeeperUnavailable", "ZookeeperError",
    "Check", "Create", "Delete", "SetData",
]

log = logging.getLogger(__name__)

Watch = Callable[[WatchedEvent], None]

_UNAVAILABLE = (ConnectionLoss, ConnectionDropped, SessionExpiredError, OperationTimeoutError)


class ZooKeeperUnavailable(ConnectionError):
    """ZooKeeper could not be reached (at start, or the session is gone)."""


# Operations of a multi (ZooKeeper's atomic transaction).
class Check(tuple):
    """The znode at ``path`` has ``version`` (else the whole multi fails)."""

    def __new__(cls, path: str, version: int) -> Check:
        return super().__new__(cls, ("check", path, version))


class Create(tuple):
    def __new__(cls, path: str, data: bytes, *, ephemeral: bool = False) -> Create:
        return super().__new__(cls, ("create", path, data, ephemeral))


class SetData(tuple):
    def __new__(cls, path: str, data: bytes, version: int = -1) -> SetData:
        return super().__new__(cls, ("set", path, data, version))


class Delete(tuple):
    def __new__(cls, path: str, version: int = -1) -> Delete:
        return super().__new__(cls, ("delete", path, version))


class AsyncZooKeeper:
    def __init__(self, hosts: str, *, session_timeout_ms: int, connection_timeout_ms: int,
                 on_state: Callable[[KazooState], None] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._hosts = hosts
        self._connection_timeout_s = connection_timeout_ms / 1000
        self._wrappers: dict[Watch, Watch] = {}
        self._client = KazooClient(
            hosts=hosts, timeout=session_timeout_ms / 1000,
            # Reconnect for ever, quickly: the session outlives short outages, and after it
            # expires the owner registers again on a new one.
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
            command_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=1.0),
        )
        if on_state is not None:
            self._client.add_listener(
                lambda state: self._loop.call_soon_threadsafe(on_state, state))

    @property
    def connected(self) -> bool:
        return self._client.connected

    @property
    def session_id(self) -> int | None:
        session = self._client.client_id
        return session[0] if session else None

    async def start(self) -> None:
        try:
            await self._loop.run_in_executor(None, self._client.start,
                                             self._connection_timeout_s)
        except Exception as exc:  # kazoo's own timeout class, or a resolver error
            self._client.close()
            raise ZooKeeperUnavailable(
                f"could not connect to ZooKeeper at {self._hosts} within "
                f"{self._connection_timeout_s:g} s: {exc}") from exc

    def forget_watch(self, watch: Watch) -> None:
        """Drops the wrapper kept for ``watch`` (its path is gone for good)."""
        self._wrappers.pop(watch, None)

    def forget_watches(self) -> None:
        """Drops every wrapper: the session they were set in has expired, and with it
        every watch."""
        self._wrappers.clear()

    def close(self) -> None:
        """Ends the session (its ephemeral znodes go at once) and stops kazoo's thread."""
        try:
            self._client.stop()
        finally:
            self._client.close()

    # -- reads -------------------------------------------------------------------------

    async def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat]:
        return await self._call(self._client.get_async(path, self._on_loop(watch)))

    async def get_or_none(self, path: str, watch: Watch | None = None
                          ) -> tuple[bytes, ZnodeStat] | None:
        """The znode's data and stat, or None when it does not exist — in which case the
        watch is set on its creation instead."""
        try:
            return await self.get(path, watch)
        except NoNodeError:
            if watch is None:
                return None
            if await self.exists(path, watch) is None:
                return None
            return await self.get_or_none(path, watch)  # created in between

    async def children(self, path: str, watch: Watch | None = None) -> list[str]:
        return await self._call(self._client.get_children_async(path, self._on_loop(watch)))

    async def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None:
        return await self._call(self._client.exists_async(path, self._on_loop(watch)))

    # -- writes ------------------------------------------------------------------------

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     makepath: bool = False) -> str:
        return await self._call(self._client.create_async(
            path, data, ephemeral=ephemeral, makepath=makepath))

    async def ensure_path(self, path: str) -> None:
        await self._call(self._client.ensure_path_async(path))

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        return await self._call(self._client.set_async(path, data, version))

    async def delete(self, path: str, version: int = -1) -> None:
        await self._call(self._client.delete_async(path, version))

    async def delete_recursive(self, path: str) -> None:
        """Removes ``path`` and everything below it; a znode already gone is no error."""
        try:
            await self._loop.run_in_executor(
                None, lambda: self._client.delete(path, recursive=True))
        except NoNodeError:
            pass

    async def multi(self, operations: Sequence[tuple]) -> list[Any]:
        """Commits ``operations`` atomically. On failure raises the failed operation's error
        (``BadVersionError``, ``NoNodeError``, ``NodeExistsError``) with its position in
        ``operations`` as ``operation_index``."""
        transaction = self._client.transaction()
        for operation in operations:
            match operation:
                case ("check", path, version):
                    transaction.check(path, version)
                case ("create", path, data, ephemeral):
                    transaction.create(path, data, ephemeral=ephemeral)
                case ("set", path, data, version):
                    transaction.set_data(path, data, version)
                case ("delete", path, version):
                    transaction.delete(path, version)
                case _:
                    raise ValueError(f"not a multi operation: {operation!r}")
        results = await self._call(transaction.commit_async())
        # ZooKeeper marks the other operations of a failed multi RolledBackError: the first
        # error that is not that one says why, and ``operation_index`` says which failed.
        for index, result in enumerate(results):
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                result.operation_index = index
                raise result
        return results

    # -- plumbing ----------------------------------------------------------------------

    def _on_loop(self, watch: Watch | None) -> Watch | None:
        # kazoo keeps a set of watchers per path: the same wrapper for the same watch, so
        # that reading a path again with its watch does not call the watch twice.
        if watch is None:
            return None
        wrapper = self._wrappers.get(watch)
        if wrapper is None:
            loop = self._loop

            def wrapper(event: WatchedEvent) -> None:
                loop.call_soon_threadsafe(watch, event)

            self._wrappers[watch] = wrapper
        return wrapper

    def _call(self, async_result: Any) -> asyncio.Future:
        future = self._loop.create_future()

        def settle() -> None:
            if future.cancelled():
                return
            if async_result.successful():
                future.set_result(async_result.value)
            else:
                exception = async_result.exception
                if isinstance(exception, _UNAVAILABLE):
                    # Connection loss, session expiry, closing: not an answer about data.
                    exception = ZooKeeperUnavailable(str(exception) or type(exception).__name__)
                future.set_exception(exception)

        async_result.rawlink(lambda _: self._loop.call_soon_threadsafe(settle))
        return future
