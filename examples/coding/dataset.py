"""The coding dataset of this example: ten small problems with test cases, read from JSONL.

Each line of ``problems.jsonl`` holds ``id``, ``messages`` (system and user turns: the prompt),
``ground_truth`` (the test cases, in any shape the ``code_execution`` reward reads),
``reference_solution`` (passes every test) and ``buggy_solution`` (a plausible mistake that
fails some).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROBLEMS = HERE / "problems.jsonl"


def load_problems(path: Path = PROBLEMS) -> list[dict[str, Any]]:
    """Every problem of the file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def answer(code: str) -> str:
    """A model's reply that holds ``code`` in a python block."""
    return f"Here is my solution.\n\n```python\n{code}```\n"


def chat(problem: dict[str, Any], code: str) -> list[dict[str, str]]:
    """The problem's prompt followed by an assistant reply holding ``code``."""
    return [*problem["messages"], {"role": "assistant", "content": answer(code)}]
