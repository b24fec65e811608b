"""``Completion``: the answer of a replica manager call, now or later, as a handler needs it.

The replica manager answers through a callback, at once when it can (an acks=1 produce, a
fetch with data) or later from its waiting list (an acks=-1 produce, a long poll). A handler
passes a ``Completion`` as that callback, then asks it for the response: built at once if
the answer is already there, so the common path creates no future and no task, or as an
awaitable otherwise, which the connection keeps in order behind the requests before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_PENDING = object()


class Completion(Generic[T]):
    def __init__(self) -> None:
        self._result: object = _PENDING
        self._future: asyncio.Future[T] | None = None

    def __call__(self, result: T) -> None:
        """Takes the first answer; a later one, or one after the connection went away (the
        waiting task cancelled), is dropped."""
        if self._future is None:
            if self._result is _PENDING:
                self._result = result
        elif not self._future.done():
            self._future.set_result(result)

    def then(self, build: Callable[[T], R]) -> R | Awaitable[R]:
        """``build(result)`` now if the result is in, else an awaitable of it."""
        if self._result is not _PENDING:
            return build(self._result)  # type: ignore[arg-type]
        self._future = asyncio.get_running_loop().create_future()
        return self._build_later(self._future, build)

    async def wait(self) -> T:
        """The result, awaited if it is not in yet (for handlers that are coroutines)."""
        if self._result is not _PENDING:
            return self._result  # type: ignore[return-value]
        self._future = asyncio.get_running_loop().create_future()
        return await self._future

    @staticmethod
    async def _build_later(future: asyncio.Future[T], build: Callable[[T], R]) -> R:
        return build(await future)
