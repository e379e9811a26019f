"""The engine over real HTTP: the stub server's failure injection, end to end."""

from __future__ import annotations

import asyncio
from typing import Any

from rk_agent.envs.registry import get_env_class
from rk_agent.policies.openai_policy import OpenAIPolicy
from rk_agent.rollouts.engine import run_rollouts
from rk_agent.runs.config import FailurePolicy, RolloutConfig
from rk_agent.testing.stub_replies import Fault, call_first_tool_then_answer
from rk_agent.testing.stub_server import StubServer
from rk_agent.types import FailureKind, StopReason


def play(server: StubServer, config: RolloutConfig, **policy_options: Any) -> list[Any]:
    async def main() -> Any:
        policy = OpenAIPolicy("stub", base_url=server.base_url, **policy_options)
        try:
            return await run_rollouts(
                config, policy=policy, make_env=get_env_class("tools"), env_name="tools"
            )
        finally:
            await policy.aclose()

    return asyncio.run(main()).trajectories


def test_rate_limits_and_server_errors_are_retried_inside_the_episode() -> None:
    with StubServer(call_first_tool_then_answer("Answer: 1")) as server:
        server.inject(Fault.rate_limit(retry_after=0.05), Fault.http(503), Fault.drop())
        trajectories = play(server, RolloutConfig(n=2), backoff_base_s=0.01)
    assert all(t.failure is None and t.stop_reason is StopReason.ANSWERED for t in trajectories)
    assert sum(len(t.turns) for t in trajectories) == 4


def test_context_overflow_from_the_server_truncates() -> None:
    with StubServer(call_first_tool_then_answer("Answer: 1")) as server:
        server.inject(Fault.context_overflow(limit=100))
        [trajectory] = play(server, RolloutConfig(n=1))
    assert trajectory.stop_reason is StopReason.TRUNCATED
    assert trajectory.failure is not None
    assert trajectory.failure.kind is FailureKind.CONTEXT_OVERFLOW


def test_a_hanging_server_hits_the_episode_timeout() -> None:
    with StubServer(call_first_tool_then_answer("Answer: 1")) as server:
        server.inject(Fault.hang(30))
        [trajectory] = play(server, RolloutConfig(n=1, episode_timeout_s=0.5), timeout_s=20)
    assert trajectory.stop_reason is StopReason.TIMEOUT
    assert trajectory.failure is not None and trajectory.failure.kind is FailureKind.TIMEOUT


def test_permanent_errors_end_the_episode_and_drop_the_group() -> None:
    config = RolloutConfig(n=2, group_size=2, concurrency=1,
                           failure_policy=FailurePolicy(action="drop_group"))  # fmt: skip
    with StubServer(call_first_tool_then_answer("Answer: 1")) as server:
        server.inject(Fault.http(401, "Invalid API key provided."))
        trajectories = play(server, config)
    # The first episode failed with a 401 (not retried), so its whole group is gone.
    assert sorted(t.id for t in trajectories) == ["1-0", "1-1"]


def test_a_run_opens_its_connections_before_the_first_episode_and_keeps_to_them() -> None:
    config = RolloutConfig(n=9, concurrency=3)
    opened_before: list[int] = []
    with StubServer(call_first_tool_then_answer("Answer: 1")) as server:
        original = OpenAIPolicy.generate

        async def generate(self: OpenAIPolicy, *args: Any, **kwargs: Any) -> Any:
            if not opened_before:  # the server accepts on its own thread: give it time
                deadline = asyncio.get_running_loop().time() + 10
                while (
                    server.counts["connections"] < 3
                    and asyncio.get_running_loop().time() < deadline
                ):
                    await asyncio.sleep(0.01)
                opened_before.append(server.counts["connections"])
            return await original(self, *args, **kwargs)

        OpenAIPolicy.generate = generate  # type: ignore[method-assign]
        try:
            trajectories = play(server, config)
        finally:
            OpenAIPolicy.generate = original  # type: ignore[method-assign]
        counts = server.counts
    assert all(t.failure is None for t in trajectories) and len(trajectories) == 9
    assert opened_before[0] == 3  # all three open when the first episode asked the model
    assert counts["connections"] == 3 and counts["requests"] == 18  # reused for every turn
