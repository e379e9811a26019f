"""A tiny environment and its solver, for engine tests: add two numbers with an `add` tool."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.task import Task
from rk_agent.envs.tool import Tool, tool
from rk_agent.policies.function_policy import tool_call
from rk_agent.types import Message


@tool(inline=True)  # quick, pure Python
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first.
        b: second.
    """
    return a + b


class AddEnv(ChatEnv):
    """Add two numbers; the answer is checked by the math reward."""

    default_episode_rewards: ClassVar[dict[str, Any]] = {"answer": "math"}
    default_max_turns = 4

    def generate_task(self, rng: np.random.Generator) -> Task:
        a, b = (int(x) for x in rng.integers(0, 1000, size=2))
        return Task(
            id=f"add-{a}-{b}",
            messages=[{"role": "user", "content": f"{a}+{b}?"}],  # type: ignore[list-item]
            ground_truth=str(a + b),
        )

    def tools(self) -> list[Tool]:
        return [add]


def solver(messages: list[Message], tools: Any) -> Message | str:
    """Call `add`, then answer with its result."""
    results = [m for m in messages if m.role == "tool"]
    if not results:
        a, b = messages[0].text.rstrip("?").split("+")
        return tool_call("add", {"a": int(a), "b": int(b)})
    return f"#### {results[-1].text}"
