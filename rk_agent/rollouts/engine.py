"""The rollout engine: many episodes at once, written as they finish, resumable.

`run_rollouts` plans ``n`` tasks x ``group_size`` samples, skips those a resumed run already
has, and plays the rest with ``concurrency`` workers (asyncio; environment code runs in
threads). Each finished episode goes through the failure policy and is appended to the run
directory at once, so an interrupted run keeps everything finished so far.

Main names: `run_rollouts`, `plan_slots`, `RolloutResult`.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.spec import EnvFactory
from rk_agent.errors import ConfigError
from rk_agent.rollouts.config import FailurePolicy, RolloutConfig
from rk_agent.rollouts.episode import EpisodeSlot, play_episode
from rk_agent.rollouts.policy import Policy
from rk_agent.rollouts.run_dir import RunDir
from rk_agent.rollouts.trajectory import Trajectory

__all__ = ["RolloutResult", "plan_slots", "run_rollouts"]


@dataclass
class RolloutResult:
    """What a call to `run_rollouts` produced (this call only; a resumed run adds to a file)."""

    trajectories: list[Trajectory] = field(default_factory=list)
    dropped_groups: list[int] = field(default_factory=list)
    skipped: int = 0

    def __repr__(self) -> str:
        # Short on purpose: asyncio.run() reprs the main task's result when it restores the
        # SIGINT handler (CPython 3.11), and a full repr of 1,000 trajectories takes ~0.5 s.
        return (
            f"RolloutResult({len(self.trajectories)} trajectories, "
            f"{len(self.dropped_groups)} dropped groups, {self.skipped} skipped)"
        )


def plan_slots(config: RolloutConfig, *, dataset_size: int | None) -> list[EpisodeSlot]:
    """Every episode of a run: task ``i`` gets seed ``config.env.seed + i``, ``group_size`` samples.

    With a dataset, task ``i`` is row ``i`` (``n`` may not exceed the dataset's size).
    """
    slots = []
    for task_index in range(config.n):
        options = {"task_index": task_index} if dataset_size is not None else None
        for sample in range(config.group_size):
            slots.append(EpisodeSlot(task_index, sample, config.env.seed + task_index, options))
    return slots


async def run_rollouts(
    config: RolloutConfig,
    *,
    policy: Policy,
    make_env: Callable[[], ChatEnv],
    env_name: str | None = None,
    run_dir: RunDir | None = None,
    done: Iterable[str] = (),
    on_episode: Callable[[Trajectory], None] | None = None,
) -> RolloutResult:
    """Play every planned episode not in ``done`` and return them.

    Args:
        config: the run's configuration.
        policy: the model.
        make_env: builds a fresh environment (one per concurrent worker), such as
            ``config.env.factory()``.
        env_name: recorded with each trajectory; default: the factory's ``name`` when
            ``make_env`` is an `EnvFactory`.
        run_dir: where finished episodes are appended (``None``: keep them in memory only).
        done: ids (``"<task>-<sample>"``) already finished, skipped on resume.
        on_episode: called with each finished episode, written or dropped (progress bars).

    With ``config.workers`` set, the run is played on that many Ray actors instead
    (`rk_agent.rollouts.ray_workers.run_rollouts_on_workers`, which returns a `RolloutResult`
    that also lists the workers lost).

    Raises:
        ConfigError: no ``env_name`` and ``make_env`` is not an `EnvFactory`.
    """
    if config.workers is not None:
        from rk_agent.rollouts.ray_workers import run_rollouts_on_workers

        return await run_rollouts_on_workers(
            config, policy=policy, make_env=make_env, env_name=env_name, run_dir=run_dir,
            done=done, on_episode=on_episode,
        )  # fmt: skip
    if env_name is None:
        if not isinstance(make_env, EnvFactory):
            raise ConfigError(
                "run_rollouts needs env_name= (the name trajectories record) when make_env is "
                "not an EnvFactory; or pass make_env=config.env.factory()."
            )
        env_name = make_env.name
    first_env = make_env()
    dataset_size = len(first_env.dataset) if first_env.dataset is not None else None
    finished = set(done)
    slots = [s for s in plan_slots(config, dataset_size=dataset_size) if s.id not in finished]
    result = RolloutResult(skipped=config.n * config.group_size - len(slots))
    sink = _Sink(config.failure_policy, config.group_size, run_dir, result, on_episode, finished)
    queue: asyncio.Queue[EpisodeSlot] = asyncio.Queue()
    for slot in slots:
        queue.put_nowait(slot)
    envs = [first_env] + [make_env() for _ in range(min(config.concurrency, len(slots)) - 1)]

    async def worker(env: ChatEnv) -> None:
        while True:
            try:
                slot = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            trajectory = await _play_with_policy(env, policy, slot, config, env_name, make_env)
            if trajectory.failure is not None and trajectory.stop_reason.value == "timeout":
                env = make_env()  # a timed-out step may still run in its thread: don't reuse
            sink.add(trajectory)

    try:
        await asyncio.gather(*(worker(env) for env in envs))
    finally:
        for env in envs:
            env.close()
    return result


async def _play_with_policy(
    env: ChatEnv,
    policy: Policy,
    slot: EpisodeSlot,
    config: RolloutConfig,
    env_name: str,
    make_env: Callable[[], ChatEnv],
) -> Trajectory:
    attempts = config.failure_policy.max_attempts if config.failure_policy.action == "retry" else 1
    trajectory: Trajectory | None = None
    for attempt in range(1, attempts + 1):
        trajectory = await play_episode(
            env,
            policy,
            slot,
            sampling=config.sampling,
            env_name=env_name,
            timeout_s=config.episode_timeout_s,
            attempt=attempt,
        )
        if trajectory.failure is None or not trajectory.failure.retryable:
            break
    assert trajectory is not None
    return trajectory


class _Sink:
    """Applies the failure policy and writes finished episodes (groups when dropping)."""

    def __init__(
        self,
        policy: FailurePolicy,
        group_size: int,
        run_dir: RunDir | None,
        result: RolloutResult,
        on_episode: Callable[[Trajectory], None] | None,
        finished: set[str],
    ) -> None:
        self.policy = policy
        self.group_size = group_size
        self.run_dir = run_dir
        self.result = result
        self.on_episode = on_episode
        self.pending: dict[int, list[Trajectory]] = defaultdict(list)
        # On resume, samples of a group already on disk count towards completing it.
        self.already: dict[int, int] = defaultdict(int)
        for slot_id in finished:
            self.already[int(slot_id.split("-")[0])] += 1

    def add(self, trajectory: Trajectory) -> None:
        if self.on_episode is not None:
            self.on_episode(trajectory)
        if self.policy.action != "drop_group":
            self._write(trajectory)
            return
        group = self.pending[trajectory.task_index]
        group.append(trajectory)
        if len(group) + self.already[trajectory.task_index] < self.group_size:
            return
        del self.pending[trajectory.task_index]
        failed = [t for t in group if t.failure is not None]
        if not failed:
            for member in group:
                self._write(member)
            return
        reason = "; ".join(
            f"{t.id}: {t.failure.kind.value}: {t.failure.message}" for t in failed if t.failure
        )
        self.result.dropped_groups.append(trajectory.task_index)
        if self.run_dir is not None:
            self.run_dir.append_dropped(trajectory.task_index, reason, group)

    def _write(self, trajectory: Trajectory) -> None:
        if self.run_dir is not None:
            self.run_dir.append(trajectory)
        self.result.trajectories.append(trajectory)
