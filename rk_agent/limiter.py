"""`Limiter`: at most ``limit`` holders at once, taken without awaiting while one is free.

A rollout turn takes two such limits (the policy's concurrency, the HTTP pool's connections),
a few thousand times a second. ``async with asyncio.Semaphore`` runs two coroutines and a
``locked()`` check for each even when a slot is free, about 1 % of a turn's instructions each.
`Limiter.take_now` takes a free slot in plain code; only a caller that finds none awaits
`Limiter.wait`, and a slot given back goes straight to the longest waiter (first come, first
served), so a caller that never waited cannot jump the queue.

Main names: `Limiter`.

Example:
    >>> import asyncio
    >>> async def demo() -> list[str]:
    ...     limit, said = Limiter(1), []
    ...     async def one(name: str) -> None:
    ...         if not limit.take_now():
    ...             await limit.wait()
    ...         try:
    ...             said.append(name)
    ...             await asyncio.sleep(0)
    ...         finally:
    ...             limit.give()
    ...     await asyncio.gather(one("a"), one("b"))
    ...     return said
    >>> asyncio.run(demo())
    ['a', 'b']
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Limiter"]


class Limiter:
    """At most ``limit`` holders at once (an `asyncio.Semaphore` with a synchronous fast path).

    Take a slot with ``if not limiter.take_now(): await limiter.wait()`` and give it back with
    `give` (in a ``finally``). It is used from one event loop at a time; a slot is handed to a
    waiter by resolving its future, so that waiter holds it from then on, even if it is
    cancelled before it runs (then it passes the slot on).
    """

    __slots__ = ("_free", "_waiters")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a limit of at least 1 is needed, got {limit}")
        self._free = limit
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def free(self) -> int:
        """Slots nobody holds (0 while callers wait)."""
        return self._free

    def take_now(self) -> bool:
        """Take a slot if one is free and nobody waits for one; say whether it was taken."""
        if self._free and not self._waiters:
            self._free -= 1
            return True
        return False

    async def wait(self) -> None:
        """Wait for a slot (after `take_now` found none); it is held when this returns.

        Raises:
            asyncio.CancelledError: cancelled while waiting (holding nothing then).
        """
        if self.take_now():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot as it was cancelled: pass it on
            elif waiter in self._waiters:  # `give` skips (and drops) cancelled ones
                self._waiters.remove(waiter)
            raise

    def give(self) -> None:
        """Give a slot back: to the longest waiter still waiting, else to the free ones."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1
