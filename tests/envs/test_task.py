"""Tasks read from JSONL: a dataset's own column names, mapped or named in the refusal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rk_agent.envs.task import load_tasks, parse_columns
from rk_agent.errors import ConfigError, DataError

# Rows as a Hugging Face dataset writes them (`Dataset.to_json`): GSM8K's columns.
ROWS = [
    {"question": "What is 12 * 12?", "answer": "144", "source": "mental"},
    {"question": "What is 2 + 2?", "answer": "4", "source": "mental"},
]


def _write(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "gsm.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_column_mapping_reads_a_dataset_named_otherwise(tmp_path: Path) -> None:
    path = _write(tmp_path, ROWS)
    tasks = load_tasks(path, {"prompt": "question", "ground_truth": "answer"})
    assert [(t.messages[0].text, t.ground_truth) for t in tasks] == [
        ("What is 12 * 12?", "144"), ("What is 2 + 2?", "4"),
    ]  # fmt: skip
    assert tasks[0].metadata == {"source": "mental"}  # the mapped columns are not kept twice
    assert tasks[1].id == "gsm-2"


def test_a_row_without_a_prompt_names_its_columns_and_a_mapping(tmp_path: Path) -> None:
    path = _write(tmp_path, ROWS)
    message = (
        f"{path}:1: not a valid task: expected a 'messages' list or a 'prompt' (string or "
        "message list); the row's columns are 'question', 'answer', 'source': map them with "
        "--tasks-columns prompt=question,ground_truth=answer (columns= in load_tasks)"
    )
    with pytest.raises(DataError, match=f"^{re.escape(message)}$"):
        load_tasks(path)
    odd = _write(tmp_path, [{"body": "2+2?", "n": 4}])
    with pytest.raises(DataError, match=re.escape("map them with --tasks-columns prompt=body (")):
        load_tasks(odd)


def test_a_mapped_column_a_row_lacks_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, ROWS)
    message = (
        f"{path}:1: --tasks-columns names column(s) 'problem', which this row does not have; "
        "its columns are 'question', 'answer', 'source'"
    )
    with pytest.raises(DataError, match=f"^{re.escape(message)}$"):
        load_tasks(path, {"prompt": "problem"})


def test_parse_columns() -> None:
    assert parse_columns("prompt=question, ground_truth=answer") == {
        "prompt": "question", "ground_truth": "answer",
    }  # fmt: skip
    assert parse_columns(None) == {}
    with pytest.raises(ConfigError, match=re.escape("expects FIELD=COLUMN pairs separated by")):
        parse_columns("prompt")
    with pytest.raises(ConfigError, match=re.escape("--tasks-columns maps 'prompt' twice")):
        parse_columns("prompt=a,prompt=b")
