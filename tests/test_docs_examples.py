"""The ```python examples in the docs and README run, and print what their comments say.

A line ``print(x)  # expected`` is checked: the printed text must equal the comment. Blocks that
need what is not here (a model download, a live judge) carry the marker ``# docs: no-run``.
"""

from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = [
    page
    for page in sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])
    if "```python" in page.read_text()
]
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)python\s*$")
# The test tasksets docs/environments-from-elsewhere.md plays, on the path as the page says.
TASKSETS = ROOT / "tests" / "interop" / "verifiers_tasksets"
SKIP = ("# docs: no-run", "GRPOTrainer(", 'base_url="http://localhost')
CHECKER = """
import io as _io
def _checked_print(expected, *args, **kwargs):
    buffer = _io.StringIO()
    print(*args, file=buffer, **kwargs)
    got = buffer.getvalue().strip()
    if got != expected:
        raise AssertionError(f"printed {got!r}, the docs say {expected!r}")
"""


def code_blocks(text: str) -> list[tuple[int, str]]:
    lines, blocks, i = text.split("\n"), [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match:
            indent, start, body = len(match["indent"]), i + 2, []
            i += 1
            while lines[i].strip() != match["fence"]:
                body.append(lines[i][indent:])
                i += 1
            blocks.append((start, "\n".join(body)))
        i += 1
    return blocks


def with_checked_prints(source: str) -> str:
    """Turn ``print(...)  # expected`` into a call that asserts the expected text."""
    comments = {
        token.start[0]: token.string[1:].strip()
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    lines = source.split("\n")
    calls = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "print"
        and node.end_lineno in comments
        and not comments[node.end_lineno].startswith("e.g.")
    ]
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        expected = comments[node.end_lineno]  # type: ignore[index]
        line = lines[node.lineno - 1]
        col = node.col_offset
        lines[node.lineno - 1] = f"{line[:col]}_checked_print({expected!r}, {line[col + 6 :]}"
    return "\n".join(lines)


# Pages whose examples train or load a model: slow.
SLOW_PAGES = {"training.md"}


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, marks=pytest.mark.slow) if page.name in SLOW_PAGES else page
        for page in PAGES
    ],
    ids=lambda p: p.name,
)
def test_examples_run_as_documented(page: Path) -> None:
    blocks = [
        (n, src) for n, src in code_blocks(page.read_text()) if not any(s in src for s in SKIP)
    ]
    assert blocks, f"{page.name}: every example is marked no-run"
    program = CHECKER + "\n".join(
        f"# --- {page.name}:{n}\n{with_checked_prints(src)}" for n, src in blocks
    )
    path = os.pathsep.join(p for p in (str(TASKSETS), os.environ.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert out.returncode == 0, f"{page.name}: {out.stderr[-3000:]}"
