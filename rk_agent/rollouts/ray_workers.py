"""Rollouts on Ray actors: the episodes of one run shared out to N worker processes or machines.

`run_rollouts_on_workers` is what ``rk-agent rollout --workers N`` runs, and what
`rk_agent.rollouts.engine.run_rollouts` hands a config with ``workers`` set to. It plans the
same episodes (`plan_slots`: task ``i`` has seed ``seed + i``, whatever N is) and hands them out
in small chunks to N `RolloutWorker` actors. Each worker is the engine's loop in its own
process: its own event loop, policy client (a copy of the run's policy) and environments,
playing up to its share of ``concurrency`` episodes at once, each with the engine's retry rule.
It streams every finished episode back as it ends.

The driver (this process) stays the run's only writer: it applies the failure policy (a GRPO
group is kept or dropped whole, whichever workers played its samples), appends each episode to
the run directory, feeds the progress bar and, through the caller, writes the summary.

A worker that dies (killed, out of memory, node lost) or raises is a `WorkerFailure` (in the
result and in the run's ``worker_failures.jsonl``). The episodes it had not sent back go to the
front of the queue and are played by the other workers and by one started in its place (up to
``RayOptions.max_restarts``); an episode id is written once, whoever sends it. Ctrl-C (or a
cancelled task) kills the workers; every episode already written stays, and ``--resume``
plays the rest.

Ray is started for the run (``ray.init``: quiet, no dashboard unless asked, a small object
store) and stopped after it, or joined at ``RayOptions.address``; a Ray that the caller has
already initialised is used as it is and left running. Ray starts and stops its own processes
(they die with this one by Ray's own parent-death signal); a Ray started here is also shut
down by `rk_agent.processes`' exit hook, should a run end without leaving `ray_session`.

Main names: `run_rollouts_on_workers`, `WorkerPool`, `RolloutWorker`, `WorkerRunResult`,
`ray_session`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.env_setup import EnvFactory, EnvSetup
from rk_agent.errors import ConfigError, WorkerError
from rk_agent.gc_tuning import episode_finished, fewer_gc_pauses
from rk_agent.policies.policy import Policy, warm_up_policy
from rk_agent.processes import on_exit
from rk_agent.rollouts.episode import EpisodeSlot
from rk_agent.rollouts.slots import EpisodeSink, RolloutResult, plan_slots, play_slot
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_dir import RunDir
from rk_agent.runs.trajectory import Trajectory
from rk_agent.runs.workers import (
    LOCAL_MODEL_REFUSED,
    RayOptions,
    WorkerFailure,
    WorkerFailureKind,
    import_ray,
)

__all__ = [
    "RolloutWorker",
    "WorkerPool",
    "WorkerRunResult",
    "ray_session",
    "run_rollouts_on_workers",
]

logger = logging.getLogger(__name__)

_CHUNKS_PER_WORKER = 8
"""A worker's share of concurrency is handed out in about this many chunks, so that a chunk
that finishes late does not leave the worker idle and a lost worker loses little."""


_BATCH_WINDOW_S = 0.05
"""A worker sends the episodes that finish within this long of each other in one message:
Ray's cost per message is paid by the driver, the one process every episode goes through."""


@dataclass(repr=False)  # RolloutResult's short repr
class WorkerRunResult(RolloutResult):
    """What `run_rollouts_on_workers` produced: `RolloutResult`, the workers lost on the way,
    and how long the workers took to start."""

    worker_failures: list[WorkerFailure] = field(default_factory=list)
    startup_s: float = 0.0
    """Seconds until every worker was up, before the first episode was handed out (starting
    Ray itself not included)."""


