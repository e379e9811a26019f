"""Reward functions: the decorator, `RewardFunction`, composition, the registry and built-ins.

The reward API is importable from here as well as from ``rk_agent``, the way Reward Kit's
guides write it::

    >>> from rk_agent.rewards import reward_function, register_reward_function, EvaluateResult
    >>> @register_reward_function("short_answer")
    ... @reward_function
    ... def short_answer(response: str) -> float:
    ...     return 1.0 if len(response) < 100 else 0.0
    >>> from rk_agent.rewards import get_reward_function
    >>> get_reward_function("short_answer")(response="42").score
    1.0
    >>> from rk_agent.rewards import unregister_reward_function
    >>> unregister_reward_function("short_answer")

The built-in modules stay importable too (``from rk_agent.rewards import math, format``).
Names load on first use (PEP 562), so importing one reward module does not load the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rk_agent.rewards.compose import combine
    from rk_agent.rewards.decorator import is_reward_function, reward_function
    from rk_agent.rewards.function import RewardFunction
    from rk_agent.rewards.registry import (
        get_reward_function,
        list_reward_functions,
        register_reward_function,
        unregister_reward_function,
    )
    from rk_agent.types import (
        EvaluateResult,
        Message,
        MetricResult,
        MetricRewardOutput,
        RewardOutput,
        StepOutput,
    )

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "EvaluateResult": "rk_agent.types",
    "Message": "rk_agent.types",
    "MetricResult": "rk_agent.types",
    "MetricRewardOutput": "rk_agent.types",
    "RewardFunction": "rk_agent.rewards.function",
    "RewardOutput": "rk_agent.types",
    "StepOutput": "rk_agent.types",
    "combine": "rk_agent.rewards.compose",
    "get_reward_function": "rk_agent.rewards.registry",
    "is_reward_function": "rk_agent.rewards.decorator",
    "list_reward_functions": "rk_agent.rewards.registry",
    "register_reward_function": "rk_agent.rewards.registry",
    "reward_function": "rk_agent.rewards.decorator",
    "unregister_reward_function": "rk_agent.rewards.registry",
}

__all__ = [
    "EvaluateResult",
    "Message",
    "MetricResult",
    "MetricRewardOutput",
    "RewardFunction",
    "RewardOutput",
    "StepOutput",
    "combine",
    "get_reward_function",
    "is_reward_function",
    "list_reward_functions",
    "register_reward_function",
    "reward_function",
    "unregister_reward_function",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        # Not an export: `from rk_agent.rewards import math` then imports the submodule.
        raise AttributeError(f"module 'rk_agent.rewards' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
