"""Tools that differ per task and change between turns (`ChatEnv.tool_scope`, `episode_tools`)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from rk_agent.envs.base import ChatEnv, EpisodeState
from rk_agent.envs.check import check_env, play_with_solver
from rk_agent.envs.offered_tools import ToolScope, offer
from rk_agent.envs.registry import make_env
from rk_agent.envs.task import Task
from rk_agent.errors import EnvError
from rk_agent.policies.function_policy import tool_call
from rk_agent.types import Message
from tests.envs import varying_tools
from tests.envs.varying_tools import ShopEnv, order, price, solve, stock


def names(schemas: list[dict[str, Any]]) -> list[str]:
    return [s["function"]["name"] for s in schemas]


def test_each_task_offers_its_own_tools_and_turn_2_adds_one() -> None:
    env = ShopEnv()
    assert names(env.tool_schemas) == []  # before any episode: its own tools (none)
    kinds = {}
    for seed in range(8):
        _, info = env.reset(seed=seed)
        kinds[info["task"].metadata["kind"]] = names(info["tools"])
        assert info["tools"] == env.tool_schemas
    assert kinds == {"price": ["price"], "stock": ["stock"]}
    varying_tools.OFFERED.clear()
    played = play_with_solver(env, solve, seed=0)
    own = played.task.metadata["kind"]
    offered = varying_tools.OFFERED
    assert offered == [[own], [own], [own, "order"], [own, "order"]]
    assert played.terminated and played.episode is not None and played.episode.score == 1.0
    assert [m.text for m in played.messages if m.role == "tool"][-1] == (
        f"ORDER-{played.task.metadata['item']}-1"
    )


def test_a_tool_not_offered_yet_is_an_unknown_tool() -> None:
    env = ShopEnv()
    env.reset(seed=0)
    own = env.task.metadata["kind"]
    turn = env.play_turn(tool_call("order", {"item": "lamp", "count": 1}))
    assert turn.tool_calls[0].result.error_kind == "unknown_tool"
    assert turn.tool_calls[0].result.content == (
        f"Error: there is no tool named 'order'. Available: {own}."
    )


def test_a_fixed_tools_env_offers_the_same_tools_before_and_during_episodes() -> None:
    env = make_env("tools")
    before = env.tool_schemas
    assert env.tool_scope is ToolScope.ENV
    env.reset(seed=3)
    assert env.tool_schemas == before
    env.play_turn({"role": "assistant", "content": "42"})
    assert env.tool_schemas == before


def test_a_task_scoped_env_is_asked_once_per_episode() -> None:
    asked: list[int] = []

    class PerTask(ShopEnv):
        tool_scope = ToolScope.TASK

        def episode_tools(self, state: EpisodeState) -> list[Any]:
            asked.append(state.turn)
            return super().episode_tools(state)

    env = PerTask()
    env.reset(seed=0)
    own = env.task.metadata["kind"]
    for _ in range(3):
        env.play_turn(tool_call(own, {"item": "lamp"}))
        assert names(env.tool_schemas) == [own]
    assert asked == [0]


def test_check_env_passes_an_env_whose_tools_vary() -> None:
    class Solved(ShopEnv):
        reference_solver = staticmethod(solve)

    check_env(Solved)


def test_two_tools_of_one_name_in_an_episode_are_an_env_error() -> None:
    with pytest.raises(EnvError, match=re.escape("MyEnv offers two tools named 'price' in one")):
        offer([price, stock], [price], "MyEnv")


def test_an_episode_tool_must_be_a_tool_or_an_openai_schema() -> None:
    with pytest.raises(EnvError, match=re.escape("MyEnv.episode_tools gave {'name': 'ls'}, which")):
        offer([{"name": "ls"}], [], "MyEnv")


def test_a_bare_schema_the_env_does_not_run_is_an_env_error() -> None:
    class Bare(ChatEnv):
        tool_scope = ToolScope.TASK

        def generate_task(self, rng: Any) -> Task:
            return Task(id=str(rng.integers(10)), messages=[Message(role="user", content="go")])

        def episode_tools(self, state: EpisodeState) -> list[Any]:
            return [order.schema]  # offered, but never run by this env

    env = Bare()
    env.reset(seed=0)
    assert names(env.tool_schemas) == ["order"]
    message = "Bare offers 'order' as a bare schema but does not run it: override call_tool"
    with pytest.raises(EnvError, match=re.escape(message)):
        env.play_turn(tool_call("order", {"item": "lamp", "count": 1}))
