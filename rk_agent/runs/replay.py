"""Replaying a recorded episode: a determinism check for environments.

`replay_episode` builds a fresh environment as the run's config builds it, resets it with the
episode's recorded seed and task, and plays the recorded assistant messages into it turn by
turn, through the methods the engine uses (``ChatEnv.play_turn``, or ``ChatEnv.reject_turn``
for a reply that could not be parsed). It checks that the task, the opening the model was sent
(`Trajectory.opening_messages`), every turn's environment messages, step reward, step metrics
and tool outcomes, and at the end the episode's result (score, metrics), success and stop
reason are what the run recorded, and reports the first difference of each turn
(`Difference`: the field, recorded and replayed values, shortened).

`replay_trajectory` does the same into an environment the caller holds (``turns=K`` replays only
the first K turns: what `rk-agent rollout --fork` uses to restore an environment's state).

A run from elsewhere is replayed only when its environment is registered here, or with
``trust_run`` (`env_setup`, `rk_agent.runs.run_trust`).

Main names: `replay_episode`, `replay_trajectory`, `ReplayReport`, `TurnCheck`, `Difference`,
`env_setup`, `source_env`, `find_episode`, `replay_turn`, `reset_for`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, computed_field

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.env_setup import EnvSetup
from rk_agent.envs.turn import TurnResult
from rk_agent.errors import ConfigError
from rk_agent.runs.run_dir import CONFIG_FILE, RunDir, iter_trajectories
from rk_agent.runs.run_trust import require_trust, signed_training_env
from rk_agent.runs.run_wants import env_wants
from rk_agent.runs.trajectory import Trajectory, Turn
from rk_agent.types import EvaluateResult, StopReason

__all__ = [
    "Difference",
    "ReplayReport",
    "TurnCheck",
    "env_setup",
    "find_episode",
    "replay_episode",
    "replay_trajectory",
    "replay_turn",
    "reset_for",
    "source_env",
]

_SHOWN = 80  # characters of a value a difference shows
_LISTED = 5  # episode ids named when the one asked for is missing
_ENDED_BY_ENV = (StopReason.ANSWERED, StopReason.MAX_TURNS)  # the last turn's result said done


class Difference(BaseModel):
    """Where a replay first differs from the record.

    Attributes:
        turn: the turn's index (``None``: the task, or the episode's end).
        field: the path of the value, e.g. ``environment[0].content`` or ``episode.score``.
        recorded: the recorded value, as JSON, shortened.
        replayed: the replayed value, as JSON, shortened.
    """

    turn: int | None
    field: str
    recorded: str
    replayed: str

    def describe(self) -> str:
        """``environment[0].content: recorded '"4"', replayed '"5"'``."""
        return f"{self.field}: recorded {self.recorded}, replayed {self.replayed}"


class TurnCheck(BaseModel):
    """One replayed turn: its first difference, or ``None`` when everything matched."""

    index: int
    difference: Difference | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def matched(self) -> bool:
        """Whether every checked value of the turn matched."""
        return self.difference is None


class ReplayReport(BaseModel):
    """What `replay_episode` found.

    Attributes:
        run: the run replayed from (``None``: a trajectory replayed directly).
        episode: the episode's id.
        env: the environment's name.
        seed: the seed it was reset with.
        recorded_turns: how many turns the episode has.
        task: the first difference of the task, or of the opening the model was sent after the
            reset (``opening``: the task's messages as the environment's reset left them);
            ``None``: the same.
        turns: each replayed turn.
        end: the first difference of the episode's end (result, success, stop reason).
        end_checked: whether the end was compared (not for a partial replay, nor for an
            episode that failed before it was scored).
        note: why the end was not compared, or why the replay stopped early.
    """

    run: str | None = None
    episode: str
    env: str
    seed: int | None
    recorded_turns: int
    task: Difference | None = None
    turns: list[TurnCheck]
    end: Difference | None = None
    end_checked: bool = False
    note: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def matched(self) -> bool:
        """Whether everything compared matched."""
        return self.first_difference is None

    @property
    def first_difference(self) -> Difference | None:
        """The earliest difference: the task's, a turn's, then the end's."""
        found = [self.task, *(t.difference for t in self.turns), self.end]
        return next((d for d in found if d is not None), None)


