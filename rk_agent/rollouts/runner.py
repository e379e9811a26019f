"""From a `RolloutConfig` to a finished run: build the policy and environments, check every
input before any work starts, run the engine, write the summary.

The environments come from the config's `rk_agent.envs.env_setup.EnvSetup`
(``config.env.factory()``): one is built while checking and is the first the engine plays, and
the factory knows the name trajectories record.

Main names: `prepare_run`, `PreparedRun`, `build_policy`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rk_agent.envs.env_setup import EnvFactory
from rk_agent.errors import ConfigError, require_extra
from rk_agent.policies.function_policy import FunctionPolicy
from rk_agent.policies.policy import Policy
from rk_agent.rollouts.dataset_tasks import fit_to_dataset
from rk_agent.rollouts.engine import RolloutResult, run_rollouts
from rk_agent.rollouts.fork import fork_config, fork_vouched
from rk_agent.runs.config import PLACEMENT_KEYS, RolloutConfig
from rk_agent.runs.provenance import run_provenance
from rk_agent.runs.run_dir import RunDir, RunStatus
from rk_agent.runs.run_trust import require_trust
from rk_agent.runs.run_wants import env_wants, policy_wants
from rk_agent.runs.summary import RunSummary, summarize
from rk_agent.runs.trajectory import Trajectory

__all__ = ["PreparedRun", "build_policy", "describe_model", "prepare_run"]

logger = logging.getLogger(__name__)

EMBEDDED_NOTE = (
    "The embedded model (SmolLM2-135M) is tiny: expect a success rate near 0. Point at a real "
    "model with --base-url http://localhost:8000/v1 --model NAME (vLLM, SGLang, Ollama), "
    "--provider fireworks --model accounts/fireworks/models/..., or --provider openai --model ..."
)


@dataclass
class PreparedRun:
    """Everything checked and built, ready to play; it holds the run directory's lock.

    Use it as a context manager: leaving the block records how the run ended in ``run.json``
    (``finished``; ``interrupted`` on Ctrl-C; ``failed`` with the error on any other exception,
    after saving the summary of what finished) and releases the lock. `finish` records an
    end explicitly.

    Attributes:
        config: the resolved configuration (``output`` set).
        run_dir: the run directory, locked.
        make_env: the environments' factory (``make_env()`` builds one); it knows their name.
        policy: the model.
        done: ids of episodes a resumed run already has.
        uses_embedded_model: whether the embedded default model plays.
        notes: lines to say before the run starts (``--n`` cut to the dataset's size).
    """

    config: RolloutConfig
    run_dir: RunDir
    make_env: EnvFactory
    policy: Policy
    done: set[str]
    uses_embedded_model: bool
    notes: list[str] = field(default_factory=list)

    @property
    def env_name(self) -> str:
        """The environment's registered name, recorded with each trajectory."""
        return self.make_env.name

    async def play(self, on_episode: Callable[[Trajectory], None] | None = None) -> RolloutResult:
        """Run the engine (on Ray workers when ``config.workers`` is set: a
        `rk_agent.rollouts.ray_workers.WorkerRunResult`); the policy is closed afterwards."""
        try:
            return await run_rollouts(
                self.config,
                policy=self.policy,
                make_env=self.make_env,
                env_name=self.env_name,
                run_dir=self.run_dir,
                done=self.done,
                on_episode=on_episode,
            )
        finally:
            await self.policy.aclose()

    def summarize(self) -> RunSummary:
        """Summarise every trajectory on disk (a resumed run includes earlier ones) and save."""
        summary = summarize(
            self.run_dir.read_trajectories(),
            self.config.group_size,
            self.run_dir.worker_failure_kinds(),
        )
        self.run_dir.write_summary(summary)
        return summary

    def finish(self, status: RunStatus, error: str | None = None) -> None:
        """Record how the run ended (``run.json``) and release its lock (once)."""
        self.make_env.close()  # the environment built as a check, if it was never played
        if self.run_dir.writable:
            try:
                self.run_dir.finish(status, error)
            finally:
                self.run_dir.close()

    def __enter__(self) -> PreparedRun:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if not self.run_dir.writable:
            return
        if exc is None:
            self.finish(RunStatus.FINISHED)
            return
        try:
            self.summarize()  # what finished stays summarised, whatever stopped the run
        except Exception as failure:  # the run's own error is the one to report
            logger.warning("could not save the summary of %s: %s", self.run_dir.path, failure)
        if isinstance(exc, KeyboardInterrupt):
            self.finish(RunStatus.INTERRUPTED)
        else:
            self.finish(RunStatus.FAILED, f"{type(exc).__name__}: {exc}")


def prepare_run(
    config: RolloutConfig,
    *,
    api_key: str | None = None,
    resume: str | Path | None = None,
    policy: Policy | None = None,
    placement: Mapping[str, Any] | None = None,
    trust_run: bool = False,
) -> PreparedRun:
    """Check every input and build what the run needs; nothing is played yet.

    Args:
        config: the resolved configuration (ignored for ``resume``: the run's own is used).
        api_key: an API key given on the command line (never saved).
        resume: a run directory to finish.
        policy: use this policy instead of building one from the config (tests, benchmarks).
        placement: with ``resume``, where the rest is played instead of what the run's
            config says: `rk_agent.runs.config.PLACEMENT_KEYS` (``concurrency``,
            ``workers``, 0 for this process, ``ray.*``), as dotted names.
        trust_run: build what a run from elsewhere names (the run resumed, a fork's source)
            even when it is not one rk-agent wrote here (`rk_agent.runs.run_trust`).

    The returned run holds the run directory's lock (a resumed run's from the start, so that
    what is done cannot change underneath); use it in a ``with`` block, or call
    `PreparedRun.finish`, to record how it ended and release the lock.

    Raises:
        ConfigError: unknown environment or reward (with did-you-mean), a missing API key,
            an unreadable dataset, a run directory that already holds a run, a fork
            (``config.fork``) whose environment's state the replay does not restore.
        UntrustedRunError: the run resumed, or a fork's source, names files to import,
            commands, URLs or variables, and is neither signed by this user's key nor trusted.
        RunLockedError: another process is writing that run directory (it is named).
        EndpointError: the model server cannot be reached, refuses the key, or answers neither
            ``GET <base-url>/models`` nor a one-token completion (a wrong ``--base-url`` or
            model); checked before the run directory is made.

    ``n`` larger than the environment's dataset plays every row once, noted in
    `PreparedRun.notes`; ``provider: solver`` on a dataset checks first that the reference
    solver recognises each task it will play (`rk_agent.rollouts.dataset_tasks`).
    """
    if resume is None:
        return _prepare(config, None, api_key, policy, trust_run)
    changed = {k: v for k, v in (placement or {}).items() if v is not None}
    if set(changed) - set(PLACEMENT_KEYS):
        raise ConfigError(
            f"a resumed run plays the episodes its config names; only where and how many at "
            f"once can change ({', '.join(PLACEMENT_KEYS)}), not "
            f"{', '.join(sorted(set(changed) - set(PLACEMENT_KEYS)))}."
        )
    _check_resumable(resume, trust_run)  # before the lock: nothing is written to it unchecked
    # Locked: nobody else appends while we read what is done.
    run_dir = RunDir.resume(resume, changed or None)
    try:
        prepared = _prepare(run_dir.config, run_dir, api_key, policy, trust_run)
        run_dir.mark_running()
    except BaseException:
        run_dir.close()  # nothing was played: the run stays as it was
        raise
    return prepared


def _check_resumable(path: str | Path, trust_run: bool) -> None:
    """Refuse to resume a run that is not this user's own when its config (as saved, without
    the placement given now) would import, start, connect to or read anything."""
    saved = RunDir.open(path)
    wants = env_wants(saved.config.env) + policy_wants(saved.config)
    require_trust(path, wants, trust_run=trust_run, signed=saved.signed, doing="resuming it")


def _prepare(
    config: RolloutConfig,
    run_dir: RunDir | None,
    api_key: str | None,
    policy: Policy | None,
    trust_run: bool,
) -> PreparedRun:
    if config.workers is not None:  # before anything is built or loaded
        from rk_agent.runs.workers import LOCAL_MODEL_REFUSED, import_ray

        import_ray()  # missing: say how to install it
        served = config.base_url or config.provider in ("fireworks", "openai", "solver")
        if policy is None and not served:
            raise ConfigError(LOCAL_MODEL_REFUSED)
    config = fork_config(config, trust_run=trust_run)  # a fork plays the source run's env
    done = {t.id for t in run_dir.read_trajectories()} if run_dir is not None else set()
    envs = config.env.factory()  # checked by building the first
    uses_embedded = (
        policy is None
        and config.model is None
        and not config.base_url
        and config.provider != "solver"
    )
    try:
        solver = None
        if policy is None:
            policy = build_policy(config, api_key=api_key)
            if config.provider == "solver" and isinstance(policy, FunctionPolicy):
                # the reference solver is checked to read the dataset's tasks (not a fork's)
                solver = None if config.fork else policy.fn
        config, fitted = fit_to_dataset(config, envs, solver)
        resumed_with = None if run_dir is None else len(done)
        if run_dir is None:
            output = config.output or _default_output(envs.name)
            config = config.model_copy(update={"output": output})
            # A fork's run is signed when its source's is (or names nothing that runs): trust
            # given by --trust-run is for one command, and does not carry over.
            signed = config.fork is None or fork_vouched(config.fork)
            run_dir = RunDir.create(output, config, signed=signed)
        run_dir.record_provenance(run_provenance(config, envs, policy), resumed_with=resumed_with)
    except BaseException:
        envs.close()
        raise
    notes = [fitted] if fitted else []
    return PreparedRun(config, run_dir, envs, policy, done, uses_embedded, notes)


def build_policy(config: RolloutConfig, *, api_key: str | None = None) -> Policy:
    """The policy the config names: an OpenAI-compatible server, a local model, or the
    environment's reference solver (``provider: solver``).

    Raises:
        ConfigError: a provider that needs a key has none, the model cannot be placed, the
            environment has no reference solver, or the tool-call format is unknown.
        EndpointError: a served model's server cannot be reached, refuses the key, or answers
            neither ``GET <base-url>/models`` nor a one-token completion
            (`OpenAIPolicy.check_endpoint`).
    """
    from rk_agent.tool_calls import get_tool_call_format

    get_tool_call_format(config.tool_call_format)  # a misspelt one stops here, whatever plays
    provider = config.provider
    if provider == "solver":
        from rk_agent.envs.registry import get_solver

        if config.model is not None or config.base_url is not None:
            raise ConfigError(
                "--provider solver plays the environment's reference solver; leave out "
                "--model and --base-url."
            )
        return FunctionPolicy(
            get_solver(config.env.name), name=f"{config.env.name}-reference-solver"
        )
    if config.base_url or provider in ("fireworks", "openai"):
        from rk_agent.policies.openai_policy import make_policy

        key = api_key or (os.environ.get(config.api_key_env) if config.api_key_env else None)
        if config.model is None:
            raise ConfigError(
                "--model is required with --base-url or --provider fireworks/openai "
                "(e.g. --model accounts/fireworks/models/llama-v3p1-8b-instruct)."
            )
        served = make_policy(
            provider=provider if provider != "local" else None,
            model=config.model,
            base_url=config.base_url,
            api_key=key,
            max_concurrency=config.concurrency,
            tool_call_format=config.tool_call_format,
        )
        served.check_endpoint()  # reachable, and with a key it accepts, before any episode
        return served
    require_extra(
        "local",
        "a model in this process (the embedded model, or --provider local)",
        otherwise="Or play a model on a server: --base-url URL --model NAME (vLLM, SGLang, "
        "Ollama), or --provider fireworks|openai --model NAME.",
    )
    model = config.model
    if model is not None:
        from rk_agent.policies.local_model import check_model_folder

        check_model_folder(model)
    if model is not None and provider is None and not Path(model).exists():
        raise ConfigError(
            f"where does model {model!r} run? Add --provider fireworks|openai|local, or "
            "--base-url URL for an OpenAI-compatible server (vLLM, SGLang, Ollama)."
        )
    from rk_agent.policies.hf_policy import HFPolicy
    from rk_agent.policies.local_model import resolve_model

    return HFPolicy(resolve_model(model), tool_call_format=config.tool_call_format)


def describe_model(run: PreparedRun) -> str:
    """One line saying which model plays, with the embedded-model caveat when it applies."""
    return EMBEDDED_NOTE if run.uses_embedded_model else f"model: {run.policy.name}"


def _default_output(env_name: str) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return str(Path("runs") / f"{env_name}-{stamp}")
