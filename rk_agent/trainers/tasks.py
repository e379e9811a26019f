"""An environment's tasks as a `datasets.Dataset` for TRL.

Each row is one task, reset with its own seed: a conversational ``prompt`` (the opening system
and user messages), ``ground_truth`` (as text: JSON when it is not a string), ``task_id``,
``seed`` and ``task`` (the whole `Task` as JSON, which the multi-turn rollout and the
single-turn rewards decode). Each prompt message carries the task id under ``rk_task`` (chat
templates ignore unknown keys): TRL hands a ``rollout_func`` only the prompts, and this is how
it finds the task behind each one.

Main names: `env_dataset` (`task_columns`: one row of it), `task_rows` (`task_of_seed`: one
generated task), `TaskTable`, `TASK_KEY`.

Example (scripts that run TRL themselves)::

    from rk_agent.envs.registry import make_env
    from rk_agent.trainers.tasks import env_dataset

    dataset = env_dataset(make_env("math"), n=256, seed=0)
    dataset[0]["prompt"][-1]["content"]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.task import Task
from rk_agent.errors import ConfigError, DataError, require_extra

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = [
    "TASK_KEY",
    "TaskRow",
    "TaskTable",
    "env_dataset",
    "task_columns",
    "task_of_seed",
    "task_rows",
]

TASK_KEY = "rk_task"
"""The key on each prompt message naming the row's task (see the module docstring)."""


@dataclass(frozen=True)
class TaskRow:
    """One training task: the `Task` and the seed its episodes reset with."""

    task: Task
    seed: int


MAX_DRAWS_PER_TASK = 20
"""A generator gets this many seeds per task asked for to come up with distinct tasks."""


def task_rows(env: ChatEnv, n: int | None = None, seed: int = 0) -> list[TaskRow]:
    """The first ``n`` tasks of ``env``, each with the seed its episodes reset with.

    With a dataset (``tasks=``), task ``i`` is row ``i``, reset with seed ``seed + i`` (``n``
    defaults to all rows). With a generator (``n`` required), the tasks are the first ``n``
    distinct ones drawn with seeds ``seed``, ``seed + 1``, ...: a seed whose task repeats an
    earlier one is skipped, since a group trained twice on one question in a run is not what
    "``n`` tasks" asks for.

    Raises:
        ConfigError: ``n`` is missing for a generated task set, or is not positive.
        DataError: a dataset repeats a task id, or a generator cannot come up with ``n``
            distinct tasks.
    """
    if n is None:
        if env.dataset is None:
            raise ConfigError(
                f"{type(env).__name__} generates its tasks: say how many to train on (n_tasks)."
            )
        n = len(env.dataset)
    if n < 1:
        raise ConfigError(f"the number of tasks must be at least 1, got {n}.")
    if env.dataset is not None:
        rows = [_row(env, seed + i, {"task_index": i}) for i in range(n)]
        ids = [r.task.id for r in rows]
        if len(set(ids)) != len(ids):
            duplicate = next(i for i in ids if ids.count(i) > 1)
            raise DataError(
                f"task id {duplicate!r} appears more than once among the {n} training tasks; "
                "give every task a distinct id."
            )
        return rows
    found: dict[str, TaskRow] = {}
    draws = n * MAX_DRAWS_PER_TASK
    for draw in range(draws):
        row = _row(env, seed + draw, None)
        found.setdefault(row.task.id, row)
        if len(found) == n:
            return list(found.values())
    raise DataError(
        f"{type(env).__name__} came up with only {len(found)} distinct tasks in {draws} draws "
        f"(seeds {seed}..{seed + draws - 1}), fewer than the {n} asked for; train on fewer tasks "
        "or widen the task space (e.g. more kinds)."
    )


def task_of_seed(env: ChatEnv, seed: int) -> TaskRow:
    """The task ``env`` generates with ``seed`` (as `task_rows` draws them), with that seed.

    Example:
        >>> from rk_agent.envs.guess_env import GuessEnv
        >>> row = task_of_seed(GuessEnv(high=4), 7)
        >>> row.seed, row.task.id.startswith("guess-4-")
        (7, True)
    """
    return _row(env, seed, None)


