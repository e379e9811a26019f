"""Comparing two runs on the tasks they share: success, reward, paired and unpaired z-scores.

`compare_runs` reads two runs (run directories, training runs' folders or trajectories files)
one episode at a time and matches their episodes by task and sample:

- a **task** is its ``Task.id`` (the stable identifier runs are resumed and grouped by: the same
  ``--seed`` and ``--n``, or the same ``--tasks`` file, give the same ids). Only the tasks both
  runs hold are compared; the others are counted and some named. A shared id whose opening
  messages differ between the runs is counted in ``prompts_differ`` (and still compared);
- the **samples** of a task (a GRPO group, or a task a run holds more than once) are paired in
  order of task index and sample number: A's first with B's first, and so on; a sample only
  one run has is left out of the pairs (not out of the rates);
- **success** is the environment's verdict; an episode without one (it failed before it was
  scored) counts in neither the success rates nor the pairs; **reward** is the valid episode
  reward (invalid ones left out);
- a task is **solved** by a run when at least one of its samples succeeded; **gained**: solved
  by B and not by A (both judged it), **lost**: the reverse;
- **McNemar's z** over the pairs with a verdict on both sides: ``b`` pairs where A failed and B
  succeeded, ``c`` the reverse, ``z = (b - c) / sqrt(b + c)``; ``None`` (undefined) when
  ``b + c = 0``;
- the **two-proportion z** over the episodes of the shared tasks:
  ``(p_B - p_A) / sqrt(p (1 - p) (1/n_A + 1/n_B))`` with ``p`` the pooled rate; ``None`` when a
  side has no verdict or ``p`` is 0 or 1;
- **components**: each episode-reward component's mean valid score on the shared tasks
  (``summary.json``'s ``metric_means``, restricted to them); **kinds**: the same rates per
  ``task.metadata["kind"]``, for environments whose tasks carry one (``tools`` does).

A positive z (and delta) means B did better than A. ``|z| >= 1.96`` is the usual two-sided 5 %.

Main names: `compare_runs`, `RunComparison`, `RunFigures`, `Change`, `KindChange`.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, computed_field

from rk_agent.errors import ConfigError
from rk_agent.runs.run_dir import iter_trajectories
from rk_agent.runs.trajectory import Trajectory

__all__ = [
    "Change",
    "KindChange",
    "RunComparison",
    "RunFigures",
    "compare_runs",
    "mcnemar_z",
    "two_proportion_z",
]

_NAMED = 10  # task ids listed per kind of difference


class Change(BaseModel):
    """A figure of run A and of run B on the shared tasks (``None``: nothing to measure)."""

    a: float | None
    b: float | None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def delta(self) -> float | None:
        """``b - a``, or ``None`` when either is missing."""
        return None if self.a is None or self.b is None else self.b - self.a


class KindChange(BaseModel):
    """Success and reward of one task kind, in both runs."""

    tasks: int
    success: Change
    reward: Change


class RunFigures(BaseModel):
    """One run's figures.

    Attributes:
        path: the run as given.
        tasks, episodes: all the run holds.
        shared_episodes: its episodes on the shared tasks (the figures below are over these).
        judged: those with a success verdict.
        succeeded: those that succeeded.
        success_rate: succeeded / judged.
        reward_mean: the mean valid episode reward.
    """

    path: str
    tasks: int
    episodes: int
    shared_episodes: int
    judged: int
    succeeded: int
    success_rate: float | None
    reward_mean: float | None


class RunComparison(BaseModel):
    """Run B against run A on the tasks they share (module docstring for every definition).

    Attributes:
        a, b: each run's figures.
        shared_tasks: tasks both runs hold.
        only_a, only_b: tasks one run holds; ``only_a_examples`` and ``only_b_examples`` name
            up to 10 of them.
        prompts_differ: shared task ids whose opening messages differ between the runs.
        pairs: pairs of samples with a verdict on both sides.
        both_succeeded, both_failed: pairs that agree.
        a_failed_b_succeeded, a_succeeded_b_failed: McNemar's ``b`` and ``c``.
        mcnemar_z: ``(b - c) / sqrt(b + c)``; ``None`` when ``b + c = 0``.
        two_proportion_z: the unpaired z of the success rates; ``None`` when undefined.
        gained, lost: the ids of the tasks solved only by B, only by A (all of them).
        success, reward: the success rate and the mean reward, A and B.
        components: each episode-reward component's mean valid score, A and B.
        kinds: per task kind (``task.metadata["kind"]``), when the tasks carry one.
    """

    a: RunFigures
    b: RunFigures
    shared_tasks: int
    only_a: int
    only_b: int
    only_a_examples: list[str]
    only_b_examples: list[str]
    prompts_differ: int
    pairs: int
    both_succeeded: int
    both_failed: int
    a_failed_b_succeeded: int
    a_succeeded_b_failed: int
    mcnemar_z: float | None
    two_proportion_z: float | None
    gained: list[str]
    lost: list[str]
    success: Change
    reward: Change
    components: dict[str, Change]
    kinds: dict[str, KindChange]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def scope(self) -> str:
        """What was compared, in words: ``compared on 80 shared tasks; 20 only in A, ...``."""
        text = f"compared on {self.shared_tasks} shared tasks"
        if self.only_a or self.only_b:
            text += f"; {self.only_a} only in A, {self.only_b} only in B"
        return text


@dataclass
class _Episode:
    success: bool | None
    reward: float | None
    components: dict[str, float]


@dataclass
class _Task:
    prompt: str
    kind: str | None
    samples: list[tuple[int, int, _Episode]] = field(default_factory=list)

    def ordered(self) -> list[_Episode]:
        return [e for _, _, e in sorted(self.samples, key=lambda s: (s[0], s[1]))]


@dataclass
class _Run:
    path: str
    tasks: dict[str, _Task]
    episodes: int


def compare_runs(run_a: str | Path, run_b: str | Path) -> RunComparison:
    """Compare run B against run A on the tasks they share (module docstring).

    Args:
        run_a: the baseline: a run directory, a training run's folder or a trajectories file.
        run_b: the run compared with it.

    Raises:
        ConfigError: a path is not a run, or the runs share no task.
        DataError: a line is not a trajectory (file and line named).

    Example:
        >>> # compare_runs("runs/before", "runs/after").mcnemar_z  # doctest: +SKIP
    """
    a, b = _read(run_a), _read(run_b)
    shared = [task for task in a.tasks if task in b.tasks]
    if not shared:
        raise ConfigError(
            f"{run_a} ({len(a.tasks)} tasks, e.g. {_some(a.tasks)}) and {run_b} "
            f"({len(b.tasks)} tasks, e.g. {_some(b.tasks)}) share no task: compare runs of the "
            "same tasks (the same --env, --seed and --n, or the same --tasks file)."
        )
    only_a = [task for task in a.tasks if task not in b.tasks]
    only_b = [task for task in b.tasks if task not in a.tasks]
    pairs = _Pairs()
    gained, lost = [], []
    for task in shared:
        ta, tb = a.tasks[task], b.tasks[task]
        for ea, eb in zip(ta.ordered(), tb.ordered(), strict=False):
            pairs.add(ea.success, eb.success)
        solved_a, solved_b = _solved(ta), _solved(tb)
        if solved_a is False and solved_b is True:
            gained.append(task)
        elif solved_a is True and solved_b is False:
            lost.append(task)
    fa, fb = _figures(a, shared), _figures(b, shared)
    return RunComparison(
        a=fa,
        b=fb,
        shared_tasks=len(shared),
        only_a=len(only_a),
        only_b=len(only_b),
        only_a_examples=only_a[:_NAMED],
        only_b_examples=only_b[:_NAMED],
        prompts_differ=sum(a.tasks[t].prompt != b.tasks[t].prompt for t in shared),
        pairs=pairs.total,
        both_succeeded=pairs.both_succeeded,
        both_failed=pairs.both_failed,
        a_failed_b_succeeded=pairs.b,
        a_succeeded_b_failed=pairs.c,
        mcnemar_z=mcnemar_z(pairs.b, pairs.c),
        two_proportion_z=two_proportion_z(fa.succeeded, fa.judged, fb.succeeded, fb.judged),
        gained=gained,
        lost=lost,
        success=Change(a=fa.success_rate, b=fb.success_rate),
        reward=Change(a=fa.reward_mean, b=fb.reward_mean),
        components=_components(a, b, shared),
        kinds=_kinds(a, b, shared),
    )


def mcnemar_z(b: int, c: int) -> float | None:
    """McNemar's z for paired outcomes: ``(b - c) / sqrt(b + c)``; ``None`` when ``b + c = 0``.

    Example:
        >>> mcnemar_z(9, 1)
        2.5298221281347035
    """
    return (b - c) / math.sqrt(b + c) if b + c else None


def two_proportion_z(s_a: int, n_a: int, s_b: int, n_b: int) -> float | None:
    """The pooled two-proportion z of ``s_b / n_b`` against ``s_a / n_a``; ``None`` when a side
    is empty or the pooled rate is 0 or 1.

    Example:
        >>> round(two_proportion_z(5, 10, 9, 10), 4)
        1.9518
    """
    if not n_a or not n_b:
        return None
    pooled = (s_a + s_b) / (n_a + n_b)
    variance = pooled * (1 - pooled) * (1 / n_a + 1 / n_b)
    return (s_b / n_b - s_a / n_a) / math.sqrt(variance) if variance > 0 else None


# ------------------------------------------------------------------------------ internals


def _read(path: str | Path) -> _Run:
    if not Path(path).exists():
        raise ConfigError(
            f"no run at {path}: expected a run directory made by `rk-agent rollout`, a "
            "training run's folder or a trajectories JSONL file."
        )
    tasks: dict[str, _Task] = {}
    episodes = 0
    for t in iter_trajectories(path):
        episodes += 1
        task = tasks.get(t.task.id)
        if task is None:
            kind = t.task.metadata.get("kind")
            task = tasks[t.task.id] = _Task(_prompt(t), kind if isinstance(kind, str) else None)
        task.samples.append((t.task_index, t.sample, _episode(t)))
    # in task order, not in the order episodes finished
    ordered = sorted(tasks.items(), key=lambda item: min(s[0] for s in item[1].samples))
    return _Run(str(path), dict(ordered), episodes)


def _prompt(t: Trajectory) -> str:
    text = "\x00".join(f"{m.role}\x01{m.text}" for m in t.task.messages)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _episode(t: Trajectory) -> _Episode:
    components = {}
    if t.episode is not None:
        components = {
            name: metric.score
            for name, metric in t.episode.metrics.items()
            if metric.is_score_valid
        }
    return _Episode(t.success, t.episode_reward, components)


def _solved(task: _Task) -> bool | None:
    verdicts = [e.success for _, _, e in task.samples if e.success is not None]
    return any(verdicts) if verdicts else None


@dataclass
class _Pairs:
    total: int = 0
    both_succeeded: int = 0
    both_failed: int = 0
    b: int = 0
    c: int = 0

    def add(self, a: bool | None, b: bool | None) -> None:
        if a is None or b is None:
            return
        self.total += 1
        if a and b:
            self.both_succeeded += 1
        elif not a and not b:
            self.both_failed += 1
        elif b:
            self.b += 1
        else:
            self.c += 1


def _episodes(run: _Run, tasks: Iterable[str]) -> list[_Episode]:
    return [e for task in tasks for _, _, e in run.tasks[task].samples]


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _figures(run: _Run, shared: list[str]) -> RunFigures:
    episodes = _episodes(run, shared)
    verdicts = [e.success for e in episodes if e.success is not None]
    return RunFigures(
        path=run.path,
        tasks=len(run.tasks),
        episodes=run.episodes,
        shared_episodes=len(episodes),
        judged=len(verdicts),
        succeeded=sum(verdicts),
        success_rate=sum(verdicts) / len(verdicts) if verdicts else None,
        reward_mean=_mean([e.reward for e in episodes if e.reward is not None]),
    )


def _components(a: _Run, b: _Run, shared: list[str]) -> dict[str, Change]:
    values: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for side, run in enumerate((a, b)):
        for episode in _episodes(run, shared):
            for name, score in episode.components.items():
                values[name][side].append(score)
    return {
        name: Change(a=_mean(values[name][0]), b=_mean(values[name][1])) for name in sorted(values)
    }


def _kinds(a: _Run, b: _Run, shared: list[str]) -> dict[str, KindChange]:
    by_kind: dict[str, list[str]] = defaultdict(list)
    for task in shared:
        kind = a.tasks[task].kind or b.tasks[task].kind
        if kind is not None:
            by_kind[kind].append(task)
    out = {}
    for kind in sorted(by_kind):
        fa, fb = _figures(a, by_kind[kind]), _figures(b, by_kind[kind])
        out[kind] = KindChange(
            tasks=len(by_kind[kind]),
            success=Change(a=fa.success_rate, b=fb.success_rate),
            reward=Change(a=fa.reward_mean, b=fb.reward_mean),
        )
    return out


def _some(tasks: dict[str, _Task]) -> str:
    return ", ".join(list(tasks)[:3]) or "none"
