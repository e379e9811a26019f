"""`rk_agent.envs.base.ChatEnv`: how an environment combines its rewards."""

from __future__ import annotations

from typing import Any

from rk_agent import EvaluateResult, Message, reward_function
from rk_agent.envs.registry import get_env_class
from rk_agent.envs.tool_rewards import answer_match, tool_efficiency

ToolsEnv = get_env_class("tools")


def test_environments_built_with_the_same_rewards_share_their_combined_reward() -> None:
    first, second = ToolsEnv(), ToolsEnv()
    assert first._episode_reward is second._episode_reward
    assert first._step_reward is second._step_reward
    first.reset(seed=3)
    second.reset(seed=3)
    reply = Message(role="assistant", content=f"Answer: {first.task.ground_truth}")
    assert first.play_turn(reply).episode == second.play_turn(reply).episode


def test_other_weights_or_other_rewards_combine_anew() -> None:
    rewards = {"answer": answer_match, "efficiency": tool_efficiency}
    base = ToolsEnv(episode_rewards=rewards, episode_weights={"answer": 1.0, "efficiency": 0.0})
    reweighed = ToolsEnv(
        episode_rewards=rewards, episode_weights={"answer": 1.0, "efficiency": 1.0}
    )
    assert base._episode_reward is not reweighed._episode_reward
    assert base._episode_reward.__wrapped__ is not None

    @reward_function
    def always_half(messages: list[Message], **kwargs: Any) -> EvaluateResult:
        return EvaluateResult(score=0.5)

    other = ToolsEnv(episode_rewards={"answer": always_half, "efficiency": tool_efficiency},
                     episode_weights={"answer": 1.0, "efficiency": 0.0})  # fmt: skip
    assert other._episode_reward is not base._episode_reward
    other.reset(seed=3)
    reply = Message(role="assistant", content="Answer: whatever")
    episode = other.play_turn(reply).episode
    assert episode is not None and episode.metrics["answer"].score == 0.5


def test_rewards_named_by_a_string_are_resolved_for_each_environment() -> None:
    # A registry entry may make a fresh object each time: not shared.
    first = ToolsEnv(episode_rewards={"format": "format"})
    second = ToolsEnv(episode_rewards={"format": "format"})
    assert first._episode_reward is not second._episode_reward
