"""Type information for `rk_agent.rewards`, and its list of public names (one place).

Each ``from module import Name as Name`` line is a public name of ``rk_agent.rewards``, imported
on first use (`rk_agent._lazy.attach_stub`). The built-in reward modules (``math``, ``format``,
...) are submodules, importable as ever.
"""

from rk_agent.rewards.compose import combine as combine
from rk_agent.rewards.decorator import (
    is_reward_function as is_reward_function,
    reward_function as reward_function,
)
from rk_agent.rewards.function import RewardFunction as RewardFunction
from rk_agent.rewards.registry import (
    get_reward_function as get_reward_function,
    list_reward_functions as list_reward_functions,
    register_reward_function as register_reward_function,
    unregister_reward_function as unregister_reward_function,
)
from rk_agent.types import (
    EvaluateResult as EvaluateResult,
    Message as Message,
    MetricResult as MetricResult,
    MetricRewardOutput as MetricRewardOutput,
    RewardOutput as RewardOutput,
    StepOutput as StepOutput,
)
