"""One byte budget for every request body the reward server holds (``/evaluate`` and ``/batch``).

A body is read only once its bytes fit the budget: its ``Content-Length`` is taken before the
first byte is read (a chunked body takes each chunk as it comes), and given back when its
answer has gone. A body that does not fit waits, unread: its bytes stay in the client's socket,
until others finish or the server's body deadline cuts it. The first 64 KiB of each body are
not counted: uvicorn buffers about that much of every connection anyway (so that part is
bounded by the connection limit), and a small sample never waits behind large bodies. So the
bodies held at once, read or being read, scored or being scored, stay under the budget plus
64 KiB per connection, however many clients send at once.

Main names:
    ByteBudget: the budget.
"""

from __future__ import annotations

import asyncio

__all__ = ["ByteBudget"]


class ByteBudget:
    """Bytes of request bodies the server may hold at once, shared by every request.

    Example:
        >>> import asyncio
        >>> budget = ByteBudget(100)
        >>> asyncio.run(budget.take(60)), budget.held
        (True, 60)
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.peak = 0
        self._freed: asyncio.Event | None = None

    def try_take(self, size: int) -> bool:
        """Take ``size`` bytes if they fit now."""
        if self.held + size > self.limit:
            return False
        self.held += size
        self.peak = max(self.peak, self.held)
        return True

    async def take(self, size: int, timeout_s: float | None = None) -> bool:
        """Take ``size`` bytes, waiting up to ``timeout_s``; ``False`` if they never fit."""
        if self.try_take(size):
            return True
        if size > self.limit:
            return False
        try:
            async with asyncio.timeout(timeout_s):
                while not self.try_take(size):
                    if self._freed is None:
                        self._freed = asyncio.Event()
                    await self._freed.wait()
        except TimeoutError:
            return False
        return True

    def give_back(self, size: int) -> None:
        self.held -= size
        if self._freed is not None:
            self._freed.set()  # every waiter looks again; the next `take` makes a new event
            self._freed = None
