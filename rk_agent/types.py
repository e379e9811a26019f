"""The wire formats: chat messages and reward results, as pydantic v2 models.

Main names:
    Message, ToolCall, FunctionCall: OpenAI chat-completions messages.
    MetricResult: one named component of a reward.
    StepOutput: the reward of one step of a multi-turn episode.
    StopReason, FailureKind, FailureSite: why an episode ended, what failed, and where.
    RunStatus: where a rollout or training run stands.
    EvaluateResult: what every reward function returns.
    RewardOutput, MetricRewardOutput: older names of EvaluateResult and MetricResult.
    ScoreFault: why a score is no number to train on (missing, invalid, NaN or infinite).
    EpisodeReturn: an episode's return, by the one rule every reader of episodes uses.

Everything here round-trips through JSON (``model_dump_json`` / ``model_validate_json``). The
validators that only widen what a model accepts (SDK objects, a dict of arguments, bare-number
metrics, ``base_reward``) are marked `rk_agent.trusted_json.widening`: files rk-agent wrote are
read without them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rk_agent.trusted_json import widening

__all__ = [
    "EpisodeReturn",
    "EvaluateResult",
    "FailureKind",
    "FailureSite",
    "FunctionCall",
    "Message",
    "MetricResult",
    "MetricRewardOutput",
    "RewardOutput",
    "Role",
    "RunStatus",
    "ScoreFault",
    "StepOutput",
    "StopReason",
    "ToolCall",
]

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


def _as_plain(value: Any) -> Any:
    """Turn SDK objects (the ``openai`` package's pydantic models) into plain dicts."""
    if type(value) is dict:  # the usual case, before isinstance's ABC machinery
        return value
    if isinstance(value, BaseModel) and not isinstance(value, _RkModel):
        return value.model_dump(exclude_none=True)
    return value


class _RkModel(BaseModel):
    """Base of the wire models: accepts SDK objects wherever a dict is expected."""

    # Build validators on first use, not at import: keeps `import rk_agent` fast.
    model_config = ConfigDict(defer_build=True)

    @model_validator(mode="before")
    @classmethod
    @widening
    def _from_sdk_object(cls, data: Any) -> Any:
        # A dict (every model built with keywords) passes without a call: this runs for every
        # model built, nested ones included.
        return data if type(data) is dict else _as_plain(data)


class FunctionCall(_RkModel):
    """The function part of a tool call.

    Attributes:
        name: the function's name.
        arguments: the arguments as a JSON string, as OpenAI sends them. A dict is accepted and
            serialised; use `parsed_arguments()` to read them back.
    """

    name: str
    arguments: str = "{}"

    @field_validator("arguments", mode="before")
    @classmethod
    @widening
    def _serialise_arguments(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return json.dumps(dict(value))
        if value is None:
            return "{}"
        return value

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict.

        Raises:
            ValueError: the arguments are not a JSON object (models do send broken JSON).
        """
        parsed = json.loads(self.arguments) if self.arguments.strip() else {}
        if not isinstance(parsed, dict):
            raise ValueError(f"tool-call arguments must be a JSON object, got {self.arguments!r}")
        return parsed


class ToolCall(_RkModel):
    """One tool call made by the assistant (OpenAI ``tool_calls`` item)."""

    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_RkModel):
    """A chat message in the OpenAI chat-completions format.

    Builds from a dict or from an ``openai`` SDK message, and dumps back to the OpenAI format with
    no null fields. Unknown fields (``refusal``, provider extras) are kept.

    Example:
        >>> m = Message.model_validate({"role": "user", "content": "What is 2+2?"})
        >>> m.role, m.text
        ('user', 'What is 2+2?')
        >>> m.to_openai()
        {'role': 'user', 'content': 'What is 2+2?'}
    """

    model_config = ConfigDict(extra="allow", defer_build=True)

    role: Role
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None

    @property
    def text(self) -> str:
        """The content as plain text: text parts joined, ``""`` when there is none."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(str(part.get("text", "")) for part in self.content if isinstance(part, dict))

    def to_openai(self) -> dict[str, Any]:
        """The message as an OpenAI chat-format dict, without null fields."""
        return self.model_dump(exclude_none=True)

    @classmethod
    def coerce(cls, value: Any) -> Message:
        """Return ``value`` as a `Message` (it may be a dict, an SDK object or a `Message`)."""
        if isinstance(value, Message):
            return value
        return cls.model_validate(value)

    @classmethod
    def coerce_list(cls, values: Sequence[Any]) -> list[Message]:
        """Return a list of `Message` from a list of dicts, SDK objects or messages."""
        return [cls.coerce(value) for value in values]


class ScoreFault(str, Enum):
    """Why a score is no number to train on (`EvaluateResult.fault`, `EpisodeReturn.fault`).

    Ordered from the least to the most telling: where an episode has several, its return
    carries the last of them (a NaN step outranks an invalid episode score).
    """

    MISSING = "missing"
    """There is no score: the episode failed before it was scored."""
    INVALID = "invalid"
    """The reward could not compute it: it raised, timed out, or returned something that is
    no score."""
    NON_FINITE = "non_finite"
    """The reward's score came out NaN or infinite."""


_FAULT_RANK = {fault: rank for rank, fault in enumerate(ScoreFault)}


class MetricResult(_RkModel):
    """One named component of a reward, e.g. ``format`` or ``correctness``.

    Attributes:
        score: the component's score (usually in [0, 1]; penalties may be negative).
        success: whether the component counts as passed, when that makes sense.
        reason: a short human-readable explanation.
        is_score_valid: ``False`` when the score could not be computed.
    """

    score: float = Field(allow_inf_nan=False)
    success: bool | None = None
    reason: str | None = None
    is_score_valid: bool = True


def _metrics_from_loose(value: Any) -> Any:
    """Accept ``{name: float | bool | MetricResult | dict}`` for metrics."""
    if type(value) is dict:
        for item in value.values():
            if type(item) is not MetricResult:
                break
        else:  # every metric a MetricResult already (what rewards build): nothing to widen
            return value
    elif not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            out[key] = {"score": float(item), "success": item}
        elif isinstance(item, (int, float)):
            out[key] = {"score": float(item)}
        else:
            out[key] = item
    return out


class StepOutput(_RkModel):
    """The reward of one step (turn) of a multi-turn episode.

    Attributes:
        step_index: 0-based index of the step.
        reward: the step's reward (``base_reward`` is accepted as an older name).
        metrics: named components of the step's reward.
        reason: a short explanation.
    """

    step_index: int
    reward: float = Field(allow_inf_nan=False)
    metrics: dict[str, MetricResult] = Field(default_factory=dict)
    reason: str | None = None

    @model_validator(mode="before")
    @classmethod
    @widening
    def _accept_base_reward(cls, data: Any) -> Any:
        if type(data) is not dict:
            data = _as_plain(data)
        if isinstance(data, Mapping) and "reward" not in data and "base_reward" in data:
            data = {**data, "reward": data["base_reward"]}
        return data

    @field_validator("metrics", mode="before")
    @classmethod
    @widening
    def _loose_metrics(cls, value: Any) -> Any:
        return _metrics_from_loose(value)


class EvaluateResult(_RkModel):
    """What every reward function returns: a score plus named component metrics.

    Attributes:
        score: the overall reward.
        reason: a short explanation of the score.
        metrics: named components (``{"format": MetricResult(...), ...}``) so that reward hacking
            is visible: a high score with a failing component stands out.
        step_outputs: per-step rewards of a multi-turn episode.
        error: set when the reward could not be computed (``"ValueError: ..."``).
        is_score_valid: ``False`` when ``score`` must not be trained on. A result built with an
            ``error`` is invalid unless ``is_score_valid=True`` is passed explicitly: a reward
            written the Reward Kit way (``EvaluateResult(score=0.0, error="judge timed out")``)
            is not trained on as a real 0.0.
        weights: for combined rewards, the weight of each component.
        fault: why the score is invalid, when the reward machinery knows better than
            `ScoreFault.INVALID` (``NON_FINITE``: the reward returned NaN or infinity, whose
            ``score`` is then 0.0). A result built with a fault is invalid unless
            ``is_score_valid=True`` is passed explicitly. ``None`` on an invalid result means
            ``INVALID`` (`EpisodeReturn.fault_of`).

    Example:
        >>> r = EvaluateResult(score=0.5, metrics={"format": 1.0, "answer": 0.0})
        >>> r.metrics["format"].score
        1.0
    """

    score: float = Field(allow_inf_nan=False)
    reason: str | None = None
    metrics: dict[str, MetricResult] = Field(default_factory=dict)
    step_outputs: list[StepOutput] | None = None
    error: str | None = None
    is_score_valid: bool = True
    fault: ScoreFault | None = None
    weights: dict[str, float] | None = None

    @field_validator("metrics", mode="before")
    @classmethod
    @widening
    def _loose_metrics(cls, value: Any) -> Any:
        return _metrics_from_loose(value)

    @model_validator(mode="before")
    @classmethod
    def _an_error_is_not_a_score(cls, data: Any) -> Any:
        if (
            isinstance(data, (dict, Mapping))  # a dict (first: the fast check), any mapping
            and (data.get("error") or data.get("fault"))
            and "is_score_valid" not in data
        ):
            return {**data, "is_score_valid": False}
        return data

    @classmethod
    def invalid(
        cls, error: str, *, reason: str | None = None, fault: ScoreFault | None = None
    ) -> EvaluateResult:
        """A result that must not be trained on: score 0.0, ``is_score_valid=False`` (and
        ``fault``, when it says more than `ScoreFault.INVALID`)."""
        return cls(
            score=0.0, is_score_valid=False, error=error, reason=reason or error, fault=fault
        )

    def __getitem__(self, key: str) -> Any:
        """Dict-style access (``result["score"]``), as older reward-kit code does."""
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)


@dataclass(frozen=True, slots=True)
class EpisodeReturn:
    """An episode's return: its episode score plus the sum of its step rewards, or no number.

    The one rule (`Trajectory.episode_return` applies it to a recorded episode; every reader of
    episodes calls it: the run summary and the watch, rescoring, SFT's ranking, GRPO's reward
    functions, ``check_env``): the return is ``None`` when the episode has no score (it failed
    before it was scored), when its score is invalid, or when any step reward is invalid; an
    invalid score never counts as 0. ``fault`` says why (`ScoreFault`); a NaN or infinite score
    is `ScoreFault.NON_FINITE`, read from `EvaluateResult.fault` (``Turn.reward_fault``), never
    from an error message.

    Attributes:
        episode: the episode score, when it is valid.
        steps: the sum of the valid step rewards (what step shaping adds; a component of the
            return, also when the return itself has no number).
        fault: why the return has no number; ``None`` when it has one.

    Example:
        >>> ok = EvaluateResult(score=1.0)
        >>> EpisodeReturn.of(ok, [(0.25, True, None)]).value
        1.25
        >>> bad = EpisodeReturn.of(ok, [(0.25, True, None), (0.0, False, ScoreFault.NON_FINITE)])
        >>> bad.value, bad.fault.value, bad.steps
        (None, 'non_finite', 0.25)
    """

    episode: float | None
    steps: float = 0.0
    fault: ScoreFault | None = None

    @classmethod
    def of(
        cls,
        episode: EvaluateResult | None,
        steps: Iterable[tuple[float, bool, ScoreFault | None]] = (),
    ) -> EpisodeReturn:
        """The return of an episode scored ``episode`` whose steps were rewarded ``steps``.

        Args:
            episode: the episode's result (``None``: it failed before it was scored).
            steps: each step's ``(reward, valid, fault)``, as a turn records them
                (``Turn.reward``, ``Turn.reward_valid``, ``Turn.reward_fault``) or a step's
                `EvaluateResult` holds them (``score``, ``is_score_valid``, ``fault``).
        """
        fault = cls.fault_of(episode)
        valid: list[float] = []
        for reward, ok, why in steps:
            if ok:
                valid.append(reward)
                continue
            why = why or ScoreFault.INVALID
            if fault is None or _FAULT_RANK[why] > _FAULT_RANK[fault]:
                fault = why
        score = episode.score if episode is not None and episode.is_score_valid else None
        return cls(episode=score, steps=math.fsum(valid), fault=fault)

    @staticmethod
    def fault_of(result: EvaluateResult | None) -> ScoreFault | None:
        """Why ``result``'s score does not count: ``MISSING`` for no result, its ``fault`` (else
        ``INVALID``) when it is invalid, ``None`` when it is valid."""
        if result is None:
            return ScoreFault.MISSING
        if result.is_score_valid:
            return None
        return result.fault or ScoreFault.INVALID

    @property
    def valid(self) -> bool:
        """Whether the return has a number (no `ScoreFault`)."""
        return self.fault is None and self.episode is not None

    @property
    def value(self) -> float | None:
        """The return: the episode score plus the step rewards, ``None`` when there is none."""
        return self.weighted()

    @property
    def non_finite(self) -> bool:
        """Whether a score came out NaN or infinite (the watch's ``nan_rewards``)."""
        return self.fault is ScoreFault.NON_FINITE

    def weighted(self, episode_weight: float = 1.0, step_weight: float = 1.0) -> float | None:
        """The return with the episode score and the step rewards weighted (GRPO's
        ``reward_weights``); ``None`` when there is none."""
        if self.fault is not None or self.episode is None:
            return None
        return episode_weight * self.episode + step_weight * self.steps


RewardOutput = EvaluateResult
"""Older name of `EvaluateResult` (reward-kit launch post)."""

MetricRewardOutput = MetricResult
"""Older name of `MetricResult` (reward-kit launch post)."""


class StopReason(str, Enum):
    """Why an episode ended."""

    ANSWERED = "answered"
    """The model gave its final answer (or the environment declared the episode over)."""
    MAX_TURNS = "max_turns"
    """The episode reached its turn limit."""
    TRUNCATED = "truncated"
    """The conversation outgrew the model's context or the token budget."""
    TIMEOUT = "timeout"
    """The episode ran past its wall-time limit."""
    ERROR = "error"
    """A failure (endpoint, environment) ended the episode; see its `FailureKind`."""


class FailureKind(str, Enum):
    """What failed, when an episode did not end normally.

    A tool that raises, times out or gets bad arguments is not a failure (the model reads the
    error and the step's ``tool_success`` metric records it), and neither is a malformed tool
    call (the turn carries a ``parse_error`` and the model tries again).
    """

    MODEL_ERROR = "model_error"
    """The model endpoint failed after its retries (HTTP errors, connection, bad replies)."""
    ENV_ERROR = "env_error"
    """The environment itself raised (in ``reset``, a turn, or a tool call an outer loop ran)."""
    TIMEOUT = "timeout"
    """The episode ran past its wall-time limit."""
    CONTEXT_OVERFLOW = "context_overflow"
    """The conversation no longer fits the model's context window, or TRL's token budget ran
    out; the episode is still scored, as truncated."""
    TOOL_SERVER_ERROR = "tool_server_error"
    """A tool server (MCP) crashed and did not come back after its reconnects, or could not be
    reached. A call that was in flight when a server dropped is not a failure: the model reads
    a tool error."""
    AUTH_ERROR = "auth_error"
    """A server refused the run's credentials (HTTP 401 or 403), e.g. an MCP tool server."""
    TOOL_ERROR = "tool_error"
    """Legacy: what an environment crash was recorded as before ``env_error`` existed. Never
    written now; a ``Failure`` read from an old file with this kind holds ``ENV_ERROR``."""
    PARSE_ERROR = "parse_error"
    """Legacy: never written (a malformed reply is a turn with a ``parse_error``, not a failure
    of the episode); kept so that code naming it keeps working."""


class FailureSite(str, Enum):
    """Which part of the system a `FailureKind` came from (``Failure.where``)."""

    POLICY = "policy"
    """The model: its endpoint, its context window, its token budget."""
    ENVIRONMENT = "environment"
    """The environment: ``reset``, a turn, a tool call, its rewards."""
    ENGINE = "engine"
    """The loop around them, e.g. the episode's wall-time limit."""


class RunStatus(str, Enum):
    """Where a run stands, as its ``run.json`` says (`rk_agent.runs.run_record.RunRecord`).

    A run that is not ``running`` can be resumed (a finished one has nothing left to do).
    """

    RUNNING = "running"
    """A process is writing the run, or was killed without a word (then that process is gone)."""
    FINISHED = "finished"
    """It ran to the end."""
    INTERRUPTED = "interrupted"
    """Stopped by Ctrl-C; what finished so far is kept."""
    FAILED = "failed"
    """Stopped by an exception, whose message is recorded as ``error``."""
    STOPPED = "stopped"
    """A training run ended early by an alarm (``--stop-on-alarm``); its checkpoints are kept."""
