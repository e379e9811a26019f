"""Tasks: what an episode is about (the opening messages, the ground truth, metadata).

Every environment either generates its tasks (seeded) or takes them from a JSONL dataset, one
task per line: ``{"messages": [...]} `` or ``{"prompt": "..." | [...]}``, an optional
``ground_truth``, an optional ``id``, and any other fields (kept as metadata). A dataset whose
columns are named otherwise (a Hugging Face dataset's ``question`` and ``answer``) is read with a
column mapping (``columns={"prompt": "question", "ground_truth": "answer"}``, the CLI's
``--tasks-columns prompt=question,ground_truth=answer``; `parse_columns` reads that spelling).

Main names: `Task`, `load_tasks`, `task_from_row`, `parse_columns`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from rk_agent.errors import ConfigError, DataError
from rk_agent.jsonl import iter_jsonl
from rk_agent.types import Message

__all__ = ["COLUMNS_FLAG", "Task", "load_tasks", "parse_columns", "task_from_row"]

COLUMNS_FLAG = "--tasks-columns"
"""The command-line option that maps a dataset's columns to a task's fields."""

# Column names datasets commonly give the question and its answer: the refusal of a row with
# neither `messages` nor `prompt` suggests a mapping from the first of them it finds.
_PROMPT_COLUMNS = ("question", "problem", "query", "instruction", "input", "text")
_ANSWER_COLUMNS = ("answer", "solution", "ground_truth_answer", "target", "output", "label")


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


def parse_columns(spec: str | dict[str, str] | None) -> dict[str, str]:
    """A column mapping, ``FIELD=COLUMN`` pairs separated by commas, as a dict.

    Raises:
        ConfigError: a pair is not ``FIELD=COLUMN`` or names a field twice.

    Example:
        >>> parse_columns("prompt=question, ground_truth=answer")
        {'prompt': 'question', 'ground_truth': 'answer'}
    """
    if spec is None:
        return {}
    if isinstance(spec, dict):
        pairs = [f"{field}={column}" for field, column in spec.items()]
    else:
        pairs = spec.split(",")
    out: dict[str, str] = {}
    for pair in pairs:
        field, equals, column = (part.strip() for part in pair.partition("="))
        if not (field and equals and column):
            raise ConfigError(
                f"{COLUMNS_FLAG} expects FIELD=COLUMN pairs separated by commas (e.g. "
                f"prompt=question,ground_truth=answer), got {spec!r}."
            )
        if field in out:
            raise ConfigError(f"{COLUMNS_FLAG} maps {field!r} twice, in {spec!r}.")
        out[field] = column
    return out


def load_tasks(path: str | Path, columns: dict[str, str] | None = None) -> list[Task]:
    """Read every task of a JSONL file.

    Args:
        path: the file.
        columns: a task field for a column of the file (``{"prompt": "question"}``: the
            column ``question`` is read as the ``prompt``); every row must have those columns.

    Raises:
        DataError: the file cannot be read, or a line is not a valid task (file and line
            named; a row with neither ``messages`` nor ``prompt`` also names its columns and a
            mapping to give).
    """
    path = Path(path)
    tasks: list[Task] = []
    for line in iter_jsonl(path):
        if line.error is not None or line.value is None:
            raise line.error or DataError("unreadable line", path=str(path), line=line.number)
        row = line.value
        if columns and isinstance(row, dict):
            row = _mapped(row, columns, str(path), line.number)
        try:
            tasks.append(task_from_row(row, default_id=f"{path.stem}-{line.number}"))
        except (ValueError, ValidationError) as exc:
            detail = " ".join(str(exc).splitlines()[:3])
            if isinstance(row, dict) and "messages" not in row and "prompt" not in row:
                detail += _mapping_hint(row)
            raise DataError(
                f"not a valid task: {detail}", path=str(path), line=line.number
            ) from exc
    if not tasks:
        raise DataError("the dataset has no tasks", path=str(path))
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise DataError(f"task id {duplicate!r} appears more than once", path=str(path))
    return tasks


def _mapped(row: dict[str, Any], columns: dict[str, str], path: str, line: int) -> dict[str, Any]:
    """``row`` with each mapped column moved to its field."""
    missing = [column for column in columns.values() if column not in row]
    if missing:
        raise DataError(
            f"{COLUMNS_FLAG} names column(s) {', '.join(map(repr, missing))}, which this row "
            f"does not have; its columns are {', '.join(map(repr, row))}",
            path=path,
            line=line,
        )
    values = {field: row[column] for field, column in columns.items()}
    rest = {key: value for key, value in row.items() if key not in columns.values()}
    return {**rest, **values}


def _mapping_hint(row: dict[str, Any]) -> str:
    """What to tell a row with neither ``messages`` nor ``prompt``: its columns, and a mapping."""
    if not row:
        return "; the row is empty"
    names = list(row)
    prompt = next((c for c in _PROMPT_COLUMNS if c in row), None)
    prompt = prompt or next((c for c in names if isinstance(row[c], str)), names[0])
    answer = next((c for c in _ANSWER_COLUMNS if c in row and c != prompt), None)
    example = f"prompt={prompt}" + (f",ground_truth={answer}" if answer else "")
    return (
        f"; the row's columns are {', '.join(map(repr, names))}: map them with "
        f"{COLUMNS_FLAG} {example} (columns= in load_tasks)"
    )
