"""Episode statistics, defined once: for run summaries and for training logs.

`EpisodeStats.of` counts a batch of trajectories (`EpisodeCounter` the same one at a time, for
runs read as a stream, and `EpisodeCounts` what it counts of one episode, for a process that
reads episodes to send to the one that counts them); `rk_agent.runs.summary.summarize`
(``summary.json``) and `rk_agent.trainers.rewards.episode_stats` (TRL's ``episodes/*`` log) both
read their numbers from it, so a rate means the same in both places.

Definitions:

- **failed**: the episode carries a `Failure`, whatever its kind. Context overflow (the model's
  context, or TRL's token budget, ran out) counts: the episode did not end by the environment's
  rules, even though it is still scored, as truncated. This is also what the failure policies
  (retry, drop the group), ``show --failed`` and SFT's ``drop_failed`` act on.
- **success rate**: succeeded / episodes with a verdict (``success`` not ``None``). An episode
  that failed before it could be scored has no verdict and is left out; a truncated one has one.
  ``None`` when no episode has a verdict.
- **tool success rate**: tool calls that succeeded / tool calls. ``None`` when no tool was
  called (undefined, not 0).
- **parse error rate**: turns whose reply could not be parsed / turns; ``None`` without turns.
- **turns mean**: turns / episodes; ``None`` without episodes.
- **step reward**: statistics of the valid per-step rewards (`RewardStats`; invalid ones counted).

Main names: `EpisodeStats`, `EpisodeCounter`, `EpisodeCounts`.

Example:
    >>> EpisodeStats.of([]).tool_success_rate is None
    True
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from rk_agent.rewards.stats import RewardStats, reward_stats
from rk_agent.runs.trajectory import Trajectory

__all__ = ["EpisodeCounter", "EpisodeCounts", "EpisodeStats"]


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(frozen=True)
class EpisodeStats:
    """Counts over a batch of episodes, and the rates defined in the module docstring.

    Attributes:
        episodes: how many episodes.
        failed: episodes with a `Failure` (context overflow included).
        judged: episodes with a success verdict.
        succeeded: episodes that succeeded.
        turns: turns over all episodes.
        turns_max: the most turns of one episode (0 without episodes).
        tool_calls: tool calls over all turns.
        tool_calls_ok: the tool calls that succeeded.
        parse_errors: turns whose reply could not be parsed.
        budget_hits: episodes TRL's tool loop cut (``metadata["budget_hit"]``).
        stop_reasons: episodes by `StopReason` value.
        failures: failed episodes by `FailureKind` value.
        step_reward: statistics of the per-step rewards.
    """

    episodes: int
    failed: int
    judged: int
    succeeded: int
    turns: int
    turns_max: int
    tool_calls: int
    tool_calls_ok: int
    parse_errors: int
    budget_hits: int
    step_reward: RewardStats
    stop_reasons: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, trajectories: Iterable[Trajectory]) -> EpisodeStats:
        """Count ``trajectories``."""
        counter = EpisodeCounter()
        for trajectory in trajectories:
            counter.add(trajectory)
        return counter.stats()

    @property
    def success_rate(self) -> float | None:
        """Succeeded / episodes with a verdict; ``None`` when none has one."""
        return _ratio(self.succeeded, self.judged)

    @property
    def failure_rate(self) -> float | None:
        """Failed / episodes (context overflow counts as a failure); ``None`` without episodes."""
        return _ratio(self.failed, self.episodes)

    @property
    def tool_success_rate(self) -> float | None:
        """Succeeded tool calls / tool calls; ``None`` when no tool was called."""
        return _ratio(self.tool_calls_ok, self.tool_calls)

    @property
    def parse_error_rate(self) -> float | None:
        """Turns with a parse error / turns; ``None`` without turns."""
        return _ratio(self.parse_errors, self.turns)

    @property
    def turns_mean(self) -> float | None:
        """Turns per episode; ``None`` without episodes."""
        return _ratio(self.turns, self.episodes)

    @property
    def budget_hit_rate(self) -> float | None:
        """Episodes TRL's tool loop cut / episodes; ``None`` without episodes."""
        return _ratio(self.budget_hits, self.episodes)


