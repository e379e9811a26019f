"""The rollout engine: many episodes at once, written as they finish, resumable.

`run_rollouts` plans ``n`` tasks x ``group_size`` samples, skips those a resumed run already
has, and plays the rest with ``concurrency`` workers (asyncio; environment code runs in
threads). Each finished episode goes through the failure policy and is appended to the run
directory at once, so an interrupted run keeps everything finished so far.

The episodes, the retry rule and the failure policy are `rk_agent.rollouts.slots`', shared with
the Ray workers' engine (`rk_agent.rollouts.ray_workers`), to which `run_rollouts` hands a config
with ``workers`` set.

Main names: `run_rollouts`, `plan_slots`, `RolloutResult`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.env_setup import EnvFactory
from rk_agent.errors import ConfigError
from rk_agent.gc_tuning import episode_finished
from rk_agent.policies.policy import Policy, warm_up_policy
from rk_agent.rollouts.episode import EpisodeSlot
from rk_agent.rollouts.slots import EpisodeSink, RolloutResult, plan_slots, play_slot
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_dir import RunDir
from rk_agent.runs.trajectory import Trajectory

__all__ = ["RolloutResult", "plan_slots", "run_rollouts"]


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
    sink = EpisodeSink(
        config.failure_policy, config.group_size, run_dir, result, on_episode, finished
    )
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
            trajectory = await play_slot(env, policy, slot, config, env_name, make_env)
            if trajectory.failure is not None and trajectory.stop_reason.value == "timeout":
                env = make_env()  # a timed-out step may still run in its thread: don't reuse
            sink.add(trajectory)
            episode_finished()  # out of the collector's way, where an entry point tuned it

    try:
        if slots:  # what it pays once (its connections) before the first episode
            await warm_up_policy(policy, len(envs))
        await asyncio.gather(*(worker(env) for env in envs))
    finally:
        for env in envs:
            env.close()
    return result
