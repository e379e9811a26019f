"""`rk_agent.limiter.Limiter`: the bound, the order of waiters, and cancellation."""

from __future__ import annotations

import asyncio
import doctest
import re

import pytest

from rk_agent import limiter
from rk_agent.limiter import Limiter


async def _hold(limit: Limiter, name: str, log: list[str], release: asyncio.Event) -> None:
    if not limit.take_now():
        await limit.wait()
    try:
        log.append(f"{name} in")
        await release.wait()
    finally:
        log.append(f"{name} out")
        limit.give()


def test_at_most_limit_hold_it_and_waiters_get_it_in_order() -> None:
    async def main() -> list[str]:
        limit, log, release = Limiter(2), [], asyncio.Event()
        tasks = [asyncio.ensure_future(_hold(limit, n, log, release)) for n in "abcd"]
        await asyncio.sleep(0.01)
        assert log == ["a in", "b in"] and limit.free == 0
        release.set()
        await asyncio.gather(*tasks)
        assert limit.free == 2
        return log

    log = asyncio.run(main())
    assert [line for line in log if line.endswith("in")] == ["a in", "b in", "c in", "d in"]


def test_a_free_slot_is_not_taken_past_a_waiter() -> None:
    async def main() -> None:
        limit = Limiter(1)
        assert limit.take_now()
        waiter = asyncio.ensure_future(limit.wait())
        await asyncio.sleep(0)
        limit.give()  # handed to the waiter, not left free for someone else
        assert not limit.take_now()
        await waiter
        limit.give()
        assert limit.take_now()

    asyncio.run(main())


def test_a_waiter_cancelled_while_waiting_takes_nothing() -> None:
    async def main() -> None:
        limit = Limiter(1)
        assert limit.take_now()
        waiter = asyncio.ensure_future(limit.wait())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        limit.give()
        assert limit.free == 1

    asyncio.run(main())


def test_a_waiter_cancelled_after_a_slot_was_handed_to_it_passes_it_on() -> None:
    async def main() -> None:
        limit = Limiter(1)
        assert limit.take_now()
        first = asyncio.ensure_future(limit.wait())
        second = asyncio.ensure_future(limit.wait())
        await asyncio.sleep(0)
        limit.give()  # to `first`, which is cancelled before it runs
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await second  # got the slot `first` passed on
        limit.give()
        assert limit.free == 1

    asyncio.run(main())


def test_a_waiter_cancelled_after_give_skipped_it_is_gone_quietly() -> None:
    async def main() -> None:
        limit = Limiter(1)
        assert limit.take_now()
        waiter = asyncio.ensure_future(limit.wait())
        await asyncio.sleep(0)
        waiter.cancel()
        limit.give()  # skips the cancelled waiter: the slot is free again
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert limit.free == 1

    asyncio.run(main())


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("a limit of at least 1 is needed, got 0")):
        Limiter(0)


def test_docstring_examples() -> None:
    assert doctest.testmod(limiter).failed == 0
