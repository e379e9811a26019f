"""Re-scoring a run: every stored episode scored again with another reward, into a new run.

`rescore` reads a run (a run directory, a training run's folder or a bare trajectories file)
one episode at a time, scores each again with a reward (a registered name, ``module:fn`` or
``file.py::fn``) exactly as an environment scores an episode that ``rk-agent rollout --reward``
replaced the rewards of, and writes the results as a new run directory. No model and no tool is
called: the reward reads the recorded conversation, the task's ground truth and metadata.

What changes in each episode, and what does not:

- the **episode reward** (`EvaluateResult`, its components under the reward's name, as
  ``--reward`` records them), the **success** verdict (the environment's rule, from the new
  score) and the **total reward** (the episode's return, `Trajectory.episode_return`: the step
  rewards plus the new episode score, none when a score is invalid);
- the **step rewards** only with ``step_reward``: each turn is scored again on the conversation
  up to that turn, its tool calls' recorded outcomes and the environment's ``tool_calls``,
  ``tool_success`` and ``parse_error`` metrics kept; without it they stay as recorded;
- an episode that failed before it was scored (no episode result: the model or the environment
  failed first) is copied as it was: there is nothing to score;
- a reward that raises or returns something unusable on an episode makes that episode's result
  invalid (`EvaluateResult.is_score_valid` false, the error kept), and the rest go on; a reward
  called with arguments it does not take fails the whole rescore at the first episode.

The new directory holds ``config.yaml`` (the source's, its ``rewards`` set to the new reward),
``run.json``, ``trajectories.jsonl``, ``summary.json`` and ``rescore.json`` (`RescoreRecord`:
the source, the reward, the SHA-256 of its source code, the counts). It is written in a hidden
``.NAME.partial`` folder beside it and renamed when complete, so a folder named ``NAME`` is
always a whole rescore; an interrupted or failed rescore removes its partial folder. The source
is only read. Episodes are read one line at a time and written a batch of lines at a time
(each episode is freed as soon as its line is made), and the summary is built as they pass
(`rk_agent.runs.summary.SummaryBuilder`: a few numbers of each episode, the watch's
outcome only until its group is complete), so memory stays nearly flat however large the run
(``benchmarks/bench_rescore.py``).

**A run from elsewhere.** Success is the source environment's rule only when building that
environment runs nothing the run names, or the run is one rk-agent wrote here, or the caller
trusts it (``trust_run``; `rk_agent.runs.run_trust`); else the default rule, and
``success_rule`` says why. The new run is signed as this user's only when its source was.

**Where the work is done.** Each episode is scored by a `rk_agent.runs.rescorer.Rescorer`:
in this process, or, for a source of at least `PARALLEL_BYTES`, on worker processes, one per
core (`rk_agent.runs.rescore_workers`: chunks of lines scored in parallel and taken here in
file order, so the new run is the same byte for byte). Under `PARALLEL_BYTES` (about 1,600
episodes of 5 kB, half a second of scoring) starting workers would cost about what they save.

Main names: `rescore`, `RescoreResult`, `RescoreRecord`, `ScoreChange`, `RESCORE_FILE`,
`PARALLEL_BYTES`.

Example:
    >>> # rescore("runs/tools-1", "length", kwargs={"max_length": 200})  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import itertools
import math
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from datetime import UTC, datetime
from operator import attrgetter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rk_agent.envs.env_setup import EnvSetup
from rk_agent.errors import ConfigError
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.rescore_workers import RescoreWorkers, can_fork
from rk_agent.runs.rescorer import RescoredLine, Rescorer, RescoreSpec, ScoreSide
from rk_agent.runs.run_dir import (
    CONFIG_FILE,
    PROVENANCE_FILE,
    TRAJECTORIES_FILE,
    RunDir,
    RunStatus,
    append_lines,
    iter_trajectories,
    trajectories_file,
    unique_episodes,
)
from rk_agent.runs.run_trust import sign_config, signed_training_env
from rk_agent.runs.run_wants import env_wants
from rk_agent.runs.summary import RunSummary, SummaryBuilder
from rk_agent.runs.trajectory import Trajectory

__all__ = [
    "PARALLEL_BYTES",
    "RESCORE_FILE",
    "RescoreRecord",
    "RescoreResult",
    "ScoreChange",
    "rescore",
]

RESCORE_FILE = "rescore.json"
"""A rescored run's `RescoreRecord`."""