def replay_episode(
    run: str | Path,
    episode: str,
    *,
    turns: int | None = None,
    env: ChatEnv | None = None,
    trust_run: bool = False,
) -> ReplayReport:
    """Replay episode ``episode`` of ``run`` into a fresh environment and compare.

    Args:
        run: a run directory (its ``config.yaml`` says how the environment is built) or a
            trajectories JSONL file (the environment is then built by its name, default
            arguments).
        episode: the episode's id (``"<task index>-<sample>"``).
        turns: replay only the first ``turns`` turns (their end is then not compared).
        env: replay into this environment instead of building one (it is not closed).
        trust_run: build the run's environment even when it names files, commands or URLs
            and the run is not one rk-agent wrote here (`env_setup`).

    Raises:
        ConfigError: ``run`` is not a run, or has no such episode (some of its ids are named).
        UntrustedRunError: building its environment would run what the run names, and it is
            neither signed here nor trusted (`rk_agent.runs.run_trust`).

    Example:
        >>> report = replay_episode("runs/solver", "0-0")  # doctest: +SKIP
        >>> report.matched
        True
    """
    trajectory = find_episode(run, episode)
    own = env is None
    if env is None:
        env = env_setup(run, trajectory, trust_run=trust_run).make()
    try:
        report = replay_trajectory(env, trajectory, turns=turns)
    finally:
        if own:
            env.close()
    return report.model_copy(update={"run": str(run)})


def env_setup(
    run: str | Path, trajectory: Trajectory, *, trust_run: bool = False, doing: str = "replaying it"
) -> EnvSetup:
    """The environment a run's episodes were played in: its config's, or the recorded name;
    checked first to be this user's own, or trusted (`source_env`).

    Raises:
        UntrustedRunError: building it would import a file, start a command, connect
            somewhere or read a variable the run names (`rk_agent.runs.run_wants`), and the
            run is neither signed by this user's key nor trusted (``trust_run``). ``doing``
            says what the command does with the run, in the message.
    """
    setup, signed = source_env(run, trajectory)
    require_trust(run, env_wants(setup), trust_run=trust_run, signed=signed, doing=doing)
    return setup


def source_env(run: str | Path, trajectory: Trajectory) -> tuple[EnvSetup, bool]:
    """The environment of `env_setup`, unchecked, and whether this user's key vouches for it:
    the run's config is signed (`rk_agent.runs.run_trust`), or, for a training run's folder
    or a trajectories file, a signed training config names that environment."""
    folder = Path(run)
    if (folder / CONFIG_FILE).is_file():
        opened = RunDir.open(folder)
        return opened.config.env, opened.signed
    signed = folder.is_dir() and signed_training_env(folder, trajectory.env)
    return EnvSetup(name=trajectory.env), signed


def find_episode(run: str | Path, episode: str) -> Trajectory:
    """Episode ``episode`` of a run (read one line at a time).

    Raises:
        ConfigError: no episode has that id (the message names some that exist).
    """
    held: list[tuple[int, int, str]] = []
    for trajectory in iter_trajectories(run):
        if trajectory.id == episode:
            return trajectory
        held.append((trajectory.task_index, trajectory.sample, trajectory.id))
    ids = [name for *_, name in sorted(held)]
    some = ", ".join(ids[:_LISTED]) + (f", ... ({len(ids)} in all)" if len(ids) > _LISTED else "")
    raise ConfigError(
        f"{run} has no episode {episode!r}; its episodes are {some or 'none'}. Give an id as "
        "`rk-agent show` lists them (<task index>-<sample>)."
    )


def reset_for(env: ChatEnv, trajectory: Trajectory) -> None:
    """Reset ``env`` as the engine reset it for ``trajectory``: its seed, and its task index
    when the environment plays a dataset (`rk_agent.rollouts.slots.plan_slots`)."""
    options = {"task_index": trajectory.task_index} if env.dataset is not None else None
    env.reset(seed=trajectory.seed, options=options)


def replay_turn(env: ChatEnv, turn: Turn) -> TurnResult:
    """Play a recorded turn into ``env`` as the engine played it (a rejected reply again
    through ``reject_turn``, with its recorded parse error and the feedback it was shown:
    `Turn.parse_feedback`)."""
    if turn.parse_error is not None:
        return env.reject_turn(turn.assistant, turn.parse_error, feedback=turn.parse_feedback)
    return env.play_turn(turn.assistant)


