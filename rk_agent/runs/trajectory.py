"""Trajectories: the on-disk record of one episode (one line of ``trajectories.jsonl``).

Main names: `Trajectory`, `Turn`, `ToolCallOutcome`, `Failure`.

A trajectory holds the task and its seed, what the model was sent before its first turn when the
environment's reset changed the task's messages (``opening``), every turn (the assistant message,
what the environment answered, tool outcomes, the step reward and its metrics, tokens and log-probs
when the backend gave them, latency, usage), the episode `EvaluateResult`, why it stopped
(`StopReason`) and, when it failed, a typed `Failure`. The full conversation, as the model saw it,
is `Trajectory.conversation`; the opening it was sent, `Trajectory.opening_messages`.

**The episode's return** is `Trajectory.episode_return` (an `EpisodeReturn`; its number,
``total_reward``, is written with the line): the episode score plus the step rewards, or no
number at all when the episode has no score, its score is invalid or any step reward is invalid
(`EpisodeReturn` holds the rule and `ScoreFault` says why). No reader sums rewards itself: the
run summary and the watch, rescoring, SFT's ranking, GRPO's reward functions and
``check_env`` all read it, so they agree on every episode.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, computed_field, field_validator

from rk_agent.envs.task import Task
from rk_agent.policies.policy import Usage
from rk_agent.runs.provenance import EpisodeProvenance
from rk_agent.types import (
    EpisodeReturn,
    EvaluateResult,
    FailureKind,
    FailureSite,
    Message,
    MetricResult,
    ScoreFault,
    StopReason,
)

__all__ = ["Failure", "ToolCallOutcome", "Trajectory", "Turn"]


class ToolCallOutcome(BaseModel):
    """How one tool call went (the call itself is in the assistant message)."""

    name: str
    ok: bool
    error_kind: str | None = None
    latency_s: float = 0.0


class Turn(BaseModel):
    """One assistant turn and the environment's answer to it.

    Attributes:
        index: 0-based turn number.
        assistant: what the model said (text and/or tool calls).
        environment: what came back: tool results, feedback, or nothing on the last turn.
        tool_calls: the outcome of each tool call.
        reward: the step reward.
        reward_valid: whether the step reward could be computed.
        reward_fault: why it could not, when it could not (``None`` on an older line: then
            `ScoreFault.INVALID`); ``NON_FINITE``: it came out NaN or infinite.
        metrics: the step reward's components.
        parse_error: set when the model's tool call could not be parsed.
        prompt_token_ids, token_ids, logprobs: from the backend, when it gives them.
        usage: token counts of this turn's generation.
        finish_reason: the backend's finish reason.
        model_latency_s: time spent waiting for the model (retries included).
        env_latency_s: time spent in the environment (tools, feedback, rewards).
        copied_from: the episode this turn was copied from (``RUN::ID``), when a fork started
            with it (`rk_agent.rollouts.fork`): another policy played it; ``None``: played in
            this episode.
    """

    index: int
    assistant: Message
    environment: list[Message] = Field(default_factory=list)
    tool_calls: list[ToolCallOutcome] = Field(default_factory=list)
    reward: float = 0.0
    reward_valid: bool = True
    reward_fault: ScoreFault | None = None
    metrics: dict[str, MetricResult] = Field(default_factory=dict)
    parse_error: str | None = None
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    model_latency_s: float = 0.0
    env_latency_s: float = 0.0
    copied_from: str | None = None

    @property
    def parse_feedback(self) -> str | None:
        """What the model was shown after this turn's ``parse_error`` (the environment's
        message), or ``None`` when the reply was used. A replayed or forked turn shows it again
        (``ChatEnv.reject_turn(feedback=...)``): the format that read the reply was the
        policy's, and the turn does not record which it was."""
        if self.parse_error is None or not self.environment:
            return None
        return self.environment[0].text