class EpisodeCounts(NamedTuple):
    """What `EpisodeCounter` counts of one episode (`EpisodeCounts.of`): plain values, which
    pickle small (``rk-agent rescore``'s worker processes send them to the one that counts).

    Attributes:
        failure: the kind of the episode's `Failure` (``None`` without one).
        success: the environment's verdict (``None`` without one).
        turns: its turns.
        tool_calls: its tool calls.
        tool_calls_ok: those that succeeded.
        parse_errors: its turns whose reply could not be parsed.
        step_rewards: each turn's reward, NaN for an invalid one.
        budget_hit: TRL's tool loop cut it.
        stop_reason: its `StopReason` value.
    """

    failure: str | None
    success: bool | None
    turns: int
    tool_calls: int
    tool_calls_ok: int
    parse_errors: int
    step_rewards: tuple[float, ...]
    budget_hit: bool
    stop_reason: str

    @classmethod
    def of(cls, t: Trajectory) -> EpisodeCounts:
        """The counts of one episode."""
        tool_calls = tool_calls_ok = parse_errors = 0
        for turn in t.turns:
            tool_calls += len(turn.tool_calls)
            tool_calls_ok += sum(call.ok for call in turn.tool_calls)
            parse_errors += turn.parse_error is not None
        return cls(
            failure=None if t.failure is None else t.failure.kind.value,
            success=t.success,
            turns=len(t.turns),
            tool_calls=tool_calls,
            tool_calls_ok=tool_calls_ok,
            parse_errors=parse_errors,
            step_rewards=tuple(turn.reward if turn.reward_valid else math.nan for turn in t.turns),
            budget_hit=bool(t.metadata.get("budget_hit")),
            stop_reason=t.stop_reason.value,
        )


class EpisodeCounter:
    """`EpisodeStats` counted one episode at a time: only the per-step rewards are kept (8 bytes
    each, NaN for an invalid one)."""

    def __init__(self) -> None:
        self.episodes = self.failed = self.judged = self.succeeded = 0
        self.turns = self.turns_max = self.tool_calls = self.tool_calls_ok = 0
        self.parse_errors = self.budget_hits = 0
        self.step_rewards = array("d")  # NaN: invalid
        self.stop_reasons: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()

    def add(self, t: Trajectory) -> None:
        """Count one episode."""
        self.add_counts(EpisodeCounts.of(t))

    def add_counts(self, counts: EpisodeCounts) -> None:
        """Count one episode from its `EpisodeCounts`."""
        self.episodes += 1
        self.failed += counts.failure is not None
        self.judged += counts.success is not None
        self.succeeded += counts.success is True
        self.turns += counts.turns
        self.turns_max = max(self.turns_max, counts.turns)
        self.tool_calls += counts.tool_calls
        self.tool_calls_ok += counts.tool_calls_ok
        self.parse_errors += counts.parse_errors
        self.step_rewards.extend(counts.step_rewards)
        self.budget_hits += counts.budget_hit
        self.stop_reasons[counts.stop_reason] += 1
        if counts.failure is not None:
            self.failures[counts.failure] += 1

    def stats(self) -> EpisodeStats:
        """The `EpisodeStats` of the episodes counted so far."""
        return EpisodeStats(
            episodes=self.episodes,
            failed=self.failed,
            judged=self.judged,
            succeeded=self.succeeded,
            turns=self.turns,
            turns_max=self.turns_max,
            tool_calls=self.tool_calls,
            tool_calls_ok=self.tool_calls_ok,
            parse_errors=self.parse_errors,
            budget_hits=self.budget_hits,
            step_reward=reward_stats(self.step_rewards),
            stop_reasons=dict(self.stop_reasons),
            failures=dict(self.failures),
        )
