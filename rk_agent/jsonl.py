"""JSONL files: reading them line by line, where a bad line is reported, not fatal, and
appending whole lines, where a line torn by a crash is cut off first.

Main names: `JsonlLine`, `iter_jsonl`, `parse_jsonl_line`, `append_jsonl`, `end_last_line`,
`is_torn`.

Example:
    >>> from pathlib import Path
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "x.jsonl"
    >>> _ = path.write_text('{"a": 1}\\nnot json\\n')
    >>> [(line.number, line.error is None) for line in iter_jsonl(path)]
    [(1, True), (2, False)]
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rk_agent.errors import DataError, kind_of

__all__ = [
    "JsonlLine",
    "append_jsonl",
    "end_last_line",
    "is_torn",
    "iter_jsonl",
    "parse_jsonl_line",
]


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


def is_torn(tail: bytes) -> bool:
    """Whether a last line without its newline is a torn write: a cut-off JSON line never
    parses, a whole one does."""
    try:
        json.loads(tail)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
        return True
    return False


def append_jsonl(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Append whole lines (``data`` ends with a newline) to a JSONL file in one write, flushed.

    The file's torn last line, if a crash left one, is cut off first (`end_last_line`);
    writers of one file (processes too) take turns (``flock``).
    """
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    with file.open("a+b") as handle, _file_lock(handle):
        _end_last_line(handle)
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        handle.flush()


def end_last_line(path: str | os.PathLike[str]) -> int:
    """Make a JSONL file end with a newline: cut off a torn last line (`is_torn`), or end a
    whole one that lacks only its newline. Returns the bytes cut off."""
    with Path(path).open("a+b") as handle, _file_lock(handle):
        return _end_last_line(handle)


@contextlib.contextmanager
def _file_lock(handle: IO[bytes]) -> Iterator[None]:
    """Hold ``flock`` on an open file for a short write (writers of one file take turns)."""
    fcntl.flock(handle, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)


def _end_last_line(handle: IO[bytes]) -> int:
    fd = handle.fileno()
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return 0
    start = _last_line_start(fd, size)
    if is_torn(os.pread(fd, size - start, start)):
        os.ftruncate(fd, start)
        return size - start
    handle.write(b"\n")
    handle.flush()
    return 0


def _last_line_start(fd: int, size: int, chunk: int = 1 << 16) -> int:
    end = size
    while end > 0:
        begin = max(0, end - chunk)
        found = os.pread(fd, end - begin, begin).rfind(b"\n")
        if found != -1:
            return begin + found + 1
        end = begin
    return 0
