"""RFT dataset rows from rollouts or tasks: the prompts a Fireworks RFT job trains on.

Main names: `RFTRows`, `rows_from_source`, `task_row`.

A row is the prompt (the task's system and user messages, no answer), the ``ground_truth``, the
``tools`` the model may call, and the task's ``metadata`` when it has some (the evaluator gets
it as a keyword argument, as environment rewards do)::

    {"messages": [{"role": "system", ...}, {"role": "user", ...}], "ground_truth": "345",
     "tools": [{"type": "function", "function": {...}}]}

Sources:

* a run directory made by ``rk-agent rollout`` (its ``trajectories.jsonl``; the tools come from
  the run's environment, named in its ``config.yaml``);
* a ``trajectories.jsonl`` file (the tools from a ``config.yaml`` next to it, or ``env``);
* a tasks JSONL file (``{"messages" | "prompt", "ground_truth", ...}`` per line; the tools
  from ``env``, or a ``tools`` field on each line).

A run holds ``group_size`` samples of each task: each task becomes one row (the RFT job samples
its own group).

Example:
    >>> from rk_agent.envs.task import Task
    >>> task = Task(id="t1", messages=[{"role": "user", "content": "15 * 23?"}], ground_truth="345")
    >>> task_row(task)
    {'messages': [{'role': 'user', 'content': '15 * 23?'}], 'ground_truth': '345'}
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rk_agent.envs.task import Task, load_tasks
from rk_agent.errors import ConfigError, DataError

__all__ = ["RFTRows", "rows_from_source", "task_row", "tools_of_env"]


@dataclass(frozen=True)
class RFTRows:
    """The rows built from a source, and where they came from.

    Attributes:
        rows: one per distinct task.
        kind: ``"run"``, ``"trajectories"`` or ``"tasks"``.
        records: lines read (trajectories or tasks) before removing duplicates.
        env: the environment whose tools the rows carry, if any.
        tools: those tools' schemas.
    """

    rows: list[dict[str, Any]]
    kind: str
    records: int
    env: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)


def task_row(task: Task, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One dataset row for ``task`` (a ``tools`` list in its metadata wins over ``tools``)."""
    metadata = dict(task.metadata)
    own_tools = metadata.pop("tools", None)
    row: dict[str, Any] = {
        "messages": [
            m.to_openai() for m in task.messages if m.role in ("system", "user", "developer")
        ]
    }
    if task.ground_truth is not None:
        row["ground_truth"] = task.ground_truth
    chosen = own_tools if isinstance(own_tools, list) else tools
    if chosen:
        row["tools"] = chosen
    if metadata:
        row["metadata"] = metadata
    return row


def tools_of_env(env: str, env_kwargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The tool schemas an environment offers (built once, then closed).

    Raises:
        ConfigError: the environment cannot be found or built.
    """
    from rk_agent.envs.registry import get_env_class

    kwargs = {k: v for k, v in (env_kwargs or {}).items() if k != "tasks"}
    env_class = get_env_class(env)
    try:
        instance = env_class(**kwargs)
    except Exception as exc:
        raise ConfigError(
            f"cannot build environment {env!r} to read its tools: {type(exc).__name__}: {exc}. "
            "Name another with --env, or leave the tools out with --no-tools."
        ) from exc
    try:
        return list(instance.tool_schemas)
    finally:
        instance.close()


def rows_from_source(
    source: str | Path, *, env: str | None = None, tools: bool = True, trust_run: bool = False
) -> RFTRows:
    """Build the rows from a run directory, a trajectories file or a tasks file.

    Args:
        source: the run directory or JSONL file.
        env: the environment whose tools go into the rows (default: the run's environment,
            for runs and trajectories; none for tasks).
        tools: put the environment's tools into the rows (off: no environment is built; a
            task's own ``tools`` still go in).
        trust_run: build the run's environment (``env`` not given) even when it names code
            and the run is not one rk-agent wrote here (`rk_agent.runs.run_trust`).

    Raises:
        DataError: the source cannot be read, or has no tasks.
        ConfigError: the source does not exist, or the environment cannot be built.
        UntrustedRunError: the run's environment names code, and the run is neither this
            user's own nor trusted.
    """
    from rk_agent.runs.run_dir import CONFIG_FILE, RunDir, read_trajectories
    from rk_agent.runs.run_trust import signed_training_env

    path = Path(source)
    if path.is_dir():
        run = RunDir.open(path)
        trajectories = run.read_trajectories()
        env_name: str | None = env or run.config.env.name
        env_kwargs = run.config.env.kwargs if env is None else {}
        if env is None and tools:
            _check_trust(path, run.config.env.name, env_kwargs, run.signed, trust_run)
        return _from_tasks([t.task for t in trajectories], "run", len(trajectories), path,
                           env_name if tools else None, env_kwargs)  # fmt: skip
    if not path.is_file():
        raise ConfigError(
            f"{source} does not exist. Give a run directory (from `rk-agent rollout`), a "
            "trajectories.jsonl or a tasks JSONL file."
        )
    if _looks_like_trajectories(path):
        trajectories = read_trajectories(path)
        env_name, env_kwargs = env, {}
        config = path.parent / CONFIG_FILE
        if env is None and config.is_file():
            opened = RunDir.open(path.parent)
            env_name, env_kwargs = opened.config.env.name, opened.config.env.kwargs
            signed = opened.signed
        elif env is None:
            names = {t.env for t in trajectories}
            env_name = names.pop() if len(names) == 1 else None
            signed = env_name is not None and signed_training_env(path.parent, env_name)
        if env is None and tools and env_name is not None:
            _check_trust(path, env_name, env_kwargs, signed, trust_run)
        return _from_tasks([t.task for t in trajectories], "trajectories", len(trajectories),
                           path, env_name if tools else None, env_kwargs)  # fmt: skip
    tasks = load_tasks(path)
    return _from_tasks(tasks, "tasks", len(tasks), path, env if tools else None, {})


def _check_trust(
    source: Path, env: str, kwargs: dict[str, Any], signed: bool, trust_run: bool
) -> None:
    """The run's environment is built to read its tools only when it names no code, or the run
    is this user's own (signed), or trusted."""
    from rk_agent.envs.env_setup import EnvSetup
    from rk_agent.runs.run_trust import require_trust
    from rk_agent.runs.run_wants import env_wants

    wants = env_wants(EnvSetup(name=env, kwargs=kwargs))
    require_trust(
        source, wants, trust_run=trust_run, signed=signed, doing="reading its environment's tools"
    )


def _from_tasks(
    tasks: Iterable[Task],
    kind: str,
    records: int,
    path: Path,
    env: str | None,
    env_kwargs: dict[str, Any],
) -> RFTRows:
    unique: dict[str, Task] = {}
    for task in tasks:
        unique.setdefault(task.id, task)
    if not unique:
        raise DataError("no tasks to train on (the file or run is empty)", path=str(path))
    tools = tools_of_env(env, env_kwargs) if env else []
    rows = [task_row(t, tools) for t in unique.values()]
    return RFTRows(rows=rows, kind=kind, records=records, env=env, tools=tools)


def _looks_like_trajectories(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    first = json.loads(line)
                    return isinstance(first, dict) and "task" in first and "stop_reason" in first
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return False