_BATCH = 256  # episodes written per append
PARALLEL_BYTES = 8 << 20
"""The smallest source (bytes of its trajectories file) that `rescore` hands to worker
processes when not told how many (``workers=None``): about 1,600 episodes of 5 kB, half a
second of scoring in one process. Below it workers save a few tenths of a second at most, and
on busy cores nothing: on 2 shared cores one process was as fast up to 1,000 episodes
(``benchmarks/bench_rescore.py``)."""
_MAX_WORKERS = 8  # the most workers chosen for ``workers=None``


class RescoreRecord(BaseModel):
    """``rescore.json``: where a rescored run came from and how it was scored.

    Attributes:
        source: the run that was rescored (absolute path).
        reward: the reward as given (a name, ``module:fn`` or ``file.py::fn``).
        reward_name: the name its components are recorded under.
        reward_sha256: SHA-256 of the reward function's source code (``None`` when Python
            cannot read it, e.g. a function defined in an interactive session).
        reward_file: the file the function is defined in.
        kwargs: options passed to the reward on every call.
        step_reward, step_reward_sha256: the step reward, when the steps were rescored too.
        success_rule: how each episode's success was decided.
        episodes: episodes in the new run.
        rescored: episodes scored with the new reward.
        unscored: episodes copied as they were (they failed before they were scored).
        invalid: rescored episodes whose new result is invalid (the reward raised or returned
            something unusable; its error is on the episode).
        created_at: when the rescore finished (UTC).
    """

    source: str
    reward: str
    reward_name: str
    reward_sha256: str | None
    reward_file: str | None = None
    kwargs: dict[str, Any] = Field(default_factory=dict)
    step_reward: str | None = None
    step_reward_sha256: str | None = None
    success_rule: str
    episodes: int = 0
    rescored: int = 0
    unscored: int = 0
    invalid: int = 0
    created_at: datetime | None = None


class ScoreChange(BaseModel):
    """A figure in the source run and in the rescored one (``None``: nothing to measure)."""

    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        """``after - before``, or ``None`` when either is missing."""
        if self.before is None or self.after is None:
            return None
        return self.after - self.before


class RescoreResult(BaseModel):
    """What `rescore` wrote and how the figures moved against the source.

    Attributes:
        output: the new run directory.
        record: its ``rescore.json``.
        summary: its ``summary.json``.
        reward_mean: the mean valid episode reward, before and after.
        success_rate: the success rate over episodes with a verdict, before and after.
        components: each episode-reward component's mean valid score (``summary.json``'s
            ``metric_means``), before and after; a component only one side has is ``None``
            on the other.
        workers: the worker processes that rescored the episodes (0: this process did).
    """

    output: str
    record: RescoreRecord
    summary: RunSummary
    reward_mean: ScoreChange
    success_rate: ScoreChange
    components: dict[str, ScoreChange]
    workers: int = 0