async def run_rollouts_on_workers(
    config: RolloutConfig,
    *,
    policy: Policy,
    make_env: Callable[[], ChatEnv],
    env_name: str | None = None,
    run_dir: RunDir | None = None,
    done: Iterable[str] = (),
    on_episode: Callable[[Trajectory], None] | None = None,
) -> WorkerRunResult:
    """Play every planned episode not in ``done`` on ``config.workers`` Ray actors.

    The arguments are `rk_agent.rollouts.engine.run_rollouts`' and mean the same. The workers
    get a copy of ``policy`` (it must pickle: an `OpenAIPolicy` that has not sent a request
    yet does, as does any plain Python policy) and build their own environments: from the
    factory's `EnvSetup` when ``make_env`` is an `rk_agent.envs.env_setup.EnvFactory` (the task file
    and reward paths are read where the worker runs), else from ``make_env`` itself, pickled.

    Raises:
        NotAvailableError: Ray is not installed (the message says how to install it).
        ConfigError: the policy cannot be sent to the workers (a model loaded in this
            process), the cluster lacks the resources the workers ask for, or no ``env_name``
            was given for a ``make_env`` that is not an `EnvFactory`.
        WorkerError: every worker was lost and none could be started in its place; what was
            played is written, and ``--resume`` plays the rest.
    """
    workers = config.workers or 1
    if env_name is None:
        if not isinstance(make_env, EnvFactory):
            raise ConfigError(
                "run_rollouts_on_workers needs env_name= (the name trajectories record) when "
                "make_env is not an EnvFactory; or pass make_env=config.env.factory()."
            )
        env_name = make_env.name
    _check_policy(policy)
    dataset_size, env_source = _env_source(make_env)
    finished = set(done)
    slots = [s for s in plan_slots(config, dataset_size=dataset_size) if s.id not in finished]
    result = WorkerRunResult(skipped=config.n * config.group_size - len(slots))
    sink = EpisodeSink(
        config.failure_policy, config.group_size, run_dir, result, on_episode, finished
    )
    if not slots:
        return result
    shares = _shares(max(config.concurrency, workers), workers, len(slots))

    def lost(failure: WorkerFailure) -> None:
        result.worker_failures.append(failure)
        if run_dir is not None:
            run_dir.append_worker_failure(failure)

    with ray_session(config.ray, len(shares)) as ray:
        pool = WorkerPool(ray, config, policy, env_source, env_name, shares, on_failure=lost)
        try:
            await pool.play(slots, sink.add)
        except BaseException:
            pool.stop()  # Ctrl-C or an error: the workers are killed, nothing is waited for
            raise
        result.startup_s = pool.startup_s
        await pool.close()
    return result


@contextlib.contextmanager
def ray_session(options: RayOptions, workers: int) -> Iterator[ModuleType]:
    """Ray, ready for ``workers`` workers: started (then stopped), joined, or the caller's.

    A local Ray gets enough CPUs and custom resources for the workers, no dashboard unless
    ``options.dashboard``, an object store of ``options.object_store_mb`` and no usage
    statistics; its processes' logs stay in Ray's session folder (``/tmp/ray/session_latest``)
    instead of this console. Ray's ``uv run`` integration (which would build a fresh virtual
    environment for the workers) is off unless ``RAY_ENABLE_UV_RUN_RUNTIME_ENV`` is set.

    Raises:
        NotAvailableError: Ray is not installed.
        ConfigError: the cluster lacks the CPUs or custom resources the workers ask for.
    """
    _ray_environment()
    ray = import_ray()
    if ray.is_initialized():
        _check_resources(ray, options, workers)
        yield ray
        return
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    if options.address is None:
        _local_token_auth()
        kwargs.update(
            num_cpus=max(os.cpu_count() or 1, math.ceil(workers * options.num_cpus)),
            resources={name: workers * amount for name, amount in options.resources.items()},
            include_dashboard=options.dashboard,
            object_store_memory=options.object_store_mb * 1024 * 1024,
        )
    else:
        kwargs["address"] = options.address
    try:
        ray.init(**kwargs)
    except ConnectionError as exc:
        raise ConfigError(
            f"could not join the Ray cluster at {options.address!r}: {exc}. Is it running "
            "(`ray status`)? Start one with `ray start --head`, or leave out --ray-address to "
            "start Ray on this machine for the run."
        ) from exc
    cancel_exit = on_exit(ray.shutdown)  # a trainer's workers, kept between steps, never closed
    try:
        _check_resources(ray, options, workers)
        yield ray
    finally:
        ray.shutdown()
        cancel_exit()


