"""A run's episodes, one engine's rules: which episodes, how one is tried, where each goes.

Both engines use these, the one in this process (`rk_agent.rollouts.engine`) and the one on Ray
workers (`rk_agent.rollouts.ray_workers`): `plan_slots` lists a run's episodes (the same
whatever plays them), `play_slot` plays one with the failure policy's retries, and
`EpisodeSink` applies the failure policy to finished episodes (whole GRPO groups with
``drop_group``) and appends them to the run directory, into a `RolloutResult`.

Main names: `RolloutResult`, `plan_slots`, `play_slot`, `EpisodeSink`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from rk_agent.envs.base import ChatEnv
from rk_agent.policies.policy import Policy
from rk_agent.rollouts.episode import EpisodeSlot, play_episode
from rk_agent.runs.config import FailurePolicy, RolloutConfig
from rk_agent.runs.run_dir import RunDir
from rk_agent.runs.trajectory import Trajectory

__all__ = ["EpisodeSink", "RolloutResult", "plan_slots", "play_slot"]


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

    With a dataset, task ``i`` is row ``i`` (``n`` may not exceed the dataset's size). A fork
    (``config.fork``) is one group: the forked episode's task and seed, its first turns given.
    """
    if config.fork is not None:
        from rk_agent.rollouts.fork import fork_slots

        return fork_slots(config.fork, config.group_size, dataset_size=dataset_size)
    slots = []
    for task_index in range(config.n):
        options = {"task_index": task_index} if dataset_size is not None else None
        for sample in range(config.group_size):
            slots.append(EpisodeSlot(task_index, sample, config.env.seed + task_index, options))
    return slots


async def play_slot(
    env: ChatEnv,
    policy: Policy,
    slot: EpisodeSlot,
    config: RolloutConfig,
    env_name: str,
    make_env: Callable[[], ChatEnv],
) -> Trajectory:
    """Play one episode, again while it fails in a way that may pass (``retry`` policy)."""
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
            record_provenance=True,
        )
        if trajectory.failure is None or not trajectory.failure.retryable:
            break
    assert trajectory is not None
    return trajectory


class EpisodeSink:
    """Applies the failure policy and writes finished episodes (groups when dropping)."""

    def __init__(
        self,
        on_failure: FailurePolicy,
        group_size: int,
        run_dir: RunDir | None,
        result: RolloutResult,
        on_episode: Callable[[Trajectory], None] | None,
        finished: set[str],
    ) -> None:
        self.on_failure = on_failure
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
        if self.on_failure.action != "drop_group":
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
