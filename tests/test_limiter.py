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


async def _held_with_waiters(n: int) -> tuple[Limiter, list[asyncio.Future[None]]]:
    """A limit of one, held, and ``n`` callers waiting for it (in order)."""
    limit = Limiter(1)
    assert limit.take_now()
    waiters = [asyncio.ensure_future(limit.wait()) for _ in range(n)]
    await asyncio.sleep(0)
    return limit, waiters


@pytest.mark.parametrize("give_first", [False, True])
def test_a_waiter_cancelled_while_waiting_takes_nothing(give_first: bool) -> None:
    # Cancelled before the slot comes back, or while `give` passes it by: either way the slot
    # ends up free, and nothing is lost or held twice.
    async def main() -> None:
        limit, (waiter,) = await _held_with_waiters(1)
        waiter.cancel()
        if give_first:
            limit.give()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        if not give_first:
            limit.give()
        assert limit.free == 1

    asyncio.run(main())


def test_a_free_slot_is_not_taken_past_a_waiter() -> None:
    async def main() -> None:
        limit, (waiter,) = await _held_with_waiters(1)
        limit.give()  # handed to the waiter, not left free for someone else
        assert not limit.take_now()
        await waiter
        limit.give()
        assert limit.take_now()

    asyncio.run(main())


def test_a_waiter_cancelled_after_a_slot_was_handed_to_it_passes_it_on() -> None:
    async def main() -> None:
        limit, (first, second) = await _held_with_waiters(2)
        limit.give()  # to `first`, which is cancelled before it runs
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await second  # got the slot `first` passed on
        limit.give()
        assert limit.free == 1

    asyncio.run(main())


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("a limit of at least 1 is needed, got 0")):
        Limiter(0)


def test_docstring_examples() -> None:
    assert doctest.testmod(limiter).failed == 0
