"""The reward API as Reward Kit's guides import it: from `rk_agent.rewards`."""

from __future__ import annotations

import subprocess
import sys

import pytest

import rk_agent
import rk_agent.rewards

NAMES = [
    "EvaluateResult", "Message", "MetricResult", "MetricRewardOutput", "RewardFunction",
    "RewardOutput", "StepOutput", "combine", "get_reward_function", "is_reward_function",
    "list_reward_functions", "register_reward_function", "reward_function",
    "unregister_reward_function",
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_the_reward_api_is_importable_from_rk_agent_rewards(name: str) -> None:
    value = getattr(rk_agent.rewards, name)
    if hasattr(rk_agent, name):  # the same object as the top-level name
        assert value is getattr(rk_agent, name)
    assert name in rk_agent.rewards.__all__


def test_every_export_is_listed() -> None:
    assert sorted(rk_agent.rewards.__all__) == sorted(NAMES)


def test_the_reward_trainer_guide_runs_as_written() -> None:
    script = """
from rk_agent.rewards import register_reward_function, reward_function, EvaluateResult
from rk_agent.rewards import function_calling, math, format, length, json_schema
from rk_agent.rewards import get_reward_function, list_reward_functions

@register_reward_function("guide_brevity")
@reward_function
def brevity(response: str, **kwargs) -> EvaluateResult:
    return EvaluateResult(score=1.0 if len(response) < 50 else 0.0, reason="short")

assert "guide_brevity" in list_reward_functions()
print(get_reward_function("guide_brevity")(response="42").score, math.__name__)
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1.0", "rk_agent.rewards.math"]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match=r"module 'rk_agent\.rewards' has no attribute 'nope'"):
        rk_agent.rewards.nope  # noqa: B018
