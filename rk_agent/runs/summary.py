"""Summary statistics of a run: rewards, success, pass@k, tools, stop reasons, tokens, latency.

The episode counts and rates (failed, success, tool success, parse errors, turns, stop reasons)
are `rk_agent.runs.stats.EpisodeStats`'s, the same definitions training logs use; ``watch``
holds the signals GRPO training watches at every step (`rk_agent.runs.watch`: zero-spread
groups, reward shares, distinct answers, truncation, NaN rewards), the run's tasks as groups,
and ``alarms`` the alarms those signals raise (`rk_agent.runs.alarms.batch_alarms`).

`summarize` reads the trajectories once, as a stream: `SummaryBuilder` keeps a few 8-byte
numbers of each episode (its rewards and latencies) and three counts of each task, not the
episode; the watch's outcome of an episode only until its GRPO group is complete. A run of any
size is summarised in little memory. What it takes of an episode is `EpisodeFacts`, plain
values that pickle small: processes that read episodes can send them to the one that summarises
(``rk-agent rescore``'s workers), and the summary is the one built from the episodes.

Main names: `RunSummary`, `summarize`, `SummaryBuilder`, `EpisodeFacts`, `pass_at_k`.

Example:
    >>> round(pass_at_k(n=4, c=1, k=2), 3)
    0.5
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

from rk_agent.rewards.stats import RewardStats, reward_stats
from rk_agent.runs.alarms import Alarm, AlarmOptions, batch_alarms
from rk_agent.runs.stats import EpisodeCounter, EpisodeCounts
from rk_agent.runs.trajectory import Trajectory
from rk_agent.runs.watch import EpisodeOutcome, WatchCounter, WatchSignals, outcome_of

__all__ = [
    "EpisodeFacts",
    "LatencyStats",
    "RunSummary",
    "SummaryBuilder",
    "pass_at_k",
    "summarize",
]


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
    ``turns_mean``, ``stop_reasons`` and ``failures`` are defined in `rk_agent.runs.stats`
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
    """The watch's signals over the run, its tasks as GRPO groups (`rk_agent.runs.watch`)."""
    alarms: list[Alarm] = Field(default_factory=list)
    """The alarms the signals raise, read as one GRPO batch (`rk_agent.runs.alarms`)."""


def summarize(
    trajectories: Iterable[Trajectory],
    group_size: int | None = None,
    worker_failures: Sequence[str] = (),
    alarms: AlarmOptions | None = None,
) -> RunSummary:
    """Compute the `RunSummary` of a set of trajectories (and the kinds of the rollout workers
    lost while playing them, `rk_agent.runs.run_dir.RunDir.worker_failure_kinds`); the
    alarms use the thresholds of ``alarms`` (default: the defaults). The trajectories are read
    once, as a stream (`SummaryBuilder`)."""
    builder = SummaryBuilder(group_size)
    for trajectory in trajectories:
        builder.add(trajectory)
    return builder.summary(group_size, worker_failures, alarms)


_ANSWER_KEPT = 64
"""Final answers longer than this are kept as a digest: the watch only compares them."""

_NONE = math.nan
"""How the number arrays keep a missing (invalid) value; the statistics leave NaN out too."""

_EPISODE, _VERDICT, _SUCCESS = 1, 1 << 21, 1 << 42
"""A task's counts packed in one int (a list of three would take 80 bytes a task): episodes,
episodes with a verdict and successes, 21 bits each."""
_COUNT = (1 << 21) - 1


class EpisodeFacts(NamedTuple):
    """What `SummaryBuilder` takes of one episode (`EpisodeFacts.of`).

    Attributes:
        counts: what `EpisodeCounter` counts of it.
        episode_reward: its valid episode score, NaN when missing or invalid.
        total_reward: its return (`Trajectory.episode_return`), NaN when it has none.
        metrics: its episode result's valid components, ``(name, score)`` in order.
        reward_error: the first 200 characters of its result's error (``None`` without one).
        prompt_tokens: its prompt tokens.
        completion_tokens: its completion tokens.
        model_latency: each turn's model latency, in seconds.
        wall_time: its wall time, in seconds.
        task_index: its task.
        outcome: the watch's outcome of it (`outcome_of`), a long answer as its digest.
    """

    counts: EpisodeCounts
    episode_reward: float
    total_reward: float
    metrics: tuple[tuple[str, float], ...]
    reward_error: str | None
    prompt_tokens: int
    completion_tokens: int
    model_latency: tuple[float, ...]
    wall_time: float
    task_index: int
    outcome: EpisodeOutcome

    @classmethod
    def of(cls, t: Trajectory) -> EpisodeFacts:
        """The facts of one episode."""
        reward, total = t.episode_reward, t.episode_return.value
        metrics: tuple[tuple[str, float], ...] = ()
        error = None
        if t.episode is not None:
            metrics = tuple(
                (name, metric.score)
                for name, metric in t.episode.metrics.items()
                if metric.is_score_valid
            )
            error = t.episode.error[:200] if t.episode.error else None
        outcome = outcome_of(t)
        answer = outcome.answer
        if answer is not None and len(answer) > _ANSWER_KEPT:  # the watch only compares them
            outcome = dataclasses.replace(
                outcome, answer=hashlib.blake2b(answer.encode(), digest_size=16).hexdigest()
            )
        return cls(
            counts=EpisodeCounts.of(t),
            episode_reward=_NONE if reward is None else reward,
            total_reward=_NONE if total is None else total,
            metrics=metrics,
            reward_error=error,
            prompt_tokens=t.usage.prompt_tokens,
            completion_tokens=t.usage.completion_tokens,
            model_latency=tuple(turn.model_latency_s for turn in t.turns),
            wall_time=t.wall_time_s,
            task_index=t.task_index,
            outcome=outcome,
        )

    def plain(self) -> tuple[Any, ...]:
        """These facts as plain nested tuples, which pickle without a Python call per object
        (`EpisodeFacts.from_plain` reads them back)."""
        o = self.outcome
        outcome = tuple(getattr(o, name) for name in _OUTCOME_FIELDS)
        return (tuple(self.counts), *self[1:-1], outcome)

    @classmethod
    def from_plain(cls, plain: tuple[Any, ...]) -> EpisodeFacts:
        """The facts `EpisodeFacts.plain` gave."""
        return cls._make((EpisodeCounts._make(plain[0]), *plain[1:-1], EpisodeOutcome(*plain[-1])))


