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
    from rk_agent.envs.base import ChatEnv, EpisodeState
    from rk_agent.envs.check import check_env
    from rk_agent.envs.registry import get_env_class, list_envs, make_env, register_env
    from rk_agent.envs.task import Task
    from rk_agent.envs.tool import Tool, ToolResult, tool
    from rk_agent.errors import (
        ConfigError,
        ContextOverflowError,
        DataError,
        EndpointError,
        EnvError,
        FireworksError,
        NotAvailableError,
        RewardError,
        RewardInputError,
        RewardLoadError,
        RkAgentError,
        RunLockedError,
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
    from rk_agent.rollouts.config import FailurePolicy, RolloutConfig
    from rk_agent.rollouts.engine import run_rollouts
    from rk_agent.rollouts.hf_policy import HFPolicy
    from rk_agent.rollouts.openai_policy import OpenAIPolicy
    from rk_agent.rollouts.policy import Policy, PolicyOutput, SamplingParams
    from rk_agent.rollouts.stub_server import StubServer
    from rk_agent.rollouts.testing import FunctionPolicy, ScriptedPolicy
    from rk_agent.rollouts.trajectory import Trajectory
    from rk_agent.rollouts.vllm_policy import VLLMPolicy
    from rk_agent.trainers.config import TrainConfig
    from rk_agent.trainers.grpo import grpo_trainer
    from rk_agent.trainers.rollout import EpisodeRollout
    from rk_agent.trainers.run import run_training
    from rk_agent.trainers.sft import build_sft_trainer
    from rk_agent.trainers.sft_data import SFTFilter, build_sft_data, sft_dataset
    from rk_agent.trainers.tasks import env_dataset
    from rk_agent.trainers.trl_env import TRLEnvSpec, trl_environment, trl_grpo_trainer
    from rk_agent.types import (
        EvaluateResult,
        FailureKind,
        FunctionCall,
        Message,
        MetricResult,
        MetricRewardOutput,
        RewardOutput,
        RunStatus,
        StepOutput,
        StopReason,
        ToolCall,
    )

__version__ = "0.1.0"

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "ChatEnv": "rk_agent.envs.base",
    "ConfigError": "rk_agent.errors",
    "ContextOverflowError": "rk_agent.errors",
    "DataError": "rk_agent.errors",
    "EndpointError": "rk_agent.errors",
    "EnvError": "rk_agent.errors",
    "EpisodeRollout": "rk_agent.trainers.rollout",
    "EpisodeState": "rk_agent.envs.base",
    "EvaluateResult": "rk_agent.types",
    "FailureKind": "rk_agent.types",
    "FailurePolicy": "rk_agent.rollouts.config",
    "FireworksError": "rk_agent.errors",
    "FunctionCall": "rk_agent.types",
    "FunctionPolicy": "rk_agent.rollouts.testing",
    "HFPolicy": "rk_agent.rollouts.hf_policy",
    "Message": "rk_agent.types",
    "MetricResult": "rk_agent.types",
    "MetricRewardOutput": "rk_agent.types",
    "NotAvailableError": "rk_agent.errors",
    "OpenAIPolicy": "rk_agent.rollouts.openai_policy",
    "Policy": "rk_agent.rollouts.policy",
    "PolicyOutput": "rk_agent.rollouts.policy",
    "RewardError": "rk_agent.errors",
    "RewardFunction": "rk_agent.rewards.function",
    "RewardInputError": "rk_agent.errors",
    "RewardLoadError": "rk_agent.errors",
    "RewardOutput": "rk_agent.types",
    "RewardStats": "rk_agent.rewards.stats",
    "RkAgentError": "rk_agent.errors",
    "RolloutConfig": "rk_agent.rollouts.config",
    "RunLockedError": "rk_agent.errors",
    "RunStatus": "rk_agent.types",
    "SFTFilter": "rk_agent.trainers.sft_data",
    "SamplingParams": "rk_agent.rollouts.policy",
    "SandboxError": "rk_agent.errors",
    "ScriptedPolicy": "rk_agent.rollouts.testing",
    "StepOutput": "rk_agent.types",
    "StopReason": "rk_agent.types",
    "StubServer": "rk_agent.rollouts.stub_server",
    "TRLEnvSpec": "rk_agent.trainers.trl_env",
    "Task": "rk_agent.envs.task",
    "Tool": "rk_agent.envs.tool",
    "ToolCall": "rk_agent.types",
    "ToolResult": "rk_agent.envs.tool",
    "TrainConfig": "rk_agent.trainers.config",
    "Trajectory": "rk_agent.rollouts.trajectory",
    "UnknownNameError": "rk_agent.errors",
    "VLLMPolicy": "rk_agent.rollouts.vllm_policy",
    "build_sft_data": "rk_agent.trainers.sft_data",
    "build_sft_trainer": "rk_agent.trainers.sft",
    "check_env": "rk_agent.envs.check",
    "combine": "rk_agent.rewards.compose",
    "env_dataset": "rk_agent.trainers.tasks",
    "get_env_class": "rk_agent.envs.registry",
    "get_reward_function": "rk_agent.rewards.registry",
    "group_normalize": "rk_agent.rewards.stats",
    "grpo_trainer": "rk_agent.trainers.grpo",
    "is_reward_function": "rk_agent.rewards.decorator",
    "list_envs": "rk_agent.envs.registry",
    "list_reward_functions": "rk_agent.rewards.registry",
    "make_env": "rk_agent.envs.registry",
    "normalize_rewards": "rk_agent.rewards.stats",
    "register_env": "rk_agent.envs.registry",
    "register_reward_function": "rk_agent.rewards.registry",
    "reward_function": "rk_agent.rewards.decorator",
    "reward_stats": "rk_agent.rewards.stats",
    "run_rollouts": "rk_agent.rollouts.engine",
    "run_training": "rk_agent.trainers.run",
    "sft_dataset": "rk_agent.trainers.sft_data",
    "tool": "rk_agent.envs.tool",
    "trl_environment": "rk_agent.trainers.trl_env",
    "trl_grpo_trainer": "rk_agent.trainers.trl_env",
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
    "ChatEnv",
    "ConfigError",
    "ContextOverflowError",
    "DataError",
    "EndpointError",
    "EnvError",
    "EpisodeRollout",
    "EpisodeState",
    "EvaluateResult",
    "FailureKind",
    "FailurePolicy",
    "FireworksError",
    "FunctionCall",
    "FunctionPolicy",
    "HFPolicy",
    "Message",
    "MetricResult",
    "MetricRewardOutput",
    "NotAvailableError",
    "OpenAIPolicy",
    "Policy",
    "PolicyOutput",
    "RewardError",
    "RewardFunction",
    "RewardInputError",
    "RewardLoadError",
    "RewardOutput",
    "RewardStats",
    "RkAgentError",
    "RolloutConfig",
    "RunLockedError",
    "RunStatus",
    "SFTFilter",
    "SamplingParams",
    "SandboxError",
    "ScriptedPolicy",
    "StepOutput",
    "StopReason",
    "StubServer",
    "TRLEnvSpec",
    "Task",
    "Tool",
    "ToolCall",
    "ToolResult",
    "TrainConfig",
    "Trajectory",
    "UnknownNameError",
    "VLLMPolicy",
    "__version__",
    "build_sft_data",
    "build_sft_trainer",
    "check_env",
    "combine",
    "env_dataset",
    "get_env_class",
    "get_reward_function",
    "group_normalize",
    "grpo_trainer",
    "is_reward_function",
    "list_envs",
    "list_reward_functions",
    "make_env",
    "normalize_rewards",
    "register_env",
    "register_reward_function",
    "reward_function",
    "reward_stats",
    "run_rollouts",
    "run_training",
    "sft_dataset",
    "tool",
    "trl_environment",
    "trl_grpo_trainer",
]
