"""Summary statistics of a run: rewards, success, pass@k, tools, stop reasons, tokens, latency.

The episode counts and rates (failed, success, tool success, parse errors, turns, stop reasons)
are `rk_agent.rollouts.stats.EpisodeStats`'s, the same definitions training logs use; ``watch``
holds the signals GRPO training watches at every step (`rk_agent.rollouts.watch`: zero-spread
groups, reward shares, distinct answers, truncation, NaN rewards), the run's tasks as groups,
and ``alarms`` the alarms those signals raise (`rk_agent.rollouts.alarms.batch_alarms`).

`summarize` reads the trajectories once, as a stream: `SummaryBuilder` keeps a few numbers of
each episode (its rewards, latencies, success and watch outcome), not the episode, so a run of
any size is summarised in little memory.

Main names: `RunSummary`, `summarize`, `SummaryBuilder`, `pass_at_k`.

Example:
    >>> round(pass_at_k(n=4, c=1, k=2), 3)
    0.5
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from rk_agent.rewards.stats import RewardStats, reward_stats
from rk_agent.rollouts.alarms import Alarm, AlarmOptions, batch_alarms
from rk_agent.rollouts.stats import EpisodeCounter
from rk_agent.rollouts.trajectory import Trajectory
from rk_agent.rollouts.watch import EpisodeOutcome, WatchSignals, outcome_of, watch_signals

__all__ = ["LatencyStats", "RunSummary", "SummaryBuilder", "pass_at_k", "summarize"]


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
    trajectories: Iterable[Trajectory],
    group_size: int | None = None,
    worker_failures: Sequence[str] = (),
    alarms: AlarmOptions | None = None,
) -> RunSummary:
    """Compute the `RunSummary` of a set of trajectories (and the kinds of the rollout workers
    lost while playing them, `rk_agent.rollouts.run_dir.RunDir.worker_failure_kinds`); the
    alarms use the thresholds of ``alarms`` (default: the defaults). The trajectories are read
    once, as a stream (`SummaryBuilder`)."""
    builder = SummaryBuilder()
    for trajectory in trajectories:
        builder.add(trajectory)
    return builder.summary(group_size, worker_failures, alarms)


_ANSWER_KEPT = 64
"""Final answers longer than this are kept as a digest: the watch only compares them."""


class SummaryBuilder:
    """A `RunSummary` built one episode at a time, keeping a few numbers of each (module
    docstring); `summarize` is the usual way in."""

    def __init__(self) -> None:
        self._stats = EpisodeCounter()
        self._episode_rewards: list[float | None] = []
        self._total_rewards: list[float | None] = []
        self._metrics: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        self._reward_errors: Counter[str] = Counter()
        self._tokens = [0, 0]
        self._model_latency: list[float] = []
        self._wall_time: list[float] = []
        self._tasks: Counter[int] = Counter()
        self._verdicts: dict[int, list[bool]] = defaultdict(list)
        self._outcomes: dict[int, list[EpisodeOutcome]] = defaultdict(list)
        self._shared: dict[frozenset[str], frozenset[str]] = {}  # one copy of each outcome set

    def add(self, t: Trajectory) -> None:
        """Take one episode into the summary."""
        self._stats.add(t)
        self._episode_rewards.append(t.episode_reward)
        self._total_rewards.append(t.total_reward)
        if t.episode is not None:
            for name, metric in t.episode.metrics.items():
                if metric.is_score_valid:
                    sums = self._metrics[name]
                    sums[0] += metric.score
                    sums[1] += 1
            if t.episode.error:
                self._reward_errors[t.episode.error[:200]] += 1
        self._tokens[0] += t.usage.prompt_tokens
        self._tokens[1] += t.usage.completion_tokens
        self._model_latency.extend(turn.model_latency_s for turn in t.turns)
        self._wall_time.append(t.wall_time_s)
        self._tasks[t.task_index] += 1
        if t.success is not None:
            self._verdicts[t.task_index].append(t.success)
        outcome = outcome_of(t)
        answer = outcome.answer
        if answer is not None and len(answer) > _ANSWER_KEPT:
            answer = hashlib.blake2b(answer.encode(), digest_size=16).hexdigest()
        names = self._shared.setdefault(outcome.outcome, outcome.outcome)
        self._outcomes[t.task_index].append(
            dataclasses.replace(outcome, answer=answer, outcome=names)
        )

    def summary(
        self,
        group_size: int | None = None,
        worker_failures: Sequence[str] = (),
        alarms: AlarmOptions | None = None,
    ) -> RunSummary:
        """The `RunSummary` of the episodes taken so far (the arguments as `summarize`'s)."""
        stats = self._stats.stats()
        size = group_size or max(self._tasks.values(), default=1)
        watch = watch_signals([self._outcomes[index] for index in sorted(self._outcomes)])
        return RunSummary(
            episodes=stats.episodes,
            failed=stats.failed,
            tasks=len(self._tasks),
            group_size=size,
            episode_reward=reward_stats(self._episode_rewards),
            total_reward=reward_stats(self._total_rewards),
            success_rate=stats.success_rate,
            pass_at_k=self._pass_at_k(size),
            metric_means={name: s / n for name, (s, n) in sorted(self._metrics.items())},
            step_reward=stats.step_reward,
            turns_mean=stats.turns_mean,
            tool_calls=stats.tool_calls,
            tool_call_success_rate=stats.tool_success_rate,
            parse_error_rate=stats.parse_error_rate,
            stop_reasons=stats.stop_reasons,
            failures=stats.failures,
            reward_errors=dict(self._reward_errors),
            worker_failures=dict(Counter(worker_failures)),
            prompt_tokens=self._tokens[0],
            completion_tokens=self._tokens[1],
            model_latency=_latency(self._model_latency),
            episode_wall_time=_latency(self._wall_time),
            watch=watch,
            alarms=batch_alarms(watch, alarms, grouped=size >= 2) if stats.episodes else [],
        )

    def _pass_at_k(self, size: int) -> dict[str, float]:
        out: dict[str, float] = {}
        for k in sorted({1, size}):
            values = [
                pass_at_k(len(judged), sum(judged), k)
                for index in self._tasks
                if len(judged := self._verdicts.get(index, [])) >= k
            ]
            if values:
                out[f"pass@{k}"] = sum(values) / len(values)
        return out


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
