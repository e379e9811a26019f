"""One episode as the episode page lays it out: turns, tool calls linked to their results.

`episode_view` turns a `Trajectory` into plain data the template draws: the opening the model
was sent (the task's messages, or what the environment's reset made of them), then each turn's
assistant text and tool calls (arguments pretty-printed when they are JSON), the environment's
answers (a tool result linked to the call it answers, both ways, by the call's id; long ones
marked to be folded), the step reward and its components, and the episode reward with its
components and reasons. Where the run recorded token ids (a policy that generates from ids:
`rk_agent.runs.token_drift`), each turn carries its prompt's and its reply's ids, and the
turns whose re-tokenized conversation differs from them their `TurnDrift` (checked by the
caller, with the run's tokenizer). Everything here is text; the template escapes it.

Main names: `episode_view`, `EpisodeView`, `TurnView`, `CallView`, `MessageView`, `ScoreView`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rk_agent.runs.trajectory import Trajectory, Turn
from rk_agent.types import MetricResult

if TYPE_CHECKING:
    from rk_agent.runs.token_drift import TurnDrift

__all__ = ["CallView", "EpisodeView", "MessageView", "ScoreView", "TurnView", "episode_view"]

FOLD_CHARS = 600
"""A message longer than this (or than `FOLD_LINES` lines) is folded in ``<details>``."""
FOLD_LINES = 12


@dataclass(frozen=True)
class ScoreView:
    """A reward component: its name, score, verdict and reason."""

    name: str
    score: float
    success: bool | None
    valid: bool
    reason: str


@dataclass
class CallView:
    """A tool call: ``anchor`` names it on the page, ``result`` the anchor of its answer."""

    anchor: str
    id: str
    name: str
    arguments: str
    result: str | None = None
    ok: bool | None = None
    error_kind: str | None = None


@dataclass
class MessageView:
    """A message shown as text; ``call`` is the anchor of the tool call it answers."""

    anchor: str
    role: str
    name: str
    text: str
    folded: bool
    call: str | None = None


@dataclass
class TurnView:
    """One turn: what the assistant said and called, what came back, and its reward."""

    index: int
    text: str
    reasoning: str
    calls: list[CallView]
    environment: list[MessageView]
    reward: float
    reward_valid: bool
    components: list[ScoreView]
    parse_error: str | None
    finish_reason: str | None
    prompt_ids: list[int] | None = None
    token_ids: list[int] | None = None
    drift: TurnDrift | None = None


@dataclass
class EpisodeView:
    """The episode page's content (module docstring).

    Attributes:
        has_ids: some turn recorded its generated token ids.
        drift_note: how the ids were checked for drift, or why they were not.
    """

    trajectory: Trajectory
    task: list[MessageView]
    turns: list[TurnView]
    score: float | None
    score_valid: bool
    reason: str
    components: list[ScoreView] = field(default_factory=list)
    has_ids: bool = False
    drift_note: str = ""


def episode_view(
    trajectory: Trajectory,
    drifts: Mapping[int, TurnDrift] | None = None,
    drift_note: str = "",
) -> EpisodeView:
    """Lay out one episode for its page (module docstring).

    Args:
        trajectory: the episode.
        drifts: the drifted turns by turn index, when its ids were checked.
        drift_note: how they were checked, or why they were not.

    Example:
        >>> view = episode_view(trajectory)  # doctest: +SKIP
        >>> [call.name for turn in view.turns for call in turn.calls]  # doctest: +SKIP
        ['calculator', 'add_days']
    """
    task = [
        _message(f"task-{i}", m.role, m.name or "", m.text)
        for i, m in enumerate(trajectory.opening_messages)
    ]
    turns = [_turn(turn_index, turn) for turn_index, turn in enumerate(trajectory.turns)]
    for view in turns:
        view.drift = (drifts or {}).get(view.index)
    episode = trajectory.episode
    return EpisodeView(
        trajectory=trajectory,
        task=task,
        turns=turns,
        score=None if episode is None else episode.score,
        score_valid=episode is not None and episode.is_score_valid,
        reason="" if episode is None else (episode.reason or episode.error or ""),
        components=[] if episode is None else _scores(episode.metrics),
        has_ids=any(turn.token_ids for turn in trajectory.turns),
        drift_note=drift_note,
    )


def _turn(position: int, turn: Turn) -> TurnView:
    calls: list[CallView] = []
    by_id: dict[str, CallView] = {}
    for i, call in enumerate(turn.assistant.tool_calls or []):
        view = CallView(
            anchor=f"t{position}-call{i}",
            id=call.id,
            name=call.function.name,
            arguments=_pretty(call.function.arguments),
        )
        if i < len(turn.tool_calls):
            outcome = turn.tool_calls[i]
            view.ok, view.error_kind = outcome.ok, outcome.error_kind
        calls.append(view)
        by_id.setdefault(call.id, view)
    environment = []
    for j, message in enumerate(turn.environment):
        anchor = f"t{position}-result{j}"
        view_message = _message(anchor, message.role, message.name or "", message.text)
        answered = by_id.get(message.tool_call_id or "")
        if answered is not None:
            view_message.call = answered.anchor
            answered.result = answered.result or view_message.anchor
        environment.append(view_message)
    return TurnView(
        index=turn.index,
        text=turn.assistant.text,
        reasoning=turn.assistant.reasoning_content or "",
        calls=calls,
        environment=environment,
        reward=turn.reward,
        reward_valid=turn.reward_valid,
        components=_scores(turn.metrics),
        parse_error=turn.parse_error,
        finish_reason=turn.finish_reason,
        prompt_ids=turn.prompt_token_ids,
        token_ids=turn.token_ids,
    )


def _message(anchor: str, role: str, name: str, text: str) -> MessageView:
    folded = len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES
    return MessageView(anchor=anchor, role=role, name=name, text=text, folded=folded)


def _scores(metrics: dict[str, MetricResult]) -> list[ScoreView]:
    return [
        ScoreView(
            name=name,
            score=m.score,
            success=m.success,
            valid=m.is_score_valid,
            reason=m.reason or "",
        )
        for name, m in metrics.items()
    ]


def _pretty(arguments: str) -> str:
    """Tool-call arguments, indented when they are a JSON object (as the model wrote them
    otherwise)."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    return json.dumps(parsed, indent=2, ensure_ascii=False)
