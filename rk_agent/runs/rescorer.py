"""One stored episode scored again: the new rewards called as the environment calls its own.

`Rescorer` holds a rescore's rewards (the episode reward combined as `ChatEnv` combines its
``rewards``, and an optional step reward) and the environment's success rule, and scores an
episode again (`Rescorer.rescore`), or a line of a trajectories file (`Rescorer.rescore_line`),
giving a `RescoredLine`: the new line, and what the summary and the change against the source
take of it. `rk_agent.runs.rescore` drives it in its own process;
`rk_agent.runs.rescore_workers` builds one in each worker process from the same
`RescoreSpec`, so every process scores alike.

Main names: `Rescorer`, `RescoreSpec`, `RescoredLine`, `ScoreSide`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from rk_agent.envs.env_setup import EnvSetup, reward_names
from rk_agent.envs.tool import ToolResult
from rk_agent.envs.turn import ToolCallRecord
from rk_agent.errors import RkAgentError
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_dir import parse_trajectory_line, trajectory_bytes
from rk_agent.runs.run_wants import env_wants
from rk_agent.runs.summary import EpisodeFacts
from rk_agent.runs.trajectory import Trajectory, Turn
from rk_agent.types import EpisodeReturn, EvaluateResult, StepOutput

__all__ = ["RescoreSpec", "RescoredLine", "Rescorer", "ScoreSide"]

_ENV_METRICS = ("tool_calls", "tool_success", "parse_error")  # the env's own step metrics
_DEFAULT_RULE = "the default rule (a valid score of at least 1.0)"


@dataclass(frozen=True)
class RescoreSpec:
    """What a `Rescorer` is built from (picklable: a worker process builds its own).

    Attributes:
        reward: the episode reward as given (a name, ``module:fn`` or ``file.py::fn``).
        kwargs: options passed to it on every call.
        step_reward: the step reward, when the steps are rescored too.
        env: the environment whose success rule decides success (the source's first episode's),
            when it is chosen (`Rescorer.choose_success_rule`).
        config: the source run's configuration, when it has one (the environment's settings).
        trusted: the environment may be built even when it names a file or a command to run
            (the source is this user's own run, or the caller trusts it); else it is built only
            when it names nothing that runs (`rk_agent.runs.run_wants.env_wants`).
    """

    reward: str
    kwargs: dict[str, Any]
    step_reward: str | None = None
    env: str | None = None
    config: RolloutConfig | None = None
    trusted: bool = False


class ScoreSide(NamedTuple):
    """An episode's figures on one side of a rescore: its valid episode reward (``None`` when
    missing or invalid), its success verdict and its valid components, ``(name, score)``."""

    reward: float | None
    success: bool | None
    metrics: tuple[tuple[str, float], ...]

    @classmethod
    def of(cls, t: Trajectory) -> ScoreSide:
        """The figures of ``t``."""
        metrics: tuple[tuple[str, float], ...] = ()
        if t.episode is not None:
            metrics = tuple(
                (name, m.score) for name, m in t.episode.metrics.items() if m.is_score_valid
            )
        return cls(t.episode_reward, t.success, metrics)


class RescoredLine(NamedTuple):
    """One episode rescored, as the process that writes the new run takes it (picklable).

    Attributes:
        id: the episode's id.
        line: its new line (`trajectory_bytes`), without the newline.
        facts: what the new run's summary takes of it.
        before: its figures in the source.
        after: its figures rescored.
        unscored: it failed before it was scored, and is copied as it was.
        invalid: it was rescored and its new result is invalid.
        sample: its sample index in its task's group.
    """

    id: str
    line: bytes
    facts: EpisodeFacts
    before: ScoreSide
    after: ScoreSide
    unscored: bool
    invalid: bool
    sample: int

    @classmethod
    def of(cls, old: Trajectory, new: Trajectory) -> RescoredLine:
        """The line of ``new``, the episode ``old`` rescored."""
        return cls(
            id=new.id,
            line=trajectory_bytes(new),
            facts=EpisodeFacts.of(new),
            before=ScoreSide.of(old),
            after=ScoreSide.of(new),
            unscored=old.episode is None,
            invalid=old.episode is not None
            and new.episode is not None
            and not new.episode.is_score_valid,
            sample=new.sample,
        )

    def plain(self) -> tuple[Any, ...]:
        """The line as plain nested tuples (what a worker sends: they pickle without a Python
        call per object, half the time); `RescoredLine.from_plain` reads them back."""
        return (self.id, self.line, self.facts.plain(), tuple(self.before), tuple(self.after),
                self.unscored, self.invalid, self.sample)  # fmt: skip

    @classmethod
    def from_plain(cls, plain: tuple[Any, ...]) -> RescoredLine:
        """The line `RescoredLine.plain` gave."""
        id_, line, facts, before, after, unscored, invalid, sample = plain
        return cls(
            id_, line, EpisodeFacts.from_plain(facts), ScoreSide._make(before),
            ScoreSide._make(after), unscored, invalid, sample,
        )  # fmt: skip


class Rescorer:
    """The new rewards, called as the environment calls its own, and the success rule.

    Building one loads the rewards and checks the options (`ConfigError`, `UnknownNameError`);
    `choose_success_rule` builds the environment. `close` it when done.
    """

    def __init__(self, spec: RescoreSpec) -> None:
        from rk_agent.rewards.compose import combine
        from rk_agent.rewards.decorator import check_options
        from rk_agent.rewards.registry import get_reward_function

        self.spec = spec
        self.name = reward_names([spec.reward])[0]
        self.reward_fn = get_reward_function(spec.reward)
        check_options(self.reward_fn, spec.kwargs)
        self.bound = dict(spec.kwargs)
        # As ChatEnv builds its episode reward from `rewards` (envs.env_rewards.weighted_reward).
        self.episode = combine({self.name: self.reward_fn}, name="episode_reward")
        self.step_fn = get_reward_function(spec.step_reward) if spec.step_reward else None
        self.step = (
            combine({reward_names([spec.step_reward])[0]: self.step_fn}, name="step_reward")
            if spec.step_reward and self.step_fn
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

    def choose_success_rule(self, env: str) -> None:
        """Success by the ``is_success`` of the environment ``env`` (the source's config's,
        built without its MCP servers or task file); the default rule when it cannot be
        built, or may not be (``spec.trusted``). ``spec.env`` says which it was."""
        self.spec = dataclasses.replace(self.spec, env=env)
        config = self.spec.config
        setup = config.env if config is not None else EnvSetup(name=env)
        setup = setup.model_copy(update={"mcp": None, "tasks": None, "rewards": []})
        wants = [] if self.spec.trusted else env_wants(setup)
        if wants:
            from rk_agent.envs.base import ChatEnv

            self._env = ChatEnv()
            self.is_success = self._env.is_success
            self.success_rule = (
                f"{_DEFAULT_RULE}: the source is not a run rk-agent wrote here, and building its "
                f"environment would {'; '.join(wants)} (rescore with --trust-run to use its "
                "is_success)"
            )
            return
        try:
            self._env = setup.make()
        except (RkAgentError, OSError) as exc:
            from rk_agent.envs.base import ChatEnv

            self._env = ChatEnv()
            self.success_rule = (
                f"{_DEFAULT_RULE}: the environment {setup.name!r} could not be built ({exc})"
            )
        else:
            self.success_rule = f"the {setup.name!r} environment's is_success"
        self.is_success = self._env.is_success

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
        if self._env is not None:
            self._env.close()

    def rescore_line(self, file: Path, number: int, line: bytes) -> RescoredLine:
        """Line ``number`` of ``file`` read and rescored.

        Raises:
            DataError: the line is not a trajectory.
            RewardInputError: the reward cannot be called with the episode's arguments.
        """
        old = parse_trajectory_line(file, number, line)
        return RescoredLine.of(old, self.rescore(old))

    def rescore(self, t: Trajectory) -> Trajectory:
        """The episode scored again (`rk_agent.runs.rescore`); one that failed before it
        was scored is returned as it was."""
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
        return self._scored(t, turns, result.model_copy(update={"step_outputs": steps}))

    def unscorable(self, file: Path, number: int, line: bytes, error: str) -> RescoredLine:
        """Line ``number`` of ``file`` with an invalid episode result carrying ``error``
        (its rewards are not called: they killed the process that called them), its step
        rewards as recorded."""
        old = parse_trajectory_line(file, number, line)
        if old.episode is None:
            return RescoredLine.of(old, old)
        result = EvaluateResult.invalid(error, reason=f"reward {self.name!r}: {error}")
        steps = list(old.episode.step_outputs or [])
        episode = result.model_copy(update={"step_outputs": steps})
        return RescoredLine.of(old, self._scored(old, old.turns, episode))

    def _scored(self, t: Trajectory, turns: list[Turn], episode: EvaluateResult) -> Trajectory:
        return t.model_copy(
            update={
                "turns": turns,
                "episode": episode,
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
                        "reward_fault": EpisodeReturn.fault_of(result),
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