_OUTCOME_FIELDS = tuple(f.name for f in dataclasses.fields(EpisodeOutcome))


class SummaryBuilder:
    """A `RunSummary` built one episode at a time (module docstring); `summarize` is the usual
    way in.

    Memory: per episode, its rewards, latencies and wall time as 8-byte floats; per task, its
    counts in one int; and the watch's outcome of each episode only until its group is complete
    (``group_size`` episodes of its task: the group is then counted, `WatchCounter`). Without
    ``group_size`` every group stays open until `summary`, which counts the open groups (a
    later episode of a task whose group was counted starts a new group).
    """

    def __init__(self, group_size: int | None = None) -> None:
        self._group_size = group_size
        self._stats = EpisodeCounter()
        self._episode_rewards = array("d")
        self._total_rewards = array("d")
        self._metrics: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        self._reward_errors: Counter[str] = Counter()
        self._tokens = [0, 0]
        self._model_latency = array("d")
        self._wall_time = array("d")
        self._tasks: dict[int, int] = {}  # by task: its counts, packed (`_EPISODE`)
        self._open: dict[int, list[EpisodeOutcome]] = {}  # groups not yet complete
        self._watch = WatchCounter()
        self._shared: dict[frozenset[str], frozenset[str]] = {}  # one copy of each outcome set

    def add(self, t: Trajectory) -> None:
        """Take one episode into the summary."""
        self.add_facts(EpisodeFacts.of(t))

    def add_facts(self, facts: EpisodeFacts) -> None:
        """Take one episode into the summary by its `EpisodeFacts` (episodes read elsewhere are
        taken in the order they were read, as `add` would take them)."""
        self._stats.add_counts(facts.counts)
        self._episode_rewards.append(facts.episode_reward)
        self._total_rewards.append(facts.total_reward)
        for name, score in facts.metrics:
            sums = self._metrics[name]
            sums[0] += score
            sums[1] += 1
        if facts.reward_error:
            self._reward_errors[facts.reward_error] += 1
        self._tokens[0] += facts.prompt_tokens
        self._tokens[1] += facts.completion_tokens
        self._model_latency.extend(facts.model_latency)
        self._wall_time.append(facts.wall_time)
        counts = _EPISODE
        success = facts.counts.success
        if success is not None:
            counts += _VERDICT + _SUCCESS * success
        task = facts.task_index
        self._tasks[task] = self._tasks.get(task, 0) + counts
        group = self._open.setdefault(task, [])
        outcome = facts.outcome
        if self._group_size is not None and len(group) + 1 >= self._group_size:
            group.append(outcome)
            self._watch.add_group(self._open.pop(task))  # complete: counted now, kept by none
            return
        names = self._shared.setdefault(outcome.outcome, outcome.outcome)  # one copy of each
        group.append(
            outcome if names is outcome.outcome else dataclasses.replace(outcome, outcome=names)
        )

    @property
    def tasks(self) -> int:
        """The tasks taken so far."""
        return len(self._tasks)

    def summary(
        self,
        group_size: int | None = None,
        worker_failures: Sequence[str] = (),
        alarms: AlarmOptions | None = None,
    ) -> RunSummary:
        """The `RunSummary` of the episodes taken so far (the arguments as `summarize`'s); the
        groups still open are counted as they are, in task order."""
        for index in sorted(self._open):
            self._watch.add_group(self._open.pop(index))
        stats = self._stats.stats()
        size = group_size or max((c & _COUNT for c in self._tasks.values()), default=1)
        watch = self._watch.signals()
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
                pass_at_k(judged, counts // _SUCCESS, k)
                for counts in self._tasks.values()
                if (judged := counts // _VERDICT & _COUNT) >= k
            ]
            if values:
                out[f"pass@{k}"] = sum(values) / len(values)
        return out


def _latency(values: Sequence[float]) -> LatencyStats:
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