def replay_trajectory(
    env: ChatEnv, trajectory: Trajectory, *, turns: int | None = None
) -> ReplayReport:
    """Reset ``env`` for ``trajectory``, replay its turns (the first ``turns``) and compare.

    An environment that raises while replaying is reported as a difference of that turn
    (``error``), as is one that ends the episode before the record does (``done``).
    """
    count = len(trajectory.turns) if turns is None else min(turns, len(trajectory.turns))
    reset_for(env, trajectory)
    report = ReplayReport(
        episode=trajectory.id,
        env=trajectory.env,
        seed=trajectory.seed,
        recorded_turns=len(trajectory.turns),
        task=_opening_difference(env, trajectory),
        turns=[],
    )
    result: TurnResult | None = None
    for turn in trajectory.turns[:count]:
        try:
            result = replay_turn(env, turn)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raised = Difference(
                turn=turn.index, field="error", recorded="null", replayed=_short(error)
            )
            report.turns.append(TurnCheck(index=turn.index, difference=raised))
            report.note = f"the environment raised at turn {turn.index}; the replay stopped there"
            return report
        last = turn.index == len(trajectory.turns) - 1
        ends = last and trajectory.stop_reason in _ENDED_BY_ENV
        difference = _turn_difference(turn, result, ends)
        report.turns.append(TurnCheck(index=turn.index, difference=difference))
        if result.done and not ends:
            report.note = f"the replayed episode ended at turn {turn.index}, before the record"
            return report
    if count < len(trajectory.turns):
        report.note = f"replayed the first {count} of {len(trajectory.turns)} turns"
        return report
    _check_end(env, trajectory, result, report)
    return report


def _opening_difference(env: ChatEnv, trajectory: Trajectory) -> Difference | None:
    """The task's first difference, else the opening's (what the reset made of the task)."""
    task = _difference(
        None, trajectory.task.model_dump(mode="json"), env.task.model_dump(mode="json"), "task"
    )
    if task is not None:
        return task
    recorded = [m.model_dump(mode="json") for m in trajectory.opening_messages]
    replayed = [m.model_dump(mode="json") for m in env.conversation]
    return _difference(None, recorded, replayed, "opening")


def _check_end(
    env: ChatEnv, trajectory: Trajectory, result: TurnResult | None, report: ReplayReport
) -> None:
    episode, stop = (result.episode, result.stop_reason) if result is not None else (None, None)
    if episode is None and trajectory.stop_reason is StopReason.TRUNCATED:
        episode, stop = env.end_truncated(), StopReason.TRUNCATED  # the context overflowed
    if trajectory.episode is None:
        failed = trajectory.failure.kind.value if trajectory.failure else "no result"
        report.note = f"the episode was not scored ({failed}): its end is not compared"
        return
    report.end_checked = True
    recorded = _end(trajectory.episode, trajectory.stop_reason, trajectory.success)
    replayed = (
        _end(episode, stop, env.is_success(episode)) if episode is not None else {"done": False}
    )
    report.end = _difference(None, recorded, replayed)


def _end(episode: EvaluateResult, stop: StopReason | None, success: bool | None) -> dict[str, Any]:
    return {
        "stop_reason": stop.value if stop is not None else None,
        "episode": episode.model_dump(mode="json"),
        "success": success,
    }


def _turn_difference(turn: Turn, result: TurnResult, ends: bool) -> Difference | None:
    recorded: dict[str, Any] = {
        "environment": [m.model_dump(mode="json") for m in turn.environment],
        "reward": turn.reward,
        "reward_valid": turn.reward_valid,
        "metrics": {k: v.model_dump(mode="json") for k, v in turn.metrics.items()},
        "tool_calls": [{"name": c.name, "ok": c.ok, "error_kind": c.error_kind}
                       for c in turn.tool_calls],
        "done": ends,
    }  # fmt: skip
    step = result.step
    replayed: dict[str, Any] = {
        "environment": [m.model_dump(mode="json") for m in result.messages],
        "reward": step.score,
        "reward_valid": step.is_score_valid,
        "metrics": {k: v.model_dump(mode="json") for k, v in step.metrics.items()},
        "tool_calls": [
            {"name": r.call.function.name, "ok": r.result.ok, "error_kind": r.result.error_kind}
            for r in result.tool_calls
        ],
        "done": result.done,
    }
    return _difference(turn.index, recorded, replayed)


def _difference(
    turn: int | None, recorded: Any, replayed: Any, path: str = ""
) -> Difference | None:
    found = next(_differences(recorded, replayed, path), None)
    if found is None:
        return None
    field, a, b = found
    return Difference(turn=turn, field=field, recorded=_short(a), replayed=_short(b))


def _differences(a: Any, b: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    """Every differing leaf of two JSON values, in order (the first is what is reported)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                yield where, a.get(key, "<missing>"), b.get(key, "<missing>")
            else:
                yield from _differences(a[key], b[key], where)
    elif isinstance(a, list) and isinstance(b, list):
        # the lengths are compared after the shared items
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            yield from _differences(x, y, f"{path}[{index}]")
        if len(a) != len(b):
            yield f"{path} (length)", len(a), len(b)
    elif a != b:
        yield path, a, b


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
