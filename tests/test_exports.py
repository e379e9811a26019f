"""The public API: pinned, importable, and cheap to import."""

from __future__ import annotations

import subprocess
import sys

import pytest

import rk_agent

EXPECTED = {
    "ChatEnv", "ContextOverflowError", "EnvError", "FireworksError", "FailureKind",
    "FunctionPolicy", "HFPolicy",
    "OpenAIPolicy", "Policy", "PolicyOutput", "RolloutConfig", "SamplingParams", "ScriptedPolicy",
    "StopReason", "StubServer", "Task", "Tool", "Trajectory", "check_env", "get_env_class",
    "list_envs", "make_env", "run_rollouts", "tool",
    "ConfigError", "DataError", "EndpointError", "EvaluateResult", "FunctionCall", "Message",
    "MetricResult", "MetricRewardOutput", "NotAvailableError", "RewardError", "RewardFunction",
    "RewardInputError", "RewardLoadError", "RewardOutput", "RewardStats", "RkAgentError",
    "SandboxError", "StepOutput", "ToolCall", "UnknownNameError", "__version__", "combine",
    "get_reward_function", "group_normalize", "is_reward_function", "list_reward_functions",
    "normalize_rewards", "register_reward_function", "reward_function", "reward_stats",
    "EpisodeRollout", "SFTFilter", "TrainConfig", "build_sft_data", "build_sft_trainer",
    "env_dataset", "grpo_trainer", "run_training", "sft_dataset",
    "TRLEnvSpec", "trl_environment", "trl_grpo_trainer", "VLLMPolicy",
    "EpisodeState", "ToolResult", "register_env", "RunLockedError", "FailurePolicy", "RunStatus",
}  # fmt: skip


def test_all_is_pinned() -> None:
    assert set(rk_agent.__all__) == EXPECTED


def test_every_exported_name_resolves() -> None:
    for name in rk_agent.__all__:
        assert getattr(rk_agent, name) is not None, name


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        rk_agent.no_such_thing  # type: ignore[attr-defined]  # noqa: B018


def test_import_pulls_in_no_heavy_dependency() -> None:
    code = (
        "import sys, rk_agent\n"
        "from rk_agent import reward_function, RewardFunction, combine, EvaluateResult\n"
        "heavy = ['torch', 'transformers', 'trl', 'wandb', 'httpx', 'openai', 'sympy',"
        " 'math_verify', 'jsonschema', 'typer', 'rich', 'datasets', 'gymnasium']\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