class Failure(BaseModel):
    """What went wrong, when an episode did not end normally.

    Attributes:
        kind: the category. Files written before ``env_error`` existed say ``tool_error`` for
            an environment crash; they load as `FailureKind.ENV_ERROR`.
        message: the error, as the failing part reported it (never containing API keys).
        where: the part that failed: ``"policy"``, ``"environment"`` or ``"engine"``.
        retryable: whether running the episode again may succeed.
    """

    kind: FailureKind
    message: str
    where: FailureSite
    retryable: bool = False

    @field_validator("kind", mode="after")
    @classmethod
    def _legacy_kind(cls, kind: FailureKind) -> FailureKind:
        # Only an environment crash was ever written as tool_error (tool errors are not failures).
        return FailureKind.ENV_ERROR if kind is FailureKind.TOOL_ERROR else kind


class Trajectory(BaseModel):
    """One episode, as written to ``trajectories.jsonl``.

    Attributes:
        id: ``"<task index>-<sample>"``, unique within a run; a training run's episodes say
            their step too: ``"s<step>-<task index>-<sample>"``
            (`rk_agent.trainers.episode_names`).
        task_index: which task of the run (0-based); samples of one task form a GRPO group
            (in a training run, with the same step).
        sample: which sample of its task (0 .. group_size - 1).
        seed: the seed the environment was reset with.
        task: the task played.
        opening: the messages the model was sent before its first turn, when the environment's
            reset made them other than the task's (the ``tools`` environment adds its system
            prompt to a task that has none); ``None``: the task's messages, as they were.
            Read `opening_messages`, which falls back to the task's.
        env: the environment's name; model: the policy's name.
        turns: every turn, in order.
        episode: the episode's `EvaluateResult` (``None`` when a failure prevented scoring).
        total_reward: the episode's return, ``episode_return.value``: the episode score plus
            the step rewards, ``None`` (left out of the line) when the score is missing or
            invalid or a step reward is invalid. Computed from ``turns`` and ``episode``, never
            stored apart from them (a value given to the constructor is ignored).
        success: whether the episode counts as solved (the environment's rule).
        stop_reason: why it ended.
        failure: what failed, if anything.
        usage: token counts over all turns.
        wall_time_s: the episode's wall time.
        attempt: 1 for the first try, more when the failure policy retried it.
        provenance: what the model saw in this episode where it differs from the run's
            ``provenance.json`` (`rk_agent.runs.provenance`); ``None``: the same, or not
            recorded (episodes played outside a rollout run).
    """

    id: str
    task_index: int
    sample: int
    seed: int | None = None
    task: Task
    opening: list[Message] | None = None
    env: str
    model: str
    turns: list[Turn] = Field(default_factory=list)
    episode: EvaluateResult | None = None
    success: bool | None = None
    stop_reason: StopReason
    failure: Failure | None = None
    usage: Usage = Field(default_factory=Usage)
    wall_time_s: float = 0.0
    attempt: int = 1
    metadata: dict[str, Any] = Field(default_factory=dict)
    provenance: EpisodeProvenance | None = None

    @property
    def opening_messages(self) -> list[Message]:
        """What the model was sent before its first turn: ``opening``, else the task's messages.

        Every reader that renders the episode's prompt (token drift, SFT, replay, the viewer)
        starts here, not at ``task.messages``.
        """
        return list(self.task.messages if self.opening is None else self.opening)

    def offered_tools(self, turn: int, default: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tool schemas the model was offered on turn ``turn``: what the episode recorded
        (`EpisodeProvenance.tools_at`: its first turn's tools and each change up to ``turn``),
        else ``default`` (the run's, or the environment's)."""
        seen = self.provenance
        return seen.tools_at(turn, default) if seen is not None else default

    @property
    def conversation(self) -> list[Message]:
        """The whole conversation as the model saw it: `opening_messages`, then every turn's
        messages."""
        messages = self.opening_messages
        for turn in self.turns:
            messages.append(turn.assistant)
            messages.extend(turn.environment)
        return messages

    @property
    def episode_return(self) -> EpisodeReturn:
        """The episode's return, by `EpisodeReturn`'s rule (module docstring): every reader of
        an episode's return reads it here."""
        return EpisodeReturn.of(
            self.episode, ((t.reward, t.reward_valid, t.reward_fault) for t in self.turns)
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_reward(self) -> float | None:
        """``episode_return.value``: the return's number, ``None`` when it has none."""
        return self.episode_return.value

    @property
    def episode_reward(self) -> float | None:
        """The episode score, or ``None`` when it is missing or invalid."""
        if self.episode is None or not self.episode.is_score_valid:
            return None
        return self.episode.score
