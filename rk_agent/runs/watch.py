"""The watch's signals: what a batch of finished GRPO groups says about the training signal.

A GRPO step learns only from the reward's spread inside each group, so a flat or rising reward
curve can hide a step that teaches nothing. `watch_signals` reads a batch of groups (one
training step's rollouts, or a whole rollout run) and computes, cheaply and without side
effects, the figures that show it: how many groups have zero reward spread (split into
all-fail and all-pass), the reward's and success's mean and spread, each reward component's
share of the reward, how many distinct final answers each group gave, completion length and
truncation, invalid and NaN rewards, and tool calls per episode. The training alarms
(`rk_agent.runs.alarms`) watch these figures from step to step; rollout summaries
(`rk_agent.runs.summary`) carry them too.

Definitions:

- **zero spread**: a group whose valid rewards are all equal (within ``1e-9``), or which has
  fewer than two valid rewards (`has_spread` tells): GRPO gives it no advantage. **All-fail** /
  **all-pass**: such a group where every episode with a verdict failed / succeeded (and at
  least one has a verdict).
- **component share**: a component's mean absolute contribution to the reward (its weight times
  its score) over the sum of every component's; ``step_rewards`` is the weighted sum of the
  per-step rewards. The **outcome** components are the episode reward's components with the
  largest weight (``answer`` in the ``tools`` env): the ones the reward is meant to be about.
- **final answer**: the text of an episode's last assistant message, stripped, lower-cased and
  with its whitespace collapsed; an episode that ended on a tool call has none.
- **truncated**: a reply was cut by a token limit (finish reason ``length``), the episode ran
  out of its token budget, or it stopped as truncated.
- **invalid reward**: the episode's return has no number (`Trajectory.episode_return`: the
  score is missing or invalid, or a step reward is invalid; TRL leaves it out); **NaN reward**:
  a score that came out NaN or infinite (`ScoreFault.NON_FINITE`; counted among the invalid
  ones).

Main names: `EpisodeOutcome`, `WatchSignals`, `watch_signals` (`WatchCounter` the same one group
at a time), `has_spread`, `outcome_of`, `trajectory_groups`, `final_answer`.

Example:
    >>> ok = EpisodeOutcome(reward=1.0, success=True, components={"answer": 1.0})
    >>> bad = EpisodeOutcome(reward=0.0, success=False, components={"answer": 0.0})
    >>> signals = watch_signals([[ok, bad], [bad, bad]])
    >>> signals.zero_spread, signals.zero_spread_all_fail, signals.reward_mean
    (0.5, 0.5, 0.25)
"""

from __future__ import annotations

import math
from array import array
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from rk_agent.runs.trajectory import Trajectory
from rk_agent.types import StopReason

__all__ = [
    "STEP_REWARDS",
    "EpisodeOutcome",
    "WatchCounter",
    "WatchSignals",
    "final_answer",
    "has_spread",
    "outcome_of",
    "trajectory_groups",
    "watch_signals",
]

STEP_REWARDS = "step_rewards"
"""The component name of the (weighted) sum of an episode's per-step rewards."""

_EQUAL = 1e-9


@dataclass(frozen=True)
class EpisodeOutcome:
    """What the watch needs of one finished episode (or one single-turn completion).

    Attributes:
        reward: the reward trained on; ``None`` when invalid (missing, NaN, infinite).
        nan: the reward came out NaN or infinite.
        success: the environment's verdict, ``None`` without one.
        components: each component's weighted contribution to the reward, by name.
        outcome: the names of the outcome components (module docstring).
        answer: the final answer (`final_answer`), ``None`` without one.
        completion_tokens: the model's tokens in the episode.
        truncated: cut by a token limit.
        tool_calls: tool calls made.
    """

    reward: float | None
    success: bool | None = None
    components: Mapping[str, float] = field(default_factory=dict)
    outcome: frozenset[str] = frozenset()
    nan: bool = False
    answer: str | None = None
    completion_tokens: int = 0
    truncated: bool = False
    tool_calls: int = 0


