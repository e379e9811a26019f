"""Re-scoring a run: every stored episode scored again with another reward, into a new run.

`rescore` reads a run (a run directory, a training run's folder or a bare trajectories file)
one episode at a time, scores each again with a reward (a registered name, ``module:fn`` or
``file.py::fn``) exactly as an environment scores an episode that ``rk-agent rollout --reward``
replaced the rewards of, and writes the results as a new run directory. No model and no tool is
called: the reward reads the recorded conversation, the task's ground truth and metadata.

What changes in each episode, and what does not:

- the **episode reward** (`EvaluateResult`, its components under the reward's name, as
  ``--reward`` records them), the **success** verdict (the environment's rule, from the new
  score) and the **total reward** (the step rewards plus the new episode score);
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
(`rk_agent.rollouts.summary.SummaryBuilder`: a few numbers of each episode, the watch's
outcome only until its group is complete), so memory stays nearly flat however large the run
(``benchmarks/bench_rescore.py``).

Main names: `rescore`, `RescoreResult`, `RescoreRecord`, `ScoreChange`, `RESCORE_FILE`.

Example:
    >>> # rescore("runs/tools-1", "length", kwargs={"max_length": 200})  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import math
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rk_agent.envs.env_setup import EnvSetup, reward_names
from rk_agent.envs.tool import ToolResult
from rk_agent.envs.turn import ToolCallRecord
from rk_agent.errors import ConfigError, RkAgentError
from rk_agent.rollouts.config import RolloutConfig
from rk_agent.rollouts.run_dir import (
    CONFIG_FILE,
    PROVENANCE_FILE,
    TRAJECTORIES_FILE,
    RunDir,
    RunStatus,
    append_lines,
    iter_trajectories,
    trajectory_line,
)
from rk_agent.rollouts.summary import RunSummary, SummaryBuilder
from rk_agent.rollouts.trajectory import Trajectory, Turn
from rk_agent.types import EvaluateResult, StepOutput

__all__ = ["RESCORE_FILE", "RescoreRecord", "RescoreResult", "ScoreChange", "rescore"]

RESCORE_FILE = "rescore.json"
"""A rescored run's `RescoreRecord`."""

