"""`rk_agent.policies.policy`: the optional warm-up hook, as the engine calls it."""

from __future__ import annotations

import asyncio

from rk_agent.policies.policy import warm_up_policy


class _Counting:
    def __init__(self) -> None:
        self.calls: list[object] = []


class _Plain(_Counting):
    async def warm_up(self) -> None:  # the protocol's older form: no arguments
        self.calls.append("plain")


class _WithConnections(_Counting):
    async def warm_up(self, connections: int = 0) -> None:
        self.calls.append(connections)


def test_a_warm_up_that_takes_connections_gets_them_and_one_that_does_not_is_called_bare() -> None:
    plain, counted = _Plain(), _WithConnections()
    asyncio.run(warm_up_policy(plain, 16))
    asyncio.run(warm_up_policy(counted, 16))
    assert (plain.calls, counted.calls) == (["plain"], [16])


def test_a_policy_without_a_warm_up_is_left_alone() -> None:
    asyncio.run(warm_up_policy(object(), 4))  # nothing to call, nothing raised