def _ray_environment() -> None:
    """Ray's settings for a run, unless the user set them: no usage statistics, no copy of a
    ``uv run`` environment for the workers (Ray would pack the working folder and build a new
    virtual environment: minutes and gigabytes, when the workers can use this one)."""
    os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None and os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] == "0":
        # Ray read the variable when it was imported; this is where it keeps what it read.
        constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False  # type: ignore[attr-defined]


def _local_token_auth() -> None:
    """Token authentication for the Ray this run starts, asked for rather than defaulted to.

    Ray (2.52 and later) turns token authentication on for a cluster that ``ray.init`` starts
    when ``RAY_AUTH_MODE`` is unset, and says so in a warning on every run ("Token
    authentication is enabled for this Ray cluster..."). Asking for it is the same cluster (the
    same token, made once in ``~/.ray/auth_token``) without the warning; a ``RAY_AUTH_MODE``
    the user set is kept.
    """
    if "RAY_AUTH_MODE" in os.environ:
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    raylet = sys.modules.get("ray._raylet")
    config = getattr(raylet, "Config", None)
    if config is not None:  # Ray caches its config when imported: read the variable again
        config.initialize("")


class RolloutWorker:
    """One worker (a Ray actor): plays the episodes it is sent, the engine's way.

    It holds a copy of the run's policy and a pool of up to ``concurrency`` environments, and
    plays at most that many episodes at once across every `play` call it is serving.

    Args:
        index: its number, for logs.
        config: the run's configuration (sampling, timeout, failure policy).
        policy: its copy of the policy.
        env_source: an `EnvSetup` (``.factory()`` is called here) or an environment factory.
        env_name: recorded with each trajectory.
        concurrency: episodes played at once.
        cwd: the driver's working folder, entered when it exists here (relative paths in the
            configuration then mean what they meant to the driver).
        episode: plays one episode instead of the engine's rule: ``await episode(worker, env,
            slot)`` returns a `Trajectory`, or a tuple whose first item is one (what GRPO's
            token-level rollout sends back with it); ``None``: the engine's rule (retries
            included). It must pickle.
    """

    def __init__(
        self,
        index: int,
        config: RolloutConfig,
        policy: Policy,
        env_source: Any,
        env_name: str,
        concurrency: int,
        cwd: str | None = None,
        episode: Any = None,
    ) -> None:
        if cwd is not None and Path(cwd).is_dir():
            os.chdir(cwd)
        self.index = index
        self.config = config
        self.policy = policy
        self.env_name = env_name
        self.concurrency = concurrency
        self.episode = episode
        self.make_env: Callable[[], ChatEnv] = (
            env_source.factory() if isinstance(env_source, EnvSetup) else env_source
        )
        self._pool: asyncio.Queue[ChatEnv | None] | None = None

    async def warm_up(self) -> int:
        """Get ready to play before the first episode is handed out, so that what a process
        pays once (imports, reading the task file, opening the policy's HTTP client) is paid
        while the workers start, not while the first episodes wait: one environment is built
        for the pool, and the policy's ``warm_up()`` is awaited when it has one. Returns the
        process id.

        Raises:
            Exception: what building the environment raised (the worker cannot play).
        """
        pool = self._env_pool()
        if not pool.empty():
            env = pool.get_nowait()
            try:
                env = env if env is not None else self.make_env()
            finally:
                pool.put_nowait(env)  # None again when building it failed
        await warm_up_policy(self.policy, self.concurrency)
        return os.getpid()

    async def play(self, slots: list[EpisodeSlot]) -> AsyncIterator[list[Any]]:
        """Play ``slots``, yielding the finished episodes as they end (a list per yield; each a
        `Trajectory`, or what ``episode`` returns).

        Raises:
            Exception: whatever an episode raised instead of recording (a bug, not a
                failure of the model or the environment, which are recorded).
        """
        finished: asyncio.Queue[Any] = asyncio.Queue()

        async def one(slot: EpisodeSlot) -> None:
            try:
                finished.put_nowait(await self._play(slot))
                episode_finished()
            except Exception as exc:  # sent to the driver, which records the worker lost
                finished.put_nowait(exc)

        tasks = [asyncio.create_task(one(slot)) for slot in slots]
        try:
            left = len(slots)
            with fewer_gc_pauses():  # a Ray worker's process is rk-agent's own (gc_tuning)
                while left:
                    batch = [await finished.get()]
                    if left > 1:  # let a few more finish: one message for several episodes
                        await asyncio.sleep(_BATCH_WINDOW_S)
                    while not finished.empty():
                        batch.append(finished.get_nowait())
                    for item in batch:
                        if isinstance(item, BaseException):
                            raise item
                    left -= len(batch)
                    yield batch
        finally:
            for task in tasks:
                task.cancel()

    async def close(self) -> None:
        """Close the environments and the policy."""
        while self._pool is not None and not self._pool.empty():
            env = self._pool.get_nowait()
            if env is not None:
                env.close()
        await self.policy.aclose()

    def _env_pool(self) -> asyncio.Queue[ChatEnv | None]:
        """The environments: ``concurrency`` places, ``None`` where none is built yet; the
        last one given back is taken first (a light load builds few)."""
        if self._pool is None:  # made here: it belongs to the actor's event loop
            self._pool = asyncio.LifoQueue()
            for _ in range(self.concurrency):
                self._pool.put_nowait(None)
        return self._pool

    async def _play(self, slot: EpisodeSlot) -> Any:
        pool = self._env_pool()
        env = await pool.get()
        if env is None:
            try:
                env = self.make_env()
            except BaseException:
                pool.put_nowait(None)
                raise
        try:
            if self.episode is None:
                item = await play_slot(
                    env, self.policy, slot, self.config, self.env_name, self.make_env
                )
            else:
                item = await self.episode(self, env, slot)
        except BaseException:
            pool.put_nowait(None)  # the environment may be broken: build a new one
            raise
        trajectory = _trajectory(item)
        timed_out = trajectory.failure is not None and trajectory.stop_reason.value == "timeout"
        # A timed-out step may still run in its thread: that environment is not reused.
        pool.put_nowait(None if timed_out else env)
        return item


