"""`rk-agent preview --sandbox` as a real subprocess: the mode model code runs in, chosen once,
recorded, and a clear error where isolation is not available."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sandbox.support import BWRAP_PROBLEM, without_bwrap

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox targets Linux")

SOLVED = {
    "messages": [
        {"role": "user", "content": "Print 2."},
        {"role": "assistant", "content": "```python\nprint(2)\n```"},
    ],
    "ground_truth": [{"input": "", "expected_output": "2"}],
}


def preview(
    samples: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rk_agent", "preview", "--samples", str(samples), *args],
        capture_output=True, text=True, timeout=120,
        env={**(env or os.environ), "COLUMNS": "300"},
    )  # fmt: skip


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    path = tmp_path / "code.jsonl"
    path.write_text(json.dumps(SOLVED) + "\n")
    return path


@pytest.mark.parametrize("mode", ["bwrap", "process"])
def test_the_mode_is_chosen_once_and_recorded(samples: Path, mode: str) -> None:
    if mode == "bwrap" and BWRAP_PROBLEM is not None:
        pytest.skip(f"bubblewrap cannot isolate here: {BWRAP_PROBLEM}")
    args = ["--sandbox", mode] if mode == "process" else []  # bwrap: the default
    done = preview(samples, "--reward", "code_execution", "--json", *args)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sandbox"] == mode
    assert report["rows"][0]["result"]["score"] == 1.0
    assert report["rows"][0]["result"]["metrics"]["sandbox"]["reason"] == mode
    table = preview(samples, "--reward", "code_execution", *args)
    isolation = "isolated" if mode == "bwrap" else "NOT isolated"
    assert f"model code ran in sandbox mode '{mode}' ({isolation})" in table.stdout


def test_a_sample_cannot_choose_another_mode(samples: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({**SOLVED, "sandbox": "bwrap"}) + "\n")
    done = preview(other, "--reward", "code_execution", "--sandbox", "process", "--json")
    assert done.returncode == 1  # the line is skipped, and said so
    report = json.loads(done.stdout)
    assert report["rows"] == []
    assert "asks for sandbox 'bwrap'" in report["skipped"][0]["error"]


def test_without_isolation_the_default_fails_at_start_naming_the_fix(
    samples: Path, tmp_path: Path
) -> None:
    env = without_bwrap(tmp_path)
    done = preview(samples, "--reward", "code_execution", env=env)
    assert done.returncode == 2
    assert done.stdout == ""  # nothing was scored
    assert "no bwrap binary for this platform" in done.stderr
    assert "--sandbox process" in done.stderr
    weaker = preview(samples, "--reward", "code_execution", "--sandbox", "process", env=env)
    assert weaker.returncode == 0, weaker.stderr
    assert "model code ran in sandbox mode 'process' (NOT isolated)" in weaker.stdout


def test_sandbox_errors(samples: Path) -> None:
    math = preview(samples, "--reward", "math", "--sandbox", "process")
    assert math.returncode == 2
    assert "reward 'math' takes none. Drop --sandbox." in math.stderr
    typo = preview(samples, "--reward", "code_execution", "--sandbox", "procss")
    assert typo.returncode == 2
    assert "unknown sandbox mode 'procss'" in typo.stderr
    assert "Did you mean 'process'?" in typo.stderr
    kwargs = preview(samples, "--reward", "code_execution", "--kwargs", '{"sandbox": "process"}')
    assert kwargs.returncode == 2
    assert "give the sandbox mode with --sandbox, not in --kwargs." in kwargs.stderr


def test_max_samples_below_1_names_the_flag(samples: Path) -> None:
    """The flag the user typed, not the library's field (issue 40 item 14)."""
    done = preview(samples, "--reward", "code_execution", "--max-samples", "0")
    assert done.returncode == 2
    assert done.stderr == "error: --max-samples must be at least 1, got 0.\n"
