"""``--tasks-columns``: which column of a ``--tasks`` file holds which field of a task, defined
once for ``rk-agent rollout`` and ``rk-agent train grpo`` (`rk_agent.envs.task.load_tasks`).

Main names: `TasksColumnsOpt`, `parse_columns` (the flag's value read, `None` when not given).
"""

from __future__ import annotations

from typing import Annotated

import typer

from rk_agent.envs.task import parse_columns as _parse

__all__ = ["TasksColumnsOpt", "parse_columns"]

TasksColumnsOpt = Annotated[
    str | None,
    typer.Option(
        "--tasks-columns",
        help="The --tasks file's columns named as a task's fields, FIELD=COLUMN pairs: e.g. "
        "prompt=question,ground_truth=answer for a Hugging Face dataset's columns.",
        show_default=False,
    ),
]


def parse_columns(value: str | None) -> dict[str, str] | None:
    """The flag's ``FIELD=COLUMN`` pairs as a mapping (``None`` when it is not given).

    Raises:
        ConfigError: a pair is malformed (one line naming the flag).
    """
    return _parse(value) or None
