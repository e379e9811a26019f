"""Summary statistics of a run: rewards, success, pass@k, tools, stop reasons, tokens, latency.

The episode counts and rates (failed, success, tool success, parse errors, turns, stop reasons)
are `rk_agent.rollouts.stats.EpisodeStats`'s, the same definitions training logs use; ``watch``
holds the signals GRPO training watches at every step (`rk_agent.rollouts.watch`: zero-spread
groups, reward shares, distinct answers, truncation, NaN rewards), the run's tasks as groups,
and ``alarms`` the alarms those signals raise (`rk_agent.rollouts.alarms.batch_alarms`).

Main names: `RunSummary`, `summarize`, `pass_at_k`.

Example:
    >>> round(pass_at_k(n=4, c=1, k=2), 3)
    0.5
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, Field

from rk_agent.rewards.stats import RewardStats, reward_stats
from rk_agent.rollouts.alarms import Alarm, AlarmOptions, batch_alarms
from rk_agent.rollouts.stats import EpisodeStats
from rk_agent.rollouts.trajectory import Trajectory
from rk_agent.rollouts.watch import WatchSignals, outcome_of, trajectory_groups, watch_signals

__all__ = ["LatencyStats", "RunSummary", "pass_at_k", "summarize"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator: ``1 - C(n-c, k) / C(n, k)`` (Chen et al., 2021).

    Args:
        n: samples drawn for the task.
        c: samples that succeeded.
        k: the budget.
    """
    if k > n:
        raise ValueError(f"pass@k needs k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


class LatencyStats(BaseModel):
    """Percentiles of a latency, in seconds."""

    count: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None


class RunSummary(BaseModel):
    """What a run produced, in numbers (``summary.json``).

    ``failed``, ``success_rate``, ``tool_call_success_rate``, ``parse_error_rate``,
    ``turns_mean``, ``stop_reasons`` and ``failures`` are defined in `rk_agent.rollouts.stats`
    (context overflow counts as failed; a rate with nothing to count is ``None``).
    """

    episodes: int
    failed: int
    tasks: int
    group_size: int
    episode_reward: RewardStats
    total_reward: RewardStats
    success_rate: float | None
    pass_at_k: dict[str, float]
    metric_means: dict[str, float]
    step_reward: RewardStats
    turns_mean: float | None
    tool_calls: int
    tool_call_success_rate: float | None
    parse_error_rate: float | None
    stop_reasons: dict[str, int]
    failures: dict[str, int]
    reward_errors: dict[str, int] = Field(default_factory=dict)
    worker_failures: dict[str, int] = Field(default_factory=dict)
    """Rollout workers lost during the run (``--workers``), by kind (``died``,
    ``out_of_memory``, ...); their unfinished episodes were played by others."""
    prompt_tokens: int
    completion_tokens: int
    model_latency: LatencyStats
    episode_wall_time: LatencyStats
    watch: WatchSignals | None = None
    """The watch's signals over the run, its tasks as GRPO groups (`rk_agent.rollouts.watch`)."""
    alarms: list[Alarm] = Field(default_factory=list)
    """The alarms the signals raise, read as one GRPO batch (`rk_agent.rollouts.alarms`)."""


def summarize(
    trajectories: Sequence[Trajectory],
    group_size: int | None = None,
    worker_failures: Sequence[str] = (),
    alarms: AlarmOptions | None = None,
) -> RunSummary:
    """Compute the `RunSummary` of a set of trajectories (and the kinds of the rollout workers
    lost while playing them, `rk_agent.rollouts.run_dir.RunDir.worker_failure_kinds`); the
    alarms use the thresholds of ``alarms`` (default: the defaults)."""
    stats = EpisodeStats.of(trajectories)
    turns = [turn for t in trajectories for turn in t.turns]
    groups: dict[int, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        groups[t.task_index].append(t)
    size = group_size or max((len(g) for g in groups.values()), default=1)
    watch = watch_signals(
        [[outcome_of(t) for t in group] for group in trajectory_groups(trajectories)]
    )
    return RunSummary(
        episodes=stats.episodes,
        failed=stats.failed,
        tasks=len(groups),
        group_size=size,
        episode_reward=reward_stats([t.episode_reward for t in trajectories]),
        total_reward=reward_stats([t.total_reward for t in trajectories]),
        success_rate=stats.success_rate,
        pass_at_k=_pass_at_k(groups, size),
        metric_means=_metric_means(trajectories),
        step_reward=stats.step_reward,
        turns_mean=stats.turns_mean,
        tool_calls=stats.tool_calls,
        tool_call_success_rate=stats.tool_success_rate,
        parse_error_rate=stats.parse_error_rate,
        stop_reasons=stats.stop_reasons,
        failures=stats.failures,
        reward_errors=dict(
            Counter(t.episode.error[:200] for t in trajectories if t.episode and t.episode.error)
        ),
        worker_failures=dict(Counter(worker_failures)),
        prompt_tokens=sum(t.usage.prompt_tokens for t in trajectories),
        completion_tokens=sum(t.usage.completion_tokens for t in trajectories),
        model_latency=_latency([turn.model_latency_s for turn in turns]),
        episode_wall_time=_latency([t.wall_time_s for t in trajectories]),
        watch=watch,
        alarms=batch_alarms(watch, alarms, grouped=size >= 2) if trajectories else [],
    )


def _pass_at_k(groups: dict[int, list[Trajectory]], size: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in sorted({1, size}):
        values = []
        for members in groups.values():
            judged = [t.success for t in members if t.success is not None]
            if len(judged) >= k:
                values.append(pass_at_k(len(judged), sum(judged), k))
        if values:
            out[f"pass@{k}"] = sum(values) / len(values)
    return out


def _metric_means(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    values: dict[str, list[float]] = defaultdict(list)
    for t in trajectories:
        if t.episode is None:
            continue
        for name, metric in t.episode.metrics.items():
            if metric.is_score_valid:
                values[name].append(metric.score)
    return {name: sum(v) / len(v) for name, v in sorted(values.items())}


def _latency(values: list[float]) -> LatencyStats:
    if not values:
        return LatencyStats(count=0, mean=None, p50=None, p90=None, p99=None)
    ordered = sorted(values)

    def percentile(q: float) -> float:
        return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]

    return LatencyStats(
        count=len(values),
        mean=sum(values) / len(values),
        p50=percentile(0.50),
        p90=percentile(0.90),
        p99=percentile(0.99),
    )
