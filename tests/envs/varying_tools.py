"""A small environment whose tools differ per task and grow at turn 2, and its scripted policy.

``ShopEnv``'s tasks are of two kinds: a ``price`` task offers the ``price`` tool, a ``stock``
task the ``stock`` tool (per task); from the third turn (index 2) on, both also offer ``order``
(per turn). The solver looks the item up twice (the task's tool, the second time for a spare),
orders it on turn 2, and answers with the order's id on turn 3; it writes down the tool names it
was offered on each call (``OFFERED``), so a test sees what the policy saw.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rk_agent.envs.base import ChatEnv, EpisodeState
from rk_agent.envs.offered_tools import EpisodeTool, ToolScope
from rk_agent.envs.task import Task
from rk_agent.envs.tool import tool
from rk_agent.policies.function_policy import tool_call
from rk_agent.rewards.decorator import reward_function
from rk_agent.types import Message

ITEMS = ("kettle", "lamp", "watch", "helmet")


@tool
def price(item: str) -> int:
    """The price of an item, in euros.

    Args:
        item: the item's name.
    """
    return 10 + len(item)


@tool
def stock(item: str) -> int:
    """How many of an item are in stock.

    Args:
        item: the item's name.
    """
    return 2 * len(item)


@tool
def order(item: str, count: int) -> str:
    """Order some of an item; returns the order's id.

    Args:
        item: the item's name.
        count: how many.
    """
    return f"ORDER-{item}-{count}"


@reward_function
def ordered(messages: list[Message], ground_truth: Any = None) -> float:
    """1 when the last reply names the order's id."""
    return float(str(ground_truth) in messages[-1].text)


class ShopEnv(ChatEnv):
    """Look an item up with the task's tool, order it from turn 2 on, answer with the order id."""

    tool_scope = ToolScope.TURN
    default_max_turns: ClassVar[int] = 5
    default_episode_rewards: ClassVar[dict[str, Any]] = {"ordered": ordered}

    def generate_task(self, rng: np.random.Generator) -> Task:
        kind = ("price", "stock")[int(rng.integers(2))]
        item = ITEMS[int(rng.integers(len(ITEMS)))]
        return Task(
            id=f"{kind}-{item}",
            messages=[
                Message(role="user", content=f"Check the {kind} of the {item}, then order one.")
            ],
            ground_truth=f"ORDER-{item}-1",
            metadata={"kind": kind, "item": item},
        )

    def episode_tools(self, state: EpisodeState) -> list[EpisodeTool]:
        own = price if state.task.metadata["kind"] == "price" else stock
        return [own, order] if state.turn >= 2 else [own]


OFFERED: list[list[str]] = []
"""The tool names offered on each call of `solve`, in order (cleared by the tests)."""


def solve(messages: list[Message], tools: Any) -> Message:
    """Look up, look up again, order (once offered), answer."""
    names = [t["function"]["name"] for t in tools or []]
    OFFERED.append(names)
    turn = sum(m.role == "assistant" for m in messages)
    item = next(word for word in ITEMS if word in messages[0].text)
    if turn < 2:
        return tool_call(names[0], {"item": item})
    if turn == 2:
        return tool_call("order", {"item": item, "count": 1})
    result = next(m.text for m in reversed(messages) if m.role == "tool")
    return Message(role="assistant", content=f"Ordered: {result}")