def rescore(
    source: str | Path,
    reward: str,
    *,
    output: str | Path | None = None,
    kwargs: Mapping[str, Any] | None = None,
    step_reward: str | None = None,
    workers: int | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    trust_run: bool = False,
) -> RescoreResult:
    """Score every episode of ``source`` again with ``reward`` and write a new run.

    Args:
        source: a run directory, a training run's folder or a trajectories JSONL file.
        reward: a registered reward name, ``package.module:fn`` or ``path/to/file.py::fn``.
        output: the new run directory (default: ``SOURCE-rescored-<reward name>`` beside the
            source); it must not exist.
        kwargs: options passed to the reward on every call (checked against its parameters).
        step_reward: a reward to score every turn with too (default: step rewards are kept).
        workers: worker processes to rescore on (`rk_agent.runs.rescore_workers`; 0: this
            process). Default: one per core when there are two or more, the source is at
            least `PARALLEL_BYTES` and workers can be forked (`can_fork`); else 0. The new run
            is the same either way.
        on_episode: called with each rescored episode, in file order; the episodes are then
            rescored in this process (``workers`` must be 0 or unset).
        on_progress: called with the number of episodes rescored so far, as they are written
            (after each episode in this process, after each chunk from workers).
        trust_run: build the source's environment for its success rule even when it names
            files or commands and the source is not one rk-agent wrote here; without it, such
            a source is rescored with the default rule (`rk_agent.runs.run_trust`).

    Returns:
        The new run's record, summary, and the change against the source.

    Raises:
        ConfigError: the source is not a run, the reward is unknown or does not load, an option
            is not one the reward takes, the output exists, or ``workers`` is negative or set
            with ``on_episode``.
        DataError: a line of the source is not a trajectory (file and line named).
        RewardInputError: the reward cannot be called with an episode's arguments.
        WorkerError: worker processes died past replacing (`rescore_workers.MAX_DEATHS`).
    """
    src = Path(source)
    if not src.exists():
        raise ConfigError(
            f"no run at {src}: expected a run directory made by `rk-agent rollout`, a training "
            "run's folder or a trajectories JSONL file."
        )
    episodes = iter_trajectories(src)  # refuses a folder that is not a run, before any work
    file = trajectories_file(src)
    first = next(episodes, None)
    if first is None:
        resume = (
            f"; if the run was stopped early, `rk-agent rollout --resume {src}` plays them"
            if (src / CONFIG_FILE).is_file()
            else ", as `rk-agent rollout` writes them"
        )
        raise ConfigError(
            f"{file} has no episodes: nothing to rescore, and nothing was written. Expected "
            f"finished episodes, one trajectory a line{resume}."
        )
    opened = RunDir.open(src) if (src / CONFIG_FILE).is_file() else None
    config = opened.config if opened is not None else None
    signed = opened is not None and opened.signed
    spec = RescoreSpec(
        reward, dict(kwargs or {}), step_reward, config=config, trusted=trust_run or signed
    )
    scorer = Rescorer(spec)
    out = Path(output) if output is not None else _default_output(src, scorer.name)
    _check_output(out, src)
    partial = out.parent / f".{out.name}.partial"
    if partial.exists():
        raise ConfigError(
            f"{partial} is left from a rescore that was killed; delete it, then run again."
        )
    count = _worker_count(workers, on_episode, file)
    record = RescoreRecord(
        source=str(src.resolve()),
        reward=reward,
        reward_name=scorer.name,
        reward_sha256=_source_sha256(scorer.reward_fn),
        reward_file=_source_file(scorer.reward_fn),
        kwargs=spec.kwargs,
        step_reward=step_reward,
        step_reward_sha256=_source_sha256(scorer.step_fn) if scorer.step_fn else None,
        success_rule=scorer.success_rule,
    )
    try:
        with ExitStack() as stack:
            stack.callback(scorer.close)
            # Signed (for its final name) only at the end, when the source vouches for it.
            run = RunDir.create(partial, _new_config(config, reward, out, first), signed=False)
            stack.callback(run.close)
            writer = _Writer(partial / TRAJECTORIES_FILE, config.group_size if config else None)
            if config is None:  # a training run's episodes, vouched for by its config
                signed = src.is_dir() and signed_training_env(src, first.env)
                scorer.spec = dataclasses.replace(scorer.spec, trusted=trust_run or signed)
            scorer.choose_success_rule(first.env)
            record.success_rule = scorer.success_rule
            if count:
                episodes.close()  # the workers read the file from its first line
                pool = RescoreWorkers(scorer, file, count)
                stack.callback(pool.close)
                writer.run_lines(file, pool.results(), on_progress)
            else:
                writer.run(scorer, itertools.chain([first], episodes), on_episode, on_progress)
            writer.close(record)
            group_size = config.group_size if config is not None else writer.group_size
            if config is None:  # a bare file: the config learns the tasks now
                run.config = run.config.model_copy(
                    update={"n": max(writer.summary.tasks, 1), "group_size": group_size}
                )
                run._write_config()
            summary = writer.summary.summary(group_size)
            record.created_at = datetime.now(UTC)
            run.write_summary(summary)
            (partial / RESCORE_FILE).write_text(record.model_dump_json(indent=2), "utf-8")
            if (src / PROVENANCE_FILE).is_file():  # what the model saw is the source's
                shutil.copyfile(src / PROVENANCE_FILE, partial / PROVENANCE_FILE)
            run.finish(RunStatus.FINISHED)
            if signed or not env_wants(run.config.env.model_copy(update={"rewards": []})):
                sign_config(partial / CONFIG_FILE, folder=out)
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    reward_mean, success_rate, components = writer.changes()
    return RescoreResult(
        output=str(out),
        record=record,
        summary=summary,
        reward_mean=reward_mean,
        success_rate=success_rate,
        components=components,
        workers=count,
    )


