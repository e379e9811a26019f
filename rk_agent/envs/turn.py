"""`TurnResult`: what one assistant turn did to an environment, as typed data.

This is the contract between an environment and every loop that plays it: the rollout engine
(`rk_agent.rollouts.episode`), TRL's tool loop (`rk_agent.trainers.trl_tool_env`) and
`rk_agent.envs.check`. ``ChatEnv.play_turn`` and ``ChatEnv.reject_turn`` return one; Gymnasium's
``step`` wraps it, and its ``info`` dictionary (`TurnResult.info`) keeps the keys users' code
reads (``step``, ``tool_calls``, ``episode``, ``stop_reason``).

Main names: `TurnResult`, `ToolCallRecord`.

Example:
    >>> from rk_agent.envs.guess_env import GuessEnv
    >>> env = GuessEnv(high=10)
    >>> _ = env.reset(seed=0)
    >>> result = env.play_turn({"role": "assistant", "content": "5"})
    >>> result.messages[0].role, result.done, result.episode is None
    ('user', False, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rk_agent.envs.tool import ToolResult
from rk_agent.types import EvaluateResult, Message, StopReason, ToolCall

__all__ = ["ToolCallRecord", "TurnResult"]


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call of a step and its result."""

    call: ToolCall
    result: ToolResult


@dataclass(frozen=True)
class TurnResult:
    """What one assistant turn did: the environment's answer, the step's score, how it ended.

    Attributes:
        messages: what the environment added after the assistant message: one ``tool`` message
            per tool call, its feedback, or nothing when the reply ended the episode.
        step: the step's `EvaluateResult` (step rewards plus the ``tool_calls``,
            ``tool_success`` and ``parse_error`` metrics).
        tool_calls: one `ToolCallRecord` per tool call, in order.
        terminated: the episode ended normally (an answer, or the environment ended it).
        truncated: the episode reached ``max_turns`` instead.
        episode: the episode's `EvaluateResult`, on the turn that ended the episode.
        stop_reason: why the episode ended, on that same turn.
        parse_error: why the reply could not be used, when it was rejected
            (``ChatEnv.reject_turn``).
    """

    messages: tuple[Message, ...]
    step: EvaluateResult
    tool_calls: tuple[ToolCallRecord, ...] = ()
    terminated: bool = False
    truncated: bool = False
    episode: EvaluateResult | None = None
    stop_reason: StopReason | None = None
    parse_error: str | None = None

    @property
    def done(self) -> bool:
        """Whether the episode is over (terminated or truncated)."""
        return self.terminated or self.truncated

    @property
    def reward(self) -> float:
        """The step's score, plus the episode's on the last turn: Gymnasium's number for the
        step (an invalid score counts 0 here; the episode's return, `EpisodeReturn`, has no
        number then)."""
        reward = self.step.score if self.step.is_score_valid else 0.0
        if self.episode is not None and self.episode.is_score_valid:
            reward += self.episode.score
        return reward

    def info(self) -> dict[str, Any]:
        """The ``info`` dictionary Gymnasium's ``step`` returns.

        ``step`` and ``tool_calls`` (a list) always; ``episode`` and ``stop_reason`` when the
        episode ended on this turn.
        """
        info: dict[str, Any] = {"step": self.step, "tool_calls": list(self.tool_calls)}
        if self.episode is not None:
            info["episode"] = self.episode
        if self.stop_reason is not None:
            info["stop_reason"] = self.stop_reason
        return info
