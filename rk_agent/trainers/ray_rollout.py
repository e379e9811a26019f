"""GRPO's episodes on Ray workers: `EpisodeRollout(workers=N)` against a served policy.

With a vLLM (or compatible) server, the trainer's process only waits while episodes play:
generating is the server's work, but the environments and the token bookkeeping of every
episode run here, on one core. `RayEpisodes` plays them on N Ray actors instead
(`rk_agent.rollouts.ray_workers.WorkerPool`, kept from one training step to the next): each
worker holds its own `VLLMPolicy` on the same server and plays its share of a step's episodes
token in, token out (`EpisodeTokens`, as in this process), and sends back each episode's
trajectory with its tokens, log-probabilities and mask. What TRL gets is the same as without
workers, row for row.

Main names: `RayEpisodes`, `TokenEpisode`, `EpisodeTokenRecord`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.env_setup import EnvFactory
from rk_agent.policies.episode_tokens import EpisodeTokens, SuffixRenderer
from rk_agent.policies.policy import SamplingParams
from rk_agent.policies.vllm_policy import VLLMPolicy
from rk_agent.rollouts.episode import EpisodeSlot, play_episode
from rk_agent.rollouts.ray_workers import RolloutWorker, WorkerPool, _shares, ray_session
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.trajectory import Trajectory
from rk_agent.runs.workers import RayOptions, WorkerFailure

__all__ = ["EpisodeTokenRecord", "RayEpisodes", "TokenEpisode"]


@dataclass
class EpisodeTokenRecord:
    """What `EpisodeTokens` recorded for one episode, sent back from a worker (its attributes)."""

    prompt_ids: list[int] | None
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    budget_hit: bool


@dataclass
class TokenEpisode:
    """A worker's episode hook (`RolloutWorker`'s ``episode``): one GRPO episode, token-level.

    The worker's policy (its copy of a `VLLMPolicy`) is connected on the first episode, and one
    `SuffixRenderer` serves all its episodes, as in the trainer's process.
    """

    budget: int
    sampling: SamplingParams
    env_name: str
    timeout_s: float | None

    async def __call__(
        self, worker: RolloutWorker, env: ChatEnv, slot: EpisodeSlot
    ) -> tuple[Trajectory, EpisodeTokenRecord]:
        renderer = await _renderer(worker)
        recorder = EpisodeTokens(worker.policy, renderer, self.budget)  # type: ignore[arg-type]
        trajectory = await play_episode(
            env, recorder, slot, sampling=self.sampling, env_name=self.env_name,
            timeout_s=self.timeout_s,
        )  # fmt: skip
        record = EpisodeTokenRecord(
            recorder.prompt_ids, recorder.completion_ids, recorder.env_mask, recorder.logprobs,
            recorder.budget_hit,
        )  # fmt: skip
        return trajectory, record


async def _renderer(worker: RolloutWorker) -> SuffixRenderer:
    state = worker.__dict__.setdefault("_token_episode", {"lock": asyncio.Lock()})
    async with state["lock"]:
        if "renderer" not in state:
            await worker.policy.connect()  # type: ignore[attr-defined]  # a VLLMPolicy
            state["renderer"] = SuffixRenderer(worker.policy)  # type: ignore[arg-type]
    renderer: SuffixRenderer = state["renderer"]
    return renderer


class RayEpisodes:
    """Plays a training step's episodes on Ray workers that last from step to step.

    Args:
        workers: how many.
        ray: where they run and what each reserves (`RayOptions`, or its fields).
        env_factory: the environments (an `EnvFactory` sends its spec; any other factory must
            pickle).
        env_name: recorded with each trajectory.
    """

    def __init__(
        self,
        workers: int,
        ray: RayOptions | Mapping[str, Any] | None,
        env_factory: Callable[[], ChatEnv],
        env_name: str,
    ) -> None:
        self.workers = workers
        self.ray = RayOptions.model_validate(ray or {})
        self.env_source: Any = (
            env_factory.setup if isinstance(env_factory, EnvFactory) else env_factory
        )
        self.env_name = env_name
        self.failures: list[WorkerFailure] = []
        self._stack = contextlib.ExitStack()
        self._pool: WorkerPool | None = None

    async def play(
        self,
        slots: list[EpisodeSlot],
        policy: VLLMPolicy,
        episode: TokenEpisode,
    ) -> list[tuple[Trajectory, EpisodeTokenRecord]]:
        """Play ``slots`` (their ids unique) and return what each sent back, in their order.

        ``policy`` (a `VLLMPolicy` that has not sent a request) and ``episode`` go to the
        workers when they start, at the first call.
        """
        if self._pool is None:
            ray = self._stack.enter_context(ray_session(self.ray, self.workers))
            config = RolloutConfig(
                n=len(slots), concurrency=len(slots), workers=self.workers, ray=self.ray,
                sampling=episode.sampling,
            )  # fmt: skip
            shares = _shares(len(slots), self.workers, len(slots))
            self._pool = WorkerPool(
                ray, config, policy, self.env_source, self.env_name, shares, episode=episode,
                on_failure=self.failures.append,
            )  # fmt: skip
        items: dict[str, tuple[Trajectory, EpisodeTokenRecord]] = {}
        try:
            await self._pool.play(slots, lambda item: items.__setitem__(item[0].id, item))
        except BaseException:
            self.close()
            raise
        return [items[slot.id] for slot in slots]

    def close(self) -> None:
        """Stop the workers, and Ray if it was started for them."""
        if self._pool is not None:
            self._pool.stop()
            self._pool = None
        self._stack.close()