class WatchSignals(BaseModel):
    """The watch's figures for one batch of groups (module docstring for definitions).

    Rates are fractions in [0, 1]; a figure with nothing to measure is ``None``.

    Attributes:
        groups: groups in the batch.
        episodes: episodes in the batch.
        zero_spread: groups with zero reward spread / groups.
        zero_spread_all_fail: zero-spread groups where every episode failed / groups.
        zero_spread_all_pass: zero-spread groups where every episode succeeded / groups.
        reward_mean: mean valid reward.
        reward_std: the valid rewards' population std over the batch.
        reward_group_std: the mean, over groups, of the std inside each group (what GRPO
            learns from).
        success_mean: success rate over the episodes with a verdict.
        success_std: the std of success (0/1) over those episodes.
        step_reward_mean: the mean weighted sum of per-step rewards per episode (shaping).
        component_shares: each component's share of the reward (sums to 1; empty when every
            contribution is 0).
        outcome_components: the outcome components' names.
        distinct_answers: the mean, over groups with two or more answers, of distinct answers.
        single_answer_groups: groups whose answers (two or more) are all the same / such groups.
        completion_tokens_mean: the model's tokens per episode.
        truncated: truncated episodes / episodes.
        invalid_rewards: episodes whose reward is invalid (NaN ones included).
        nan_rewards: episodes whose reward came out NaN or infinite.
        tool_calls_mean: tool calls per episode.
    """

    model_config = ConfigDict(extra="ignore")

    groups: int
    episodes: int
    zero_spread: float | None
    zero_spread_all_fail: float | None
    zero_spread_all_pass: float | None
    reward_mean: float | None
    reward_std: float | None
    reward_group_std: float | None
    success_mean: float | None
    success_std: float | None
    step_reward_mean: float | None
    component_shares: dict[str, float]
    outcome_components: list[str]
    distinct_answers: float | None
    single_answer_groups: float | None
    completion_tokens_mean: float | None
    truncated: float | None
    invalid_rewards: int
    nan_rewards: int
    tool_calls_mean: float | None

    def flat(self, prefix: str = "watch/") -> dict[str, float]:
        """The numeric figures as ``{prefix + name: value}`` (shares as ``share/<name>``), for
        TRL's log and wandb; ``None`` figures are left out."""
        out: dict[str, float] = {}
        for name, value in self.model_dump(exclude={"component_shares"}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[prefix + name] = float(value)
        for name, share in self.component_shares.items():
            out[f"{prefix}share/{name}"] = share
        return out


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _std(values: Sequence[float]) -> float | None:
    mean = _mean(values)
    if mean is None:
        return None
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def has_spread(rewards: Sequence[float | None]) -> bool:
    """Whether a group's rewards have spread: two or more valid ones (``None`` is invalid) that
    are not all equal (within ``1e-9``). A group without spread gets no GRPO advantage.

    Example:
        >>> has_spread([1.0, 0.0]), has_spread([1.0, 1.0, None]), has_spread([0.5, None])
        (True, False, False)
    """
    valid = [r for r in rewards if r is not None]
    return len(valid) >= 2 and max(valid) - min(valid) > _EQUAL


def watch_signals(groups: Sequence[Sequence[EpisodeOutcome]]) -> WatchSignals:
    """The `WatchSignals` of ``groups`` (each a GRPO group: the episodes of one task).

    Example:
        >>> same = EpisodeOutcome(reward=0.5, answer="4")
        >>> watch_signals([[same, same]]).single_answer_groups
        1.0
    """
    counter = WatchCounter()
    for group in groups:
        counter.add_group(group)
    return counter.signals()


class WatchCounter:
    """`watch_signals` counted one group at a time: a few numbers of each episode (8 bytes
    each), not its outcome, so that a whole run's groups are summarised in little memory.

    Example:
        >>> counter = WatchCounter()
        >>> counter.add_group([EpisodeOutcome(reward=1.0), EpisodeOutcome(reward=0.0)])
        >>> counter.signals().zero_spread
        0.0
    """

    def __init__(self) -> None:
        self.groups = self.zero = self.fail = self.passed = 0
        self.truncated = self.invalid = self.nan = 0
        self.rewards = array("d")  # the valid rewards
        self.judged = array("d")  # 1.0 / 0.0 for each verdict
        self.group_stds = array("d")
        self.distinct = array("d")  # distinct answers of the groups with two or more
        self.step_rewards = array("d")
        self.tokens = array("d")
        self.tool_calls = array("d")
        self.totals: dict[str, float] = defaultdict(float)  # |contribution| by component
        self.outcome: set[str] = set()

    def add_group(self, group: Sequence[EpisodeOutcome]) -> None:
        """Count one group."""
        self.groups += 1
        rewards = [e.reward for e in group if e.reward is not None]
        verdicts = [e.success for e in group if e.success is not None]
        if len(rewards) >= 2:
            self.group_stds.append(_std(rewards) or 0.0)
        if not has_spread(rewards):
            self.zero += 1
            self.fail += bool(verdicts) and not any(verdicts)
            self.passed += bool(verdicts) and all(verdicts)
        answers = [e.answer for e in group if e.answer is not None]
        if len(answers) >= 2:
            self.distinct.append(len(set(answers)))
        self.rewards.extend(rewards)
        self.judged.extend(float(v) for v in verdicts)
        totals = self.totals
        for e in group:
            self.step_rewards.append(e.components.get(STEP_REWARDS, 0.0))
            for name, value in e.components.items():
                if math.isfinite(value):
                    totals[name] += abs(value)
            self.outcome.update(e.outcome)
            self.tokens.append(e.completion_tokens)
            self.truncated += e.truncated
            self.invalid += e.reward is None
            self.nan += e.nan
            self.tool_calls.append(e.tool_calls)

    def signals(self) -> WatchSignals:
        """The `WatchSignals` of the groups counted so far."""
        episodes = len(self.step_rewards)
        distinct = self.distinct
        return WatchSignals(
            groups=self.groups,
            episodes=episodes,
            zero_spread=_ratio(self.zero, self.groups),
            zero_spread_all_fail=_ratio(self.fail, self.groups),
            zero_spread_all_pass=_ratio(self.passed, self.groups),
            reward_mean=_mean(self.rewards),
            reward_std=_std(self.rewards),
            reward_group_std=_mean(self.group_stds),
            success_mean=_mean(self.judged),
            success_std=_std(self.judged),
            step_reward_mean=_mean(self.step_rewards),
            component_shares=_shares(self.totals),
            outcome_components=sorted(self.outcome),
            distinct_answers=_mean(distinct),
            single_answer_groups=_ratio(sum(d == 1 for d in distinct), len(distinct)),
            completion_tokens_mean=_mean(self.tokens),
            truncated=_ratio(self.truncated, episodes),
            invalid_rewards=self.invalid,
            nan_rewards=self.nan,
            tool_calls_mean=_mean(self.tool_calls),
        )


def _shares(totals: Mapping[str, float]) -> dict[str, float]:
    whole = math.fsum(totals.values())
    if whole <= _EQUAL:
        return {}
    return {name: totals[name] / whole for name in sorted(totals)}


def final_answer(trajectory: Trajectory) -> str | None:
    """The episode's final answer: its last assistant text, normalised (module docstring)."""
    if not trajectory.turns:
        return None
    last = trajectory.turns[-1].assistant
    if last.tool_calls:
        return None
    text = " ".join(last.text.split()).lower()
    return text or None


def outcome_of(
    trajectory: Trajectory, *, episode_weight: float = 1.0, step_weight: float = 1.0
) -> EpisodeOutcome:
    """The `EpisodeOutcome` of a finished episode.

    Its reward is the episode's return (`Trajectory.episode_return`) with the episode score
    weighted ``episode_weight`` and the per-step rewards ``step_weight``: ``None`` when the
    score is missing or invalid or a step reward is invalid; ``nan`` when a score came out NaN
    or infinite (`ScoreFault.NON_FINITE`). A trainer that knows the reward it trained on puts
    that in instead (``dataclasses.replace``).

    Args:
        trajectory: the episode.
        episode_weight: the weight of the episode score in the reward.
        step_weight: the weight of the summed per-step rewards.
    """
    episode = trajectory.episode
    returned = trajectory.episode_return
    steps = returned.steps
    reward = returned.weighted(episode_weight, step_weight)
    components: dict[str, float] = {}
    outcome: frozenset[str] = frozenset()
    if episode is not None and episode.is_score_valid:
        weights = episode.weights or {}
        for name, weight in weights.items():
            metric = episode.metrics.get(name)
            if metric is not None and metric.is_score_valid:
                components[name] = episode_weight * weight * metric.score
        if weights:
            top = max(weights.values())
            outcome = frozenset(n for n, w in weights.items() if w == top and w != 0)
        else:
            components["episode"] = episode_weight * episode.score
            outcome = frozenset({"episode"})
    components[STEP_REWARDS] = step_weight * steps
    return EpisodeOutcome(
        reward=reward,
        nan=returned.non_finite,
        success=trajectory.success,
        components=components,
        outcome=outcome,
        answer=final_answer(trajectory),
        completion_tokens=_model_tokens(trajectory),
        truncated=_truncated(trajectory),
        tool_calls=sum(len(turn.assistant.tool_calls or []) for turn in trajectory.turns),
    )


def _model_tokens(trajectory: Trajectory) -> int:
    if trajectory.usage.completion_tokens:
        return int(trajectory.usage.completion_tokens)
    return sum(len(turn.token_ids or []) for turn in trajectory.turns)


def _truncated(trajectory: Trajectory) -> bool:
    return (
        trajectory.stop_reason is StopReason.TRUNCATED
        or bool(trajectory.metadata.get("budget_hit"))
        or any(turn.finish_reason == "length" for turn in trajectory.turns)
    )


def trajectory_groups(trajectories: Sequence[Trajectory]) -> list[list[Trajectory]]:
    """The trajectories by task (``task_index``): a rollout run's GRPO groups, in task order."""
    groups: dict[int, list[Trajectory]] = defaultdict(list)
    for trajectory in trajectories:
        groups[trajectory.task_index].append(trajectory)
    return [groups[index] for index in sorted(groups)]
