"""examples/composite_math_coding, run as a user runs it (a subprocess from the repository
root), and its composite reward checked on the cases the script does not show."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "composite_math_coding"

EXPECTED = {
    "math-1": "0.000", "math-2": "0.000", "math-3": "0.000", "math-4": "0.000",
    "math-5": "0.000", "code-1": "0.000", "code-2": "0.000", "code-3": "0.000",
    "code-4": "0.000", "code-5": "0.500",
}  # fmt: skip


def test_evaluate_mixed() -> None:
    done = subprocess.run(
        [sys.executable, "examples/composite_math_coding/evaluate_mixed.py"], cwd=ROOT,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    scores = {line.split()[0]: line.split()[1:3] for line in lines[1:11]}
    assert scores == {pid: ["1.000", wrong] for pid, wrong in EXPECTED.items()}
    assert "math: 5 problems, right answers score 1.000" in lines
    assert "code: 5 problems, right answers score 1.000" in lines
    assert "expected '345'" in lines[1]
    assert "1/2 test cases passed" in lines[10]


def test_components_and_an_unknown_kind() -> None:
    sys.path.insert(0, str(EXAMPLE))
    try:
        from composite_reward import composite
    finally:
        sys.path.remove(str(EXAMPLE))
    chat = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "#### 4"}]
    result = composite(messages=chat, ground_truth="4", kind="math")
    assert result.score == 1.0
    assert result.metrics["math"].score == 1.0 and result.metrics["code"].score == 0.0
    assert result.metrics["math.correct"].score == 1.0
    unknown = composite(messages=chat, ground_truth="4", kind="physics")
    assert not unknown.is_score_valid
    assert "expected kind 'math' or 'code', got 'physics'" in (unknown.error or "")