def _row(env: ChatEnv, seed: int, options: dict[str, Any] | None) -> TaskRow:
    _, info = env.reset(seed=seed, options=options)
    return TaskRow(task=info["task"], seed=seed)


def _prompt(task: Task) -> list[dict[str, Any]]:
    if not task.messages:
        raise DataError(f"task {task.id!r} has no opening messages to prompt the model with.")
    # Every message carries the id, so all messages of all rows have the same keys and types
    # (tables such as wandb's refuse a column whose messages differ in shape).
    return [{"role": m.role, "content": m.text, TASK_KEY: task.id} for m in task.messages]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def env_dataset(
    env: ChatEnv, n: int | None = None, seed: int = 0, rows: Sequence[TaskRow] | None = None
) -> Dataset:
    """The tasks of ``env`` (or ``rows``) as a conversational TRL dataset.

    Args:
        env: the environment whose tasks to use.
        n: how many tasks (default: the whole dataset, when the env has one).
        seed: task ``i`` is reset with seed ``seed + i``.
        rows: ready `TaskRow`s instead of drawing them from ``env``.

    Returns:
        Columns ``prompt``, ``ground_truth``, ``task_id``, ``seed``, ``task``.
    """
    require_extra("train", "env_dataset")
    from datasets import Dataset

    rows = list(rows) if rows is not None else task_rows(env, n, seed)
    columns = [task_columns(r) for r in rows]
    return Dataset.from_dict({name: [c[name] for c in columns] for name in _COLUMNS})


_COLUMNS = ("prompt", "ground_truth", "task_id", "seed", "task")


def task_columns(row: TaskRow) -> dict[str, Any]:
    """One row of `env_dataset`, as TRL's dataloader hands it over (a plain dict).

    Example:
        >>> from rk_agent.envs.task import Task
        >>> from rk_agent.types import Message
        >>> task = Task(id="t", messages=[Message(role="user", content="2+2?")], ground_truth=4)
        >>> columns = task_columns(TaskRow(task, seed=3))
        >>> columns["prompt"], columns["ground_truth"], columns["seed"]
        ([{'role': 'user', 'content': '2+2?', 'rk_task': 't'}], '4', 3)
    """
    return {
        "prompt": _prompt(row.task),
        "ground_truth": _text(row.task.ground_truth),
        "task_id": row.task.id,
        "seed": row.seed,
        "task": row.task.model_dump_json(),
    }


class TaskTable:
    """Finds the `TaskRow` behind a prompt (or a ``task`` JSON column) during training.

    Args:
        rows: the training tasks.
    """

    def __init__(self, rows: Iterable[TaskRow]) -> None:
        self._rows: dict[str, TaskRow] = {r.task.id: r for r in rows}

    def __len__(self) -> int:
        return len(self._rows)

    def task_ids(self) -> list[str]:
        """The tasks' ids, in the order they were given, then learnt."""
        return list(self._rows)

    def add(self, row: TaskRow) -> None:
        """Learn one more task (a fresh task dynamic sampling draws during training)."""
        self._rows[row.task.id] = row

    def for_prompt(self, prompt: Sequence[Mapping[str, Any]]) -> TaskRow:
        """The task a dataset prompt came from.

        Raises:
            DataError: the prompt carries no task id, or an unknown one.
        """
        task_id = prompt[0].get(TASK_KEY) if prompt and isinstance(prompt[0], Mapping) else None
        if task_id is None:
            raise DataError(
                "a training prompt carries no task id: build the dataset with "
                "rk_agent.trainers.tasks.env_dataset (its prompts name their task)."
            )
        row = self._rows.get(str(task_id))
        if row is None:
            raise DataError(
                f"the prompt names task {task_id!r}, which is not among the {len(self)} "
                "training tasks given to the rollout."
            )
        return row

    @staticmethod
    def decode(task_json: str) -> Task:
        """A ``task`` column value back as a `Task`."""
        return Task.model_validate_json(task_json)
