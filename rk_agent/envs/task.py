"""Tasks: what an episode is about (the opening messages, the ground truth, metadata).

Every environment either generates its tasks (seeded) or takes them from a JSONL dataset, one
task per line: ``{"messages": [...]} `` or ``{"prompt": "..." | [...]}``, an optional
``ground_truth``, an optional ``id``, and any other fields (kept as metadata).

Main names: `Task`, `load_tasks`, `task_from_row`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from rk_agent.errors import DataError
from rk_agent.jsonl import iter_jsonl
from rk_agent.types import Message

__all__ = ["Task", "load_tasks", "task_from_row"]


class Task(BaseModel):
    """One task.

    Attributes:
        id: a stable identifier (used to resume runs and to group samples).
        messages: the opening conversation (system and user messages).
        ground_truth: what the rewards compare against (an answer, tests, expected calls).
        metadata: anything else the environment or the rewards need.
    """

    id: str
    messages: list[Message]
    ground_truth: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def task_from_row(row: dict[str, Any], default_id: str) -> Task:
    """Build a `Task` from a dataset row (``messages`` or ``prompt``; the rest is metadata).

    Raises:
        ValueError: the row has neither ``messages`` nor ``prompt``, or they are malformed.
    """
    row = dict(row)
    messages = row.pop("messages", None)
    prompt = row.pop("prompt", None)
    if messages is None and prompt is None:
        raise ValueError("expected a 'messages' list or a 'prompt' (string or message list)")
    if messages is None:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    metadata = row.pop("metadata", None) or {}
    task_id = str(row.pop("id", default_id))
    ground_truth = row.pop("ground_truth", None)
    return Task(
        id=task_id,
        messages=messages,
        ground_truth=ground_truth,
        metadata={**row, **metadata},
    )


def load_tasks(path: str | Path) -> list[Task]:
    """Read every task of a JSONL file.

    Raises:
        DataError: the file cannot be read, or a line is not a valid task (file and line named).
    """
    path = Path(path)
    tasks: list[Task] = []
    for line in iter_jsonl(path):
        if line.error is not None or line.value is None:
            raise line.error or DataError("unreadable line", path=str(path), line=line.number)
        try:
            tasks.append(task_from_row(line.value, default_id=f"{path.stem}-{line.number}"))
        except (ValueError, ValidationError) as exc:
            detail = str(exc).splitlines()
            raise DataError(
                f"not a valid task: {' '.join(detail[:3])}", path=str(path), line=line.number
            ) from exc
    if not tasks:
        raise DataError("the dataset has no tasks", path=str(path))
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise DataError(f"task id {duplicate!r} appears more than once", path=str(path))
    return tasks