class WorkerPool:
    """The driver's side: N workers, kept from one `play` to the next until `close`.

    `play` hands out chunks of episodes, passes each finished one to ``on_item`` (once per
    episode id, whoever sent it), and replaces lost workers. `run_rollouts_on_workers` uses one
    pool per run; a training loop can keep one for every step (the workers keep their policy
    copies and environments).

    Args:
        ray: the Ray module, initialised (`ray_session`).
        config: sampling, timeout and failure policy for the workers; ``config.ray`` for what
            each reserves and ``ray.max_restarts``.
        policy: copied to every worker.
        env_source: an `EnvSetup`, or an environment factory that pickles.
        env_name: recorded with each trajectory.
        shares: each worker's concurrency (one worker per entry).
        episode: see `RolloutWorker`.
        on_failure: called with each `WorkerFailure`.

    Raises:
        ConfigError: ``policy`` does not pickle.
    """

    def __init__(
        self,
        ray: ModuleType,
        config: RolloutConfig,
        policy: Policy,
        env_source: Any,
        env_name: str,
        shares: list[int],
        *,
        episode: Any = None,
        on_failure: Callable[[WorkerFailure], None] | None = None,
    ) -> None:
        self.ray = ray
        self.shares = shares
        self.on_failure = on_failure
        self.max_restarts = config.ray.max_restarts
        self.restarts_left = config.ray.max_restarts
        self.failures: list[WorkerFailure] = []
        self.startup_s = 0.0
        self.live: dict[int, Any] = {}
        self.handles: list[Any] = []
        self.pending: deque[EpisodeSlot] = deque()
        self.outstanding: set[str] = set()
        self.delivered: set[str] = set()
        self.on_item: Callable[[Any], None] = lambda item: None
        options: dict[str, Any] = {"num_cpus": config.ray.num_cpus}
        if config.ray.resources:
            options["resources"] = dict(config.ray.resources)
        actor = ray.remote(RolloutWorker).options(**options)
        policy_ref = self._put_policy(policy)
        cwd = str(Path.cwd())

        def start(index: int) -> Any:
            handle = actor.remote(
                index, config, policy_ref, env_source, env_name, shares[index], cwd, episode
            )
            self.live[index] = handle
            self.handles.append(handle)
            return handle

        self._start = start

    def _put_policy(self, policy: Policy) -> Any:
        try:
            return self.ray.put(policy)
        except Exception as exc:  # pickling errors come as TypeError and others
            raise ConfigError(
                f"the policy {policy!r} cannot be sent to the workers ({type(exc).__name__}: "
                f"{exc}). Each worker needs its own copy: use a served model (--base-url, "
                "--provider fireworks|openai) with a policy that has not been used yet, or a "
                "picklable policy object."
            ) from exc

    async def play(self, slots: list[EpisodeSlot], on_item: Callable[[Any], None]) -> None:
        """Play ``slots`` on the workers; ``on_item`` gets each finished one, once.

        Raises:
            WorkerError: every worker was lost and ``ray.max_restarts`` allows no more.
        """
        self.on_item = on_item
        self.pending, self.outstanding, self.delivered = deque(), set(), set()
        self.changed = asyncio.Condition()
        started = time.perf_counter()
        new = [self._start(i) for i in range(len(self.shares)) if i not in self.live]
        if new:
            # Every worker is up and warmed up before any is fed, so the chunks are shared out
            # evenly (one that fails to start is found, recorded and replaced when it is fed).
            await asyncio.wait([asyncio.ensure_future(_ready(handle)) for handle in new])
            self.startup_s = time.perf_counter() - started
        self.pending.extend(slots)
        await asyncio.gather(*(self._supervise(index) for index in list(self.live)))
        unplayed = len(self.pending) + len(self.outstanding)
        if unplayed:
            last = self.failures[-1].message if self.failures else "unknown"
            raise WorkerError(
                f"every rollout worker was lost ({len(self.failures)} failures; the last: "
                f"{last}) and no more can be started (ray.max_restarts {self.max_restarts}); "
                f"{unplayed} episodes are left. What finished is saved: resume the run to play "
                "the rest, after fixing what killed the workers (see worker_failures.jsonl)."
            )

    async def close(self) -> None:
        """Let the live workers close their environments and policies, then stop every one."""
        for handle in list(self.live.values()):
            with contextlib.suppress(Exception):
                await handle.close.remote()
        self.live.clear()
        self.stop()

    def stop(self) -> None:
        """Kill every worker at once (Ctrl-C, an error): nothing is waited for."""
        for handle in self.handles:
            with contextlib.suppress(Exception):
                self.ray.kill(handle)
        self.live.clear()

    async def _supervise(self, index: int) -> None:
        chunk = max(1, math.ceil(self.shares[index] / _CHUNKS_PER_WORKER))
        feeders = math.ceil(self.shares[index] / chunk) + 2
        while True:
            handle = self.live[index]
            lost: list[str] = []
            outcomes = await asyncio.gather(
                *(self._feed(handle, chunk, lost) for _ in range(feeders)), return_exceptions=True
            )
            errors = [o for o in outcomes if isinstance(o, BaseException)]
            if not errors:
                return
            del self.live[index]
            self._record(index, errors[0], lost)
            if self.restarts_left == 0:
                return
            self.restarts_left -= 1
            self._start(index)

    async def _feed(self, handle: Any, size: int, lost: list[str]) -> None:
        while (chunk := await self._take(size)) is not None:
            waiting = {slot.id: slot for slot in chunk}
            try:
                async for ref in handle.play.remote(chunk):
                    for item in await ref:
                        waiting.pop(_trajectory(item).id, None)
                        await self._deliver(item)
                if waiting:
                    raise WorkerError(f"the worker ended without {len(waiting)} episodes")
            except Exception:
                with contextlib.suppress(Exception):
                    self.ray.kill(handle)  # its other chunks come back too, and nothing late
                lost.extend(waiting)
                await self._requeue([s for s in chunk if s.id in waiting])
                raise

    async def _take(self, size: int) -> list[EpisodeSlot] | None:
        async with self.changed:
            while not self.pending:
                if not self.outstanding:
                    return None
                await self.changed.wait()
            chunk = [self.pending.popleft() for _ in range(min(size, len(self.pending)))]
            self.outstanding.update(slot.id for slot in chunk)
            return chunk

    async def _deliver(self, item: Any) -> None:
        episode_id = _trajectory(item).id
        self.outstanding.discard(episode_id)
        if episode_id not in self.delivered:  # once, whoever sent it
            self.delivered.add(episode_id)
            self.on_item(item)
            episode_finished()
        if not self.outstanding and not self.pending:
            async with self.changed:
                self.changed.notify_all()

    async def _requeue(self, slots: list[EpisodeSlot]) -> None:
        async with self.changed:
            for slot in reversed(slots):
                self.outstanding.discard(slot.id)
                if slot.id not in self.delivered:
                    self.pending.appendleft(slot)
            self.changed.notify_all()

    def _record(self, index: int, error: BaseException, lost: list[str]) -> None:
        failure = WorkerFailure(
            worker=index, kind=_failure_kind(self.ray, error), message=_message(error),
            replayed=sorted(set(lost), key=_slot_order),
        )  # fmt: skip
        logger.warning(
            "rollout worker %d lost (%s: %s); %d unfinished episodes go to other workers",
            index, failure.kind.value, failure.message, len(failure.replayed),
        )  # fmt: skip
        self.failures.append(failure)
        if self.on_failure is not None:
            self.on_failure(failure)


