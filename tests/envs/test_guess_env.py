"""The ``guess`` environment: feedback at every step, fewer guesses score higher."""

from __future__ import annotations

import re

import pytest

from rk_agent.envs import play_with_solver
from rk_agent.envs.guess_env import GuessEnv, parse_guess, solve
from rk_agent.errors import ConfigError

TASK = {"id": "g", "messages": [{"role": "user", "content": "Between 1 and 100."}],
        "ground_truth": 37, "metadata": {"high": 100}}  # fmt: skip


def guess(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def test_higher_lower_and_found() -> None:
    env = GuessEnv()
    env.reset(options={"task": TASK})
    _, reward, terminated, _, info = env.step(guess("50"))
    assert env.state.messages[-1].text == "Lower." and not terminated and reward == 0.0
    assert info["step"].metrics["guess.consistent"].score == 1.0
    env.step(guess("I will try 20"))
    assert env.state.messages[-1].text == "Higher."
    _, reward, terminated, _, info = env.step(guess("60"))  # allowed range is 21..49 now
    assert info["step"].metrics["guess.consistent"].score == 0.0
    _, reward, terminated, _, info = env.step(guess("37"))
    assert terminated
    episode = info["episode"]
    assert episode.metrics["solved.guesses"].score == 4.0
    assert episode.score == pytest.approx(min(1.0, 7 / 4))


def test_invalid_replies_get_feedback_and_a_penalty() -> None:
    env = GuessEnv()
    env.reset(options={"task": TASK})
    _, reward, terminated, _, _ = env.step(guess("I have no idea"))
    assert not terminated and reward == pytest.approx(-0.1)
    message = "Reply with just one whole number between 1 and 100 (got no whole number)."
    assert env.state.messages[-1].text == message
    _, reward, _, _, _ = env.step(guess("500"))
    assert reward == pytest.approx(-0.1)
    assert "(got 500, outside the range)" in env.state.messages[-1].text


def test_fewer_guesses_score_higher() -> None:
    def scripted(guesses: list[int]) -> float:
        env = GuessEnv(max_turns=20)
        env.reset(options={"task": TASK})
        info: dict = {}
        for g in guesses:
            *_, info = env.step(guess(str(g)))
        return float(info["episode"].score)

    slow = scripted(list(range(26, 38)))  # 12 guesses
    fast = scripted([50, 25, 37])
    assert fast == 1.0 and 0 < slow < fast


def test_found_in_many_guesses_still_counts_as_success() -> None:
    env = GuessEnv(max_turns=20)
    env.reset(options={"task": TASK})
    info: dict = {}
    for g in range(30, 38):
        *_, info = env.step(guess(str(g)))
    assert info["episode"].score < 1.0 and env.is_success(info["episode"])


def test_not_found_scores_zero() -> None:
    env = GuessEnv(max_turns=2)
    env.reset(options={"task": TASK})
    env.step(guess("1"))
    _, _, terminated, truncated, info = env.step(guess("2"))
    assert truncated and not terminated and info["episode"].score == 0.0


def test_binary_search_solver_is_within_the_bound() -> None:
    env = GuessEnv()
    for seed in range(20):
        played = play_with_solver(env, solve, seed=seed)
        assert played.terminated and played.episode is not None and played.episode.score == 1.0


def test_fixed_range() -> None:
    env = GuessEnv(high=10)
    assert {env.reset(seed=s)[1]["task"].metadata["high"] for s in range(20)} == {10}
    with pytest.raises(ConfigError, match=re.escape("high must be at least 2, got 1.")):
        GuessEnv(high=1)


@pytest.mark.parametrize(
    ("text", "value"),
    [("42", 42), ("My guess: 42.", 42), ("3.5", None), ("between 10 and 20? 15", 15), ("", None)],
)
def test_parse_guess(text: str, value: int | None) -> None:
    assert parse_guess(text) == value
