"""A rollout of a task dataset: how many of its rows it plays, and whether the reference solver
reads them; `fit_to_dataset` settles both in one call, once the environment is built.

- ``n`` larger than the dataset (``--n 16`` over a file of 5 rows) plays every row once, and
  says so in one line; a run never plays a row twice as two tasks.
- ``--policy solver`` on a dataset plays the environment's reference solver, which reads the
  tasks the environment generates (by their templates). Each task of the run is opened and
  handed to the solver before the run starts (`check_solver_reads`): a task it does not
  recognise (it raises `EnvError`) stops the run in one line, rather than being played and
  scored 0 without a word.

Main names: `fit_to_dataset`, `check_solver_reads`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rk_agent.errors import ConfigError, EnvError
from rk_agent.runs.config import RolloutConfig
from rk_agent.types import Message

if TYPE_CHECKING:
    from rk_agent.envs.env_setup import EnvFactory
    from rk_agent.envs.registry import Solver

__all__ = ["check_solver_reads", "fit_to_dataset"]


def fit_to_dataset(
    config: RolloutConfig, envs: EnvFactory, solver: Solver | None = None
) -> tuple[RolloutConfig, str]:
    """``config`` with ``n`` at most the dataset's size, and the line to say when it was cut
    (``""`` when nothing changed); with ``solver`` (the reference solver that will play), the
    solver is first checked to read each task of the run (`check_solver_reads`).

    Raises:
        ConfigError: the solver does not recognise some of the run's tasks.

    Example:
        >>> from rk_agent.envs.env_setup import EnvSetup
        >>> from rk_agent.envs.task import Task
        >>> tasks = [Task(id=f"t{i}", messages=[{"role": "user", "content": "1+1?"}],
        ...               ground_truth=2) for i in range(5)]
        >>> envs = EnvSetup(name="math", kwargs={"tasks": tasks}).factory()
        >>> fitted, note = fit_to_dataset(RolloutConfig(n=16), envs)
        >>> fitted.n, note
        (5, 'the dataset holds 5 tasks, fewer than --n 16: playing each once.')
        >>> envs.close()
    """
    size = envs.dataset_size
    if size is None:
        return config, ""
    fitted = config.model_copy(update={"n": size}) if config.n > size else config
    if solver is not None:
        check_solver_reads(fitted, envs, solver)
    if fitted is config:
        return config, ""
    source = config.env.tasks or "the dataset"
    tasks = "task" if size == 1 else "tasks"
    return fitted, f"{source} holds {size} {tasks}, fewer than --n {config.n}: playing each once."


def check_solver_reads(config: RolloutConfig, envs: EnvFactory, solver: Solver) -> None:
    """Refuse a run of the reference solver on dataset tasks it does not recognise.

    Each of the run's ``n`` tasks is reset as the engine resets it (row ``i``, seed
    ``seed + i``) in an environment of its own, and its opening messages go to ``solver``.

    Raises:
        ConfigError: the solver does not recognise some of them (how many, the first by id).
    """
    env = envs.spare()
    try:
        missed: list[str] = []
        for index in range(config.n):
            observation, info = env.reset(
                seed=config.env.seed + index, options={"task_index": index}
            )
            try:
                solver(Message.coerce_list(observation), env.tool_schemas)
            except EnvError:
                missed.append(info["task"].id)
    finally:
        env.close()
    if missed:
        raise ConfigError(
            f"--policy solver: the {envs.name} environment's reference solver does not "
            f"recognise {len(missed)} of the {config.n} tasks of "
            f"{config.env.tasks or 'the dataset'} (the first: {missed[0]!r}); it solves the "
            "tasks the environment generates, read by their templates. Play a model on them "
            "(--model, --base-url), or leave out --tasks to play the environment's own tasks."
        )