def _trajectory(item: Any) -> Trajectory:
    """The trajectory of what a worker sent: a `Trajectory`, or a tuple that starts with one."""
    return item if isinstance(item, Trajectory) else item[0]


async def _ready(handle: Any) -> None:
    with contextlib.suppress(Exception):  # a worker that cannot start fails when it is fed
        await handle.warm_up.remote()


def _failure_kind(ray: ModuleType, error: BaseException) -> WorkerFailureKind:
    exceptions = ray.exceptions
    text = str(error).lower()
    if isinstance(error, exceptions.OutOfMemoryError) or "out of memory" in text:
        return WorkerFailureKind.OUT_OF_MEMORY
    if isinstance(error, exceptions.NodeDiedError) or "node has died" in text:
        return WorkerFailureKind.NODE_LOST
    if isinstance(error, exceptions.RayActorError):
        return WorkerFailureKind.DIED
    return WorkerFailureKind.ERROR


def _message(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    text = lines[0] if lines else ""
    return f"{type(error).__name__}: {text}"[:500]


def _slot_order(slot_id: str) -> tuple[int, int]:
    task, _, sample = slot_id.partition("-")
    return int(task), int(sample)


def _shares(concurrency: int, workers: int, episodes: int) -> list[int]:
    """Each worker's share of ``concurrency`` (no more workers than episodes)."""
    workers = max(1, min(workers, episodes))
    base, extra = divmod(concurrency, workers)
    return [base + (1 if i < extra else 0) for i in range(workers)]


def _env_source(make_env: Callable[[], ChatEnv]) -> tuple[int | None, Any]:
    """The dataset's size and what the workers build their environments from."""
    if isinstance(make_env, EnvFactory):  # ship its EnvSetup; each worker builds its own
        make_env.close()  # the environment it built as a check is not played here
        return make_env.dataset_size, make_env.setup
    env = make_env()
    try:
        return (len(env.dataset) if env.dataset is not None else None), make_env
    finally:
        env.close()


def _check_policy(policy: Policy) -> None:
    hf_policy = sys.modules.get("rk_agent.policies.hf_policy")  # not loaded: not an HFPolicy
    if hf_policy is not None and isinstance(policy, hf_policy.HFPolicy):
        raise ConfigError(LOCAL_MODEL_REFUSED)


def _check_resources(ray: ModuleType, options: RayOptions, workers: int) -> None:
    """Refuse a cluster that cannot place every worker (they would wait forever)."""
    have = ray.cluster_resources()
    need = {"CPU": options.num_cpus, **options.resources}
    short = [
        f"{name}: {workers} x {amount:g} = {workers * amount:g} needed, {have.get(name, 0):g} there"
        for name, amount in need.items()
        if amount > 0 and have.get(name, 0) < workers * amount
    ]
    if short:
        raise ConfigError(
            f"the Ray cluster cannot place {workers} rollout workers ({'; '.join(short)}). "
            "Lower --workers or --worker-cpus, or add nodes with those resources "
            "(ray start --resources '{\"NAME\": AMOUNT}')."
        )
