"""The ``guess`` environment: find a secret number from "higher" / "lower" feedback.

The purest multi-turn case: every reply is one guess and every guess gets feedback. The secret is
a whole number in ``[1, high]``; by default ``high`` is drawn per task between 10 and 1000 (or
fixed with ``high=``), and the secret with it, both from the seed.

Rewards:
    step ``guess``: `guess_step_reward`, -0.1 for a reply that holds no valid guess (no whole
        number, or one outside ``[1, high]``), 0 otherwise; metrics ``valid`` and ``consistent``
        (the guess lies inside the range the feedback so far allows).
    episode ``solved``: `guess_solved_reward`, 0 when the secret was not found, otherwise
        ``min(1, optimal / guesses)`` where ``optimal = ceil(log2(high + 1))`` is what binary
        search needs at worst: fewer guesses, higher reward.

The episode ends when the secret is guessed (``max_turns``, 12 by default, truncates it).

JSONL tasks: ``{"prompt": "...", "ground_truth": 37, "high": 100}`` (``high`` defaults to 100).

Main names: `GuessEnv`, `solve` (the reference solver: binary search), `parse_guess`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from rk_agent.envs._template import ensure_system_prompt
from rk_agent.envs.base import ChatEnv, EpisodeState
from rk_agent.envs.task import Task
from rk_agent.errors import ConfigError
from rk_agent.rewards.decorator import reward_function
from rk_agent.rewards.registry import RewardLike
from rk_agent.types import EvaluateResult, Message, MetricResult

__all__ = ["GuessEnv", "guess_solved_reward", "guess_step_reward", "parse_guess", "solve"]

SYSTEM_PROMPT = (
    "We are playing a number-guessing game. I have picked a secret whole number, and I will "
    "tell you its range. Reply with one guess per turn: just the number, nothing else. After "
    "each guess I say 'Higher' (the secret is larger) or 'Lower' (it is smaller). Find the "
    "secret in as few guesses as you can."
)
INVALID_PENALTY = 0.1
"""Step penalty for a reply that holds no valid guess."""

_DEFAULT_HIGH = 100
_INTEGER = re.compile(r"(?<![\w.])-?\d+(?![\w.]*\d)")
_RANGE = re.compile(r"between 1 and (\d+)")


def parse_guess(text: str) -> int | None:
    """The guess in a reply: its last whole number, or ``None``.

    Example:
        >>> parse_guess("My guess is 42."), parse_guess("no idea")
        (42, None)
    """
    found = _INTEGER.findall(text.replace(",", ""))
    return int(found[-1]) if found else None


def _high(metadata: Mapping[str, Any] | None) -> int:
    return int((metadata or {}).get("high", _DEFAULT_HIGH))


def _allowed_ranges(
    messages: Sequence[Message], high: int, secret: int | None
) -> list[tuple[int | None, int, int]]:
    """(guess, low, top) per reply, ``[low, top]`` being what the feedback before it allows."""
    out = []
    low, top = 1, high
    for message in messages:
        if message.role != "assistant":
            continue
        guess = parse_guess(message.text)
        if guess is not None and not 1 <= guess <= high:
            guess = None
        out.append((guess, low, top))
        if guess is not None and secret is not None:
            if guess < secret:
                low = max(low, guess + 1)
            elif guess > secret:
                top = min(top, guess - 1)
    return out


@reward_function(name="guess_step", description="-0.1 for a reply with no valid guess, else 0")
def guess_step_reward(
    messages: list[Message], ground_truth: Any = None, metadata: dict[str, Any] | None = None
) -> EvaluateResult:
    """Score the latest reply of a guessing game: -0.1 when it holds no valid guess."""
    secret = int(ground_truth) if ground_truth is not None else None
    rounds = _allowed_ranges(messages, _high(metadata), secret)
    if not rounds:
        return EvaluateResult.invalid("guess_step scores the last reply, but there is none")
    guess, low, top = rounds[-1]
    valid = guess is not None
    consistent = valid and low <= guess <= top  # type: ignore[operator]
    return EvaluateResult(
        score=0.0 if valid else -INVALID_PENALTY,
        reason=f"guess {guess}, allowed {low}..{top}" if valid else "no valid guess",
        metrics={
            "valid": MetricResult(score=float(valid), success=valid),
            "consistent": MetricResult(score=float(consistent), success=consistent),
        },
    )


@reward_function(
    name="guess_solved", description="min(1, optimal / guesses) when the secret was found, else 0"
)
def guess_solved_reward(
    messages: list[Message], ground_truth: Any = None, metadata: dict[str, Any] | None = None
) -> EvaluateResult:
    """Score a whole guessing game: found the secret, and in how few guesses."""
    if ground_truth is None:
        return EvaluateResult.invalid("guess_solved needs the secret as ground_truth")
    secret, high = int(ground_truth), _high(metadata)
    rounds = _allowed_ranges(messages, high, secret)
    guesses = [g for g, _, _ in rounds if g is not None]
    solved = secret in guesses
    used = guesses.index(secret) + 1 if solved else len(guesses)
    optimal = math.ceil(math.log2(high + 1))
    score = min(1.0, optimal / used) if solved else 0.0
    reason = (
        f"found {secret} in {used} guesses (binary search needs at most {optimal})"
        if solved
        else f"did not find {secret} in {used} guesses"
    )
    return EvaluateResult(
        score=score,
        reason=reason,
        metrics={
            "solved": MetricResult(score=float(solved), success=solved),
            "guesses": MetricResult(score=float(used)),
            "invalid_replies": MetricResult(score=float(len(rounds) - len(guesses))),
        },
    )


def solve(messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None) -> Message:
    """The reference solver: binary search over the range the feedback allows.

    Example:
        >>> solve([Message(role="user", content="... between 1 and 100 ...")]).text
        '50'
    """
    messages = Message.coerce_list(messages)
    low, top = 1, _DEFAULT_HIGH
    for message in messages:
        found = _RANGE.search(message.text) if message.role == "user" else None
        if found:
            top = int(found.group(1))
            break
    last_guess: int | None = None
    for message in messages:
        if message.role == "assistant":
            last_guess = parse_guess(message.text)
        elif message.role == "user" and last_guess is not None:
            if message.text.startswith("Higher"):
                low = max(low, last_guess + 1)
            elif message.text.startswith("Lower"):
                top = min(top, last_guess - 1)
            last_guess = None
    return Message(role="assistant", content=str((low + top) // 2))


class GuessEnv(ChatEnv):
    """Guess a secret number in as few turns as possible, with higher/lower feedback.

    Args:
        high: fix the range to ``[1, high]`` (default: drawn per task between 10 and 1000).
        **kwargs: see `ChatEnv`.

    Raises:
        ConfigError: ``high`` is below 2.

    Example:
        >>> env = GuessEnv(high=100)
        >>> _ = env.reset(seed=0)
        >>> _, reward, terminated, _, _ = env.step({"role": "assistant", "content": "50"})
        >>> env.state.messages[-1].text in ("Higher.", "Lower."), terminated
        (True, False)
    """

    default_max_turns: ClassVar[int] = 12
    inline_steps = True  # its steps are quick, pure Python: they never block (ChatEnv)
    default_episode_rewards: ClassVar[Mapping[str, RewardLike]] = {"solved": guess_solved_reward}
    default_step_rewards: ClassVar[Mapping[str, RewardLike]] = {"guess": guess_step_reward}
    reference_solver = staticmethod(solve)
    env_name: ClassVar[str] = "guess"

    def __init__(self, *, high: int | None = None, **kwargs: Any) -> None:
        if high is not None and high < 2:
            raise ConfigError(f"high must be at least 2, got {high}.")
        self.high = high
        super().__init__(**kwargs)

    def is_success(self, episode: EvaluateResult) -> bool:
        """Solved means the secret was found, in any number of guesses (for pass@k)."""
        solved = episode.metrics.get("solved.solved")
        if solved is None or not episode.is_score_valid:
            return super().is_success(episode)
        return solved.score >= 1.0

    def generate_task(self, rng: np.random.Generator) -> Task:
        """A random range (unless fixed) and a random secret in it."""
        high = self.high if self.high is not None else int(rng.integers(10, 1001))
        secret = int(rng.integers(1, high + 1))
        return Task(
            id=f"guess-{high}-{secret}",
            messages=[
                Message(role="system", content=SYSTEM_PROMPT),
                Message(role="user", content=f"The secret is between 1 and {high}. Your guess?"),
            ],
            ground_truth=secret,
            metadata={"high": high},
        )

    def on_reset(self, state: EpisodeState) -> None:
        """Add the system prompt to dataset tasks that have none."""
        ensure_system_prompt(state, SYSTEM_PROMPT)

    def respond(self, action: Message, state: EpisodeState) -> list[Message] | None:
        """``None`` (the end) on the secret, else "Higher." / "Lower." or how to reply."""
        high, secret = _high(state.task.metadata), int(state.task.ground_truth)
        guess = parse_guess(action.text)
        if guess is None or not 1 <= guess <= high:
            got = "no whole number" if guess is None else f"{guess}, outside the range"
            text = f"Reply with just one whole number between 1 and {high} (got {got})."
        elif guess == secret:
            return None
        else:
            text = "Higher." if guess < secret else "Lower."
        return [Message(role="user", content=text)]
