"""JSONL reading: bad lines are reported with their line number, reading goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from rk_agent.errors import DataError
from rk_agent.jsonl import iter_jsonl


def test_good_bad_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"a": 1}\n\n{broken\n[1, 2]\n{"b": 2}\n[]\n')
    lines = list(iter_jsonl(path))
    assert [line.number for line in lines] == [1, 3, 4, 5, 6]
    assert lines[0].value == {"a": 1}
    assert lines[3].value == {"b": 2}
    assert str(lines[1].error).startswith(f"{path}:3: invalid JSON")
    assert str(lines[2].error) == f"{path}:4: expected a JSON object per line, got list"
    assert str(lines[4].error) == f"{path}:6: expected a JSON object per line, got an empty list"


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot open"):
        list(iter_jsonl(tmp_path / "missing.jsonl"))


def test_binary_file_raises(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(DataError, match="not UTF-8"):
        list(iter_jsonl(path))


def test_a_control_character_is_named_once(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text('{"broken\ttab": 1}\n')
    (line,) = list(iter_jsonl(path))
    assert line.error is not None
    assert str(line.error) == (
        f"{path}:1: invalid JSON (Invalid control character at column 9): '{{\"broken\\ttab\": 1}}'"
    )