def _worker_count(
    workers: int | None, on_episode: Callable[[Trajectory], None] | None, file: Path
) -> int:
    """The worker processes to rescore on (`rescore`'s ``workers``)."""
    if workers is not None:
        if workers < 0:
            raise ConfigError(f"workers must be 0 or more, got {workers}.")
        if workers and on_episode is not None:
            raise ConfigError(
                "on_episode is called with each episode in this process, so it needs workers=0 "
                f"(or unset), got workers={workers}; use on_progress to follow worker processes."
            )
        return workers
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if on_episode is not None or (cores or 1) < 2 or not can_fork():
        return 0
    if file.stat().st_size < PARALLEL_BYTES:
        return 0
    return min(cores or 1, _MAX_WORKERS)


# ------------------------------------------------------------------------------ writing


class _Side:
    """One side's figures (the source's, or the rescored run's) as running sums and counts."""

    def __init__(self) -> None:
        self.reward = [0.0, 0]
        self.success = [0.0, 0]
        self.metrics: dict[str, list[float]] = {}  # a component seen: [sum, count] of finite

    def add(self, figures: ScoreSide) -> None:
        reward, success, metrics = figures
        if reward is not None and math.isfinite(reward):
            self.reward[0] += reward
            self.reward[1] += 1
        if success is not None:
            self.success[0] += float(success)
            self.success[1] += 1
        sums = self.metrics
        for name, score in metrics:
            entry = sums.get(name) or sums.setdefault(name, [0.0, 0])
            if math.isfinite(score):
                entry[0] += score
                entry[1] += 1


def _change(before: list[float], after: list[float]) -> ScoreChange:
    return ScoreChange(
        before=before[0] / before[1] if before[1] else None,
        after=after[0] / after[1] if after[1] else None,
    )


