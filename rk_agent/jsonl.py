"""Reading JSONL files line by line, where a bad line is reported, not fatal.

Main names: `JsonlLine`, `iter_jsonl`, `parse_jsonl_line`.

Example:
    >>> from pathlib import Path
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "x.jsonl"
    >>> _ = path.write_text('{"a": 1}\\nnot json\\n')
    >>> [(line.number, line.error is None) for line in iter_jsonl(path)]
    [(1, True), (2, False)]
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rk_agent.errors import DataError, kind_of

__all__ = ["JsonlLine", "iter_jsonl", "parse_jsonl_line"]


@dataclass(frozen=True)
class JsonlLine:
    """One non-blank line of a JSONL file: its parsed object, or the error that stopped it."""

    number: int
    value: dict[str, Any] | None = None
    error: DataError | None = None


def iter_jsonl(path: str | Path) -> Iterator[JsonlLine]:
    """Yield every non-blank line of ``path`` as a `JsonlLine` (1-based line numbers).

    A line that is not a JSON object yields a `JsonlLine` whose ``error`` names the file and
    line; reading goes on with the next line.

    Raises:
        DataError: the file cannot be opened or is not UTF-8 text.
    """
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot open: {exc.strerror or exc}", path=str(path)) from exc
    with handle:
        try:
            for number, text in enumerate(handle, start=1):
                if text.strip():
                    yield parse_jsonl_line(path, number, text)
        except UnicodeDecodeError as exc:
            raise DataError(f"not UTF-8 text: {exc}", path=str(path)) from exc


def parse_jsonl_line(path: str | Path, number: int, text: str) -> JsonlLine:
    """Parse line ``number`` of ``path`` (its ``text``) as a JSON object; an error is data."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return JsonlLine(
            number,
            error=DataError(
                # json's own "Invalid control character at" already ends in "at"
                f"invalid JSON ({exc.msg.removesuffix(' at')} at column {exc.colno}): "
                f"{text.strip()[:80]!r}",
                path=str(path),
                line=number,
            ),
        )
    if not isinstance(value, dict):
        return JsonlLine(
            number,
            error=DataError(
                f"expected a JSON object per line, got {kind_of(value)}",
                path=str(path),
                line=number,
            ),
        )
    return JsonlLine(number, value=value)
