"""The ``math`` environment: one answer, or retries with feedback."""

from __future__ import annotations

import re

import pytest

from rk_agent.envs import make_env, play_with_solver
from rk_agent.envs.math_env import MathEnv, solve
from rk_agent.errors import ConfigError
from rk_agent.types import StopReason

WRONG = {"role": "assistant", "content": "So the answer is\n#### -999"}


def test_one_answer_ends_the_episode_by_default() -> None:
    env = MathEnv()
    env.reset(seed=4)
    _, reward, terminated, truncated, info = env.step(WRONG)
    assert terminated and not truncated and reward == 0.0
    assert info["stop_reason"] is StopReason.ANSWERED
    assert info["episode"].metrics["correct.correct"].score == 0.0


def test_retries_give_feedback_then_end() -> None:
    env = make_env("math", retries=2)
    assert env.max_turns == 3
    _, info = env.reset(seed=4)
    truth = info["task"].ground_truth
    _, _, terminated, _, _ = env.step(WRONG)
    assert not terminated
    assert env.state.messages[-1].text.startswith("That is not correct, try again.")
    assert "(2 tries left.)" in env.state.messages[-1].text
    _, _, terminated, _, _ = env.step(WRONG)
    assert not terminated and "(1 try left.)" in env.state.messages[-1].text
    _, reward, terminated, truncated, info = env.step(
        {"role": "assistant", "content": f"#### {truth}"}
    )
    assert terminated and not truncated and reward == 1.0
    assert info["episode"].score == 1.0


def test_a_right_answer_ends_at_once_even_with_retries() -> None:
    env = MathEnv(retries=3)
    played = play_with_solver(env, solve, seed=9)
    assert played.terminated and len(played.rewards) == 1 and played.episode is not None
    assert played.episode.score == 1.0


def test_retries_spent_ends_with_the_last_answer() -> None:
    env = MathEnv(retries=1)
    env.reset(seed=4)
    env.step(WRONG)
    _, _, terminated, _, info = env.step(WRONG)
    assert terminated and info["episode"].score == 0.0


def test_negative_retries_are_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape("retries must be 0 or more, got -1.")):
        MathEnv(retries=-1)


def test_gsm8k_style_dataset_rows() -> None:
    env = MathEnv(tasks=[])  # an empty list means "generate"
    assert env.dataset is None
    task = {"id": "g1", "messages": [{"role": "user", "content": "What is 6 times 7?"}],
            "ground_truth": "6 * 7 = 42\n#### 42"}  # fmt: skip
    env.reset(options={"task": task})
    _, reward, terminated, _, _ = env.step({"role": "assistant", "content": "#### 42"})
    assert terminated and reward == 1.0