class _Writer:
    """Takes each rescored line, in file order, into the new run: its line (written a batch at a
    time), its summary, the counts and the change against the source."""

    def __init__(self, file: Path, group_size: int | None) -> None:
        self.file = file
        self.summary = SummaryBuilder(group_size)
        self.before, self.after = _Side(), _Side()
        self._counts = [0, 0, 0, 0]  # episodes, unscored, rescored, invalid
        self._batch: list[bytes] = []
        self.group_size = 1

    def changes(self) -> tuple[ScoreChange, ScoreChange, dict[str, ScoreChange]]:
        """The mean reward, the success rate and each component's mean, before and after."""
        before, after = self.before, self.after
        none = [0.0, 0]
        names = sorted(before.metrics.keys() | after.metrics.keys())
        return (
            _change(before.reward, after.reward),
            _change(before.success, after.success),
            {n: _change(before.metrics.get(n, none), after.metrics.get(n, none)) for n in names},
        )

    def run(
        self,
        scorer: Rescorer,
        episodes: Iterator[Trajectory],
        on_episode: Callable[[Trajectory], None] | None,
        on_progress: Callable[[int], None] | None,
    ) -> None:
        """Rescore ``episodes`` here. Each episode is freed as the next is read: a batch of
        episodes (a few hundred objects each) kept the garbage collector walking them, about
        40 % of the time on 10,000 episodes."""
        for t in episodes:
            new = scorer.rescore(t)
            self.take(RescoredLine.of(t, new))
            if on_episode is not None:
                on_episode(new)
            if on_progress is not None:
                on_progress(self._counts[0])

    def run_lines(
        self,
        file: Path,
        chunks: Iterator[list[RescoredLine]],
        on_progress: Callable[[int], None] | None,
    ) -> None:
        """Take the lines worker processes rescored (`RescoreWorkers.results`), repeated
        episode ids left out as the reader leaves them out (`unique_episodes`)."""

        def lines() -> Iterable[RescoredLine]:
            for chunk in chunks:
                yield from chunk
                if on_progress is not None:  # every line of the chunk is taken by now
                    on_progress(self._counts[0])

        for line in unique_episodes(file, lines(), attrgetter("id")):
            self.take(line)

    def take(self, line: RescoredLine) -> None:
        # Plain ints here, copied into the record at the end: a model's setattr is slow.
        counts = self._counts
        counts[0] += 1
        if line.sample >= self.group_size:
            self.group_size = line.sample + 1
        if line.unscored:
            counts[1] += 1
        else:
            counts[2] += 1
            counts[3] += line.invalid
        self.summary.add_facts(line.facts)
        self.before.add(line.before)
        self.after.add(line.after)
        self._batch.append(line.line)
        if len(self._batch) >= _BATCH:
            append_lines(self.file, self._batch)
            self._batch.clear()

    def close(self, record: RescoreRecord) -> None:
        """Write the last batch; put the counts into the record."""
        append_lines(self.file, self._batch)
        self._batch.clear()
        record.episodes, record.unscored, record.rescored, record.invalid = self._counts


# ------------------------------------------------------------------------------ helpers


def _default_output(source: Path, name: str) -> Path:
    stem = source.stem if source.is_file() else source.name
    if source.is_file() and source.name == TRAJECTORIES_FILE:
        stem = source.parent.name
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "reward"
    return source.parent / f"{stem}-rescored-{safe}"


def _check_output(out: Path, source: Path) -> None:
    if out.exists():
        raise ConfigError(
            f"{out} already exists; rescore writes a new run and never overwrites one. Choose "
            "another -o/--output, or delete it first."
        )
    src = source.resolve()
    if out.resolve() == src or src in out.resolve().parents:
        raise ConfigError(
            f"the output {out} is inside the source run {source}; rescore never writes into "
            "its source. Choose an -o/--output outside it."
        )


def _new_config(
    config: RolloutConfig | None, reward: str, out: Path, first: Trajectory | None
) -> RolloutConfig:
    """The source's config with the new reward (a bare file: the env and model it names)."""
    if config is None:
        config = RolloutConfig(
            env=EnvSetup(name=first.env if first else "tools"), model=first.model if first else None
        )
    env = config.env.model_copy(update={"rewards": [reward]})
    return config.model_copy(update={"env": env, "output": str(out)})


def _source_sha256(fn: Any) -> str | None:
    try:
        source = inspect.getsource(inspect.unwrap(fn))
    except (OSError, TypeError):
        return None
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def _source_file(fn: Any) -> str | None:
    try:
        return inspect.getsourcefile(inspect.unwrap(fn))
    except TypeError:
        return None