_BATCH = 256  # episodes written per append
_ENV_METRICS = ("tool_calls", "tool_success", "parse_error")  # the env's own step metrics


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
    """

    output: str
    record: RescoreRecord
    summary: RunSummary
    reward_mean: ScoreChange
    success_rate: ScoreChange
    components: dict[str, ScoreChange]


def rescore(
    source: str | Path,
    reward: str,
    *,
    output: str | Path | None = None,
    kwargs: Mapping[str, Any] | None = None,
    step_reward: str | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
) -> RescoreResult:
    """Score every episode of ``source`` again with ``reward`` and write a new run.

    Args:
        source: a run directory, a training run's folder or a trajectories JSONL file.
        reward: a registered reward name, ``package.module:fn`` or ``path/to/file.py::fn``.
        output: the new run directory (default: ``SOURCE-rescored-<reward name>`` beside the
            source); it must not exist.
        kwargs: options passed to the reward on every call (checked against its parameters).
        step_reward: a reward to score every turn with too (default: step rewards are kept).
        on_episode: called with each rescored episode, in file order (progress).

    Returns:
        The new run's record, summary, and the change against the source.

    Raises:
        ConfigError: the source is not a run, the reward is unknown or does not load, an option
            is not one the reward takes, or the output exists.
        DataError: a line of the source is not a trajectory (file and line named).
        RewardInputError: the reward cannot be called with an episode's arguments.
    """
    src = Path(source)
    if not src.exists():
        raise ConfigError(
            f"no run at {src}: expected a run directory made by `rk-agent rollout`, a training "
            "run's folder or a trajectories JSONL file."
        )
    episodes = iter_trajectories(src)  # refuses a folder that is not a run, before any work
    config = RunDir.open(src).config if (src / CONFIG_FILE).is_file() else None
    bound = dict(kwargs or {})
    name = reward_names([reward])[0]
    scorer = _Scorer(reward, name, bound, step_reward)
    out = Path(output) if output is not None else _default_output(src, name)
    _check_output(out, src)
    partial = out.parent / f".{out.name}.partial"
    if partial.exists():
        raise ConfigError(
            f"{partial} is left from a rescore that was killed; delete it, then run again."
        )
    record = RescoreRecord(
        source=str(src.resolve()),
        reward=reward,
        reward_name=name,
        reward_sha256=_source_sha256(scorer.reward_fn),
        reward_file=_source_file(scorer.reward_fn),
        kwargs=bound,
        step_reward=step_reward,
        step_reward_sha256=_source_sha256(scorer.step_fn) if scorer.step_fn else None,
        success_rule="",
    )
    first = next(episodes, None)
    try:
        with ExitStack() as stack:
            stack.callback(scorer.close)
            if first is not None:
                scorer.choose_success_rule(first.env, config)
            record.success_rule = scorer.success_rule
            run = RunDir.create(partial, _new_config(config, reward, out, first))
            stack.callback(run.close)
            writer = _Writer(
                partial / TRAJECTORIES_FILE,
                scorer,
                record,
                on_episode,
                config.group_size if config is not None else None,
            )
            if first is not None:
                writer.run(itertools.chain([first], episodes))
            writer.close()
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
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return RescoreResult(
        output=str(out),
        record=record,
        summary=summary,
        reward_mean=writer.reward.change(),
        success_rate=writer.success.change(),
        components={k: v.change() for k, v in writer.components().items()},
    )


# ------------------------------------------------------------------------------ scoring


class _Scorer:
    """The new rewards, called as the environment calls its own, and the success rule."""

    def __init__(
        self, reward: str, name: str, bound: dict[str, Any], step_reward: str | None
    ) -> None:
        from rk_agent.rewards.compose import combine
        from rk_agent.rewards.decorator import check_options
        from rk_agent.rewards.registry import get_reward_function

        self.reward_fn = get_reward_function(reward)
        check_options(self.reward_fn, bound)
        self.bound = bound
        # As ChatEnv builds its episode reward from `rewards` (envs.base._weighted).
        self.episode = combine({name: self.reward_fn}, name="episode_reward")
        self.step_fn = get_reward_function(step_reward) if step_reward else None
        self.step = (
            combine({reward_names([step_reward])[0]: self.step_fn}, name="step_reward")
            if step_reward and self.step_fn
            else None
        )
        self._runner: asyncio.Runner | None = None
        self._env: Any = None
        self.is_success: Callable[[EvaluateResult], bool] = lambda _: False
        self.success_rule = "none: the source holds no episodes"

    def call(self, fn: Any, **kwargs: Any) -> EvaluateResult:
        out = fn(**kwargs)
        if inspect.iscoroutine(out):  # an async reward: one event loop for the whole rescore
            if self._runner is None:
                self._runner = asyncio.Runner()
            out = self._runner.run(out)
        if not isinstance(out, EvaluateResult):
            raise TypeError(f"a decorated reward returned {type(out).__name__}")
        return out

    def choose_success_rule(self, env_name: str, config: RolloutConfig | None) -> None:
        """The environment's ``is_success`` (built without its MCP servers or task file);
        the default rule when it cannot be built."""
        setup = config.env if config is not None else EnvSetup(name=env_name)
        setup = setup.model_copy(update={"mcp": None, "tasks": None, "rewards": []})
        try:
            self._env = setup.make()
        except (RkAgentError, OSError) as exc:
            from rk_agent.envs.base import ChatEnv

            self._env = ChatEnv()
            self.success_rule = (
                f"the default rule (a valid score of at least 1.0): the environment "
                f"{setup.name!r} could not be built ({exc})"
            )
        else:
            self.success_rule = f"the {setup.name!r} environment's is_success"
        self.is_success = self._env.is_success

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
        if self._env is not None:
            self._env.close()

    def rescore(self, t: Trajectory) -> Trajectory:
        """The episode scored again (module docstring); one that failed before it was scored
        is returned as it was."""
        if t.episode is None:
            return t
        turns, steps = t.turns, list(t.episode.step_outputs or [])
        if self.step is not None:
            turns, steps = self._rescore_steps(t)
        result = self.call(
            self.episode, messages=t.conversation, ground_truth=t.task.ground_truth,
            metadata=t.task.metadata, turn=len(t.turns), stop_reason=t.stop_reason,
            **self.bound,
        )  # fmt: skip
        episode = result.model_copy(update={"step_outputs": steps})
        total = sum(turn.reward for turn in turns)
        if episode.is_score_valid:
            total += episode.score
        return t.model_copy(
            update={
                "turns": turns,
                "episode": episode,
                "total_reward": total,
                "success": self.is_success(episode),
            }
        )

    def _rescore_steps(self, t: Trajectory) -> tuple[list[Turn], list[StepOutput]]:
        messages = t.opening_messages
        turns, steps = [], []
        for turn in t.turns:
            messages.append(turn.assistant)
            messages.extend(turn.environment)
            result = self.call(
                self.step, messages=list(messages), ground_truth=t.task.ground_truth,
                metadata=t.task.metadata, turn=turn.index + 1, tool_calls=_records(turn),
            )  # fmt: skip
            kept = {k: v for k, v in turn.metrics.items() if k in _ENV_METRICS}
            metrics = {**kept, **result.metrics}
            turns.append(
                turn.model_copy(
                    update={
                        "reward": result.score,
                        "reward_valid": result.is_score_valid,
                        "metrics": metrics,
                    }
                )
            )
            steps.append(
                StepOutput(
                    step_index=turn.index, reward=result.score, metrics=metrics,
                    reason=result.reason,
                )
            )  # fmt: skip
        return turns, steps


def _records(turn: Turn) -> list[ToolCallRecord]:
    """The turn's tool calls with their recorded outcomes (the step reward's ``tool_calls``)."""
    results = {m.tool_call_id: m.text for m in turn.environment if m.role == "tool"}
    return [
        ToolCallRecord(
            call,
            ToolResult(
                content=results.get(call.id, ""),
                ok=outcome.ok,
                error_kind=outcome.error_kind,
                latency_s=outcome.latency_s,
            ),
        )
        for call, outcome in zip(turn.assistant.tool_calls or [], turn.tool_calls, strict=False)
    ]


# ------------------------------------------------------------------------------ writing


class _Mean:
    """A mean before and after, kept as running sums."""

    def __init__(self) -> None:
        self.sums = [0.0, 0.0]
        self.counts = [0, 0]

    def add(self, side: int, value: float | None) -> None:
        if value is not None and math.isfinite(value):
            self.sums[side] += value
            self.counts[side] += 1

    def change(self) -> ScoreChange:
        before, after = (s / c if c else None for s, c in zip(self.sums, self.counts, strict=True))
        return ScoreChange(before=before, after=after)


class _Writer:
    """Streams the source through the scorer into the new run, a batch at a time."""

    def __init__(
        self,
        file: Path,
        scorer: _Scorer,
        record: RescoreRecord,
        on_episode: Callable[[Trajectory], None] | None,
        group_size: int | None,
    ) -> None:
        self.file = file
        self.scorer = scorer
        self.record = record
        self.on_episode = on_episode
        self.summary = SummaryBuilder(group_size)
        self.reward = _Mean()
        self.success = _Mean()
        self._components: dict[str, _Mean] = {}
        self._counts = [0, 0, 0, 0]  # episodes, unscored, rescored, invalid
        self.group_size = 1

    def components(self) -> dict[str, _Mean]:
        return dict(sorted(self._components.items()))

    def run(self, episodes: Iterator[Trajectory]) -> None:
        # The batch holds lines, not episodes: each episode is freed as the next is read. A
        # batch of episodes (a few hundred objects each) kept the garbage collector walking
        # them: about 40 % of the time on 10,000 episodes.
        batch: list[str] = []
        for t in episodes:
            new = self.scorer.rescore(t)
            self._count(t, new)
            self.summary.add(new)
            batch.append(trajectory_line(new))
            if len(batch) >= _BATCH:
                append_lines(self.file, batch)
                batch.clear()
            if self.on_episode is not None:
                self.on_episode(new)
        append_lines(self.file, batch)

    def _count(self, old: Trajectory, new: Trajectory) -> None:
        # Plain ints here, copied into the record at the end: a model's setattr is slow.
        counts = self._counts
        counts[0] += 1
        if new.sample >= self.group_size:
            self.group_size = new.sample + 1
        if old.episode is None:
            counts[1] += 1
        else:
            counts[2] += 1
            counts[3] += new.episode is not None and not new.episode.is_score_valid
        components = self._components
        for side, t in enumerate((old, new)):
            self.reward.add(side, t.episode_reward)
            if t.success is not None:
                self.success.add(side, float(t.success))
            if t.episode is not None:
                for name, metric in t.episode.metrics.items():
                    if metric.is_score_valid:
                        mean = components.get(name) or components.setdefault(name, _Mean())
                        mean.add(side, metric.score)

    def close(self) -> None:
        """Put the counts into the record."""
        record = self.record
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
