"""rk-agent: train LLM agents with reinforcement learning.

Rewards are plain Python functions decorated with `reward_function`; they return an
`EvaluateResult` (a score plus named component metrics). Everything users need is importable
from here:

    >>> from rk_agent import reward_function, EvaluateResult
    >>> @reward_function
    ... def brevity(response: str) -> float:
    ...     return 1.0 if len(response) < 100 else 0.0

Names are imported on first use (PEP 562), and heavy dependencies (torch, transformers, trl,
wandb) only by the parts that use them, so ``import rk_agent`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rk_agent.errors import (
        ConfigError,
        DataError,
        EndpointError,
        NotAvailableError,
        RewardError,
        RewardInputError,
        RewardLoadError,
        RkAgentError,
        SandboxError,
        UnknownNameError,
    )
    from rk_agent.rewards.compose import combine
    from rk_agent.rewards.decorator import is_reward_function, reward_function
    from rk_agent.rewards.function import RewardFunction
    from rk_agent.rewards.registry import (
        get_reward_function,
        list_reward_functions,
        register_reward_function,
    )
    from rk_agent.rewards.stats import RewardStats, group_normalize, normalize_rewards, reward_stats
    from rk_agent.types import (
        EvaluateResult,
        FunctionCall,
        Message,
        MetricResult,
        MetricRewardOutput,
        RewardOutput,
        StepOutput,
        ToolCall,
    )

__version__ = "0.1.0"

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "ConfigError": "rk_agent.errors",
    "DataError": "rk_agent.errors",
    "EndpointError": "rk_agent.errors",
    "NotAvailableError": "rk_agent.errors",
    "RewardError": "rk_agent.errors",
    "RewardInputError": "rk_agent.errors",
    "RewardLoadError": "rk_agent.errors",
    "RkAgentError": "rk_agent.errors",
    "SandboxError": "rk_agent.errors",
    "UnknownNameError": "rk_agent.errors",
    "combine": "rk_agent.rewards.compose",
    "is_reward_function": "rk_agent.rewards.decorator",
    "reward_function": "rk_agent.rewards.decorator",
    "RewardFunction": "rk_agent.rewards.function",
    "get_reward_function": "rk_agent.rewards.registry",
    "list_reward_functions": "rk_agent.rewards.registry",
    "register_reward_function": "rk_agent.rewards.registry",
    "RewardStats": "rk_agent.rewards.stats",
    "group_normalize": "rk_agent.rewards.stats",
    "normalize_rewards": "rk_agent.rewards.stats",
    "reward_stats": "rk_agent.rewards.stats",
    "EvaluateResult": "rk_agent.types",
    "FunctionCall": "rk_agent.types",
    "Message": "rk_agent.types",
    "MetricResult": "rk_agent.types",
    "MetricRewardOutput": "rk_agent.types",
    "RewardOutput": "rk_agent.types",
    "StepOutput": "rk_agent.types",
    "ToolCall": "rk_agent.types",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rk_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "ConfigError",
    "DataError",
    "EndpointError",
    "EvaluateResult",
    "FunctionCall",
    "Message",
    "MetricResult",
    "MetricRewardOutput",
    "NotAvailableError",
    "RewardError",
    "RewardFunction",
    "RewardInputError",
    "RewardLoadError",
    "RewardOutput",
    "RewardStats",
    "RkAgentError",
    "SandboxError",
    "StepOutput",
    "ToolCall",
    "UnknownNameError",
    "__version__",
    "combine",
    "get_reward_function",
    "group_normalize",
    "is_reward_function",
    "list_reward_functions",
    "normalize_rewards",
    "register_reward_function",
    "reward_function",
    "reward_stats",
]
