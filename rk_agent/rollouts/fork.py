"""Forking a recorded episode: continuations from its turn K with a live model.

``rk-agent rollout --fork RUN::ID@K --n 8`` plays 8 continuations of episode ``ID`` of run
``RUN`` from its turn ``K``: each starts with the episode's task and seed, its first ``K``
recorded turns are played into the environment (restoring its state) and kept as recorded, and
the policy plays on from turn ``K``. The result is an ordinary run: one group (the episode's
task index, samples ``0 .. N-1``) that GRPO and ``rk-agent compare`` read as any other. The
turns copied from the source say so (``Turn.copied_from``: ``RUN::ID``): another policy played
them. The fork plays the source's environment, task and seed; its episodes are scored by the
environment's rewards, or by the rewards the fork's config gives (``--reward``).

The state is restored by replay (`rk_agent.runs.replay`), so before anything is played the
first ``K`` turns are replayed once and compared with the record: an environment that answers
otherwise (its state cannot be restored by replay) is refused.

A fork of a run from elsewhere whose environment names files, commands or URLs needs
``--trust-run`` (`rk_agent.runs.run_trust`).

Main names: `ForkPoint`, `fork_config`, `fork_slots`, `fork_vouched`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rk_agent.errors import ConfigError
from rk_agent.rollouts.episode import EpisodeSlot
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.replay import env_setup, find_episode, replay_trajectory, source_env
from rk_agent.runs.run_wants import env_wants
from rk_agent.runs.trajectory import Trajectory

__all__ = ["ForkPoint", "fork_config", "fork_slots", "fork_vouched"]

# An episode id: a rollout run's <task>-<sample>, a training run's s<step>-<task>-<sample>.
_SPEC = re.compile(r"(?P<run>.+)::(?P<episode>(?:s\d+-)?\d+-\d+)@(?P<turn>\d+)")


@dataclass(frozen=True)
class ForkPoint:
    """Turn ``turn`` of episode ``episode`` of run ``run`` (``RUN::ID@K``)."""

    run: str
    episode: str
    turn: int

    @classmethod
    def parse(cls, spec: str) -> ForkPoint:
        """Read ``RUN::ID@K``.

        Raises:
            ConfigError: not of that form.

        Example:
            >>> ForkPoint.parse("runs/solver::3-0@2")
            ForkPoint(run='runs/solver', episode='3-0', turn=2)
        """
        match = _SPEC.fullmatch(spec)
        if match is None:
            raise ConfigError(
                f"--fork expects RUN::ID@K (a run, an episode id, a turn: runs/a::3-0@2), got "
                f"{spec!r}."
            )
        return cls(match["run"], match["episode"], int(match["turn"]))

    def __str__(self) -> str:
        return f"{self.run}::{self.episode}@{self.turn}"


def fork_config(config: RolloutConfig, *, trust_run: bool = False) -> RolloutConfig:
    """``config`` for its fork: the source run's environment, one group; the fork checked, its
    source run named by its absolute path (a ``--resume`` may run from another folder).

    Raises:
        ConfigError: a bad ``RUN::ID@K``, no such run or episode, a turn out of range, or an
            environment whose state the replay of the first ``K`` turns does not restore.
        UntrustedRunError: the source's environment names files, commands or URLs, and the
            source is neither this user's own run nor trusted (``trust_run``;
            `rk_agent.runs.replay.env_setup`).
    """
    if config.fork is None:
        return config
    point = ForkPoint.parse(config.fork)
    source = _source(point)
    if not 0 <= point.turn < len(source.turns):
        raise ConfigError(
            f"cannot fork {point}: episode {point.episode} has {len(source.turns)} turns; give "
            f"a turn from 0 to {len(source.turns) - 1}."
        )
    setup = env_setup(point.run, source, trust_run=trust_run, doing="forking it")
    env = setup.make()  # as the source played: the replay must restore what it recorded
    try:
        report = replay_trajectory(env, source, turns=point.turn)
    finally:
        env.close()
    first = report.first_difference
    if first is not None:
        where = f"turn {first.turn}" if first.turn is not None else "the task"
        raise ConfigError(
            f"cannot fork {point}: the environment's state cannot be restored by replay (the "
            f"replay of the first {point.turn} turns differs at {where}: {first.describe()})."
        )
    absolute = ForkPoint(str(Path(point.run).resolve()), point.episode, point.turn)
    if config.env.rewards:  # the fork's own rewards score its continuations
        setup = setup.model_copy(update={"rewards": list(config.env.rewards)})
    return config.model_copy(update={"env": setup, "n": 1, "fork": str(absolute)})


def fork_vouched(fork: str) -> bool:
    """Whether this user's key vouches for the environment a fork plays (its source run's is
    signed, or it names nothing that runs): then the fork's own run is signed too; a fork of a
    run trusted only by ``--trust-run`` is not, and needs it again."""
    point = ForkPoint.parse(fork)
    setup, signed = source_env(point.run, _source(point))
    return signed or not env_wants(setup)


def fork_slots(fork: str, group_size: int, *, dataset_size: int | None = None) -> list[EpisodeSlot]:
    """The fork's episodes: ``group_size`` samples of the source episode's task and seed, each
    starting with its first ``K`` recorded turns, marked as copied from it (a turn the source
    copied itself keeps its first source)."""
    point = ForkPoint.parse(fork)
    source = _source(point)
    options = {"task_index": source.task_index} if dataset_size is not None else None
    seed = source.seed if source.seed is not None else 0
    origin = f"{point.run}::{point.episode}"
    prefix = tuple(
        t.model_copy(update={"copied_from": t.copied_from or origin})
        for t in source.turns[: point.turn]
    )
    return [
        EpisodeSlot(source.task_index, sample, seed, options, prefix)
        for sample in range(group_size)
    ]


def _source(point: ForkPoint) -> Trajectory:
    return find_episode(point.run, point.episode)
