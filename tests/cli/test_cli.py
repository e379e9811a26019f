"""The rk-agent command line, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import rk_agent

EXAMPLE = Path(__file__).parents[2] / "examples" / "first_reward"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "300"}  # rich wraps at the terminal width
    return subprocess.run(
        [sys.executable, "-m", "rk_agent", *args], capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip


def test_version() -> None:
    out = run("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"rk-agent {rk_agent.__version__}"


def test_rewards_list() -> None:
    out = run("rewards", "list")
    assert out.returncode == 0
    for name in ("math", "function_call", "tool_calls", "format", "json_schema", "llm_judge"):
        assert name in out.stdout


def test_preview_the_bundled_example() -> None:
    out = run(
        "preview", "--reward", f"{EXAMPLE}/metrics/relevance/main.py::evaluate",
        "--samples", str(EXAMPLE / "samples.jsonl"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "scored 3 samples (3 valid, 0 invalid)" in out.stdout
    assert "keyword_overlap" in out.stdout


def test_preview_json_and_skipped_lines(tmp_path: Path) -> None:
    samples = tmp_path / "s.jsonl"
    good = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "7"}]}
    samples.write_text(json.dumps({**good, "ground_truth": "7"}) + "\n{oops\n")
    out = run("preview", "--reward", "math", "--samples", str(samples), "--json")
    assert out.returncode == 1  # something was skipped
    report = json.loads(out.stdout)
    assert report["rows"][0]["result"]["score"] == 1.0
    assert report["skipped"][0]["line"] == 2
    assert report["skipped"][0]["error"].startswith(f"{samples}:2: invalid JSON")

    table = run("preview", "--reward", "math", "--samples", str(samples))
    assert table.returncode == 1
    assert "1 line(s) skipped" in table.stdout
    assert f"{samples}:2: invalid JSON" in table.stdout


def test_bad_input_is_one_clear_line(tmp_path: Path) -> None:
    out = run("preview", "--reward", "mth", "--samples", str(tmp_path / "x.jsonl"))
    assert out.returncode == 2
    assert out.stderr.strip().startswith("error: unknown reward 'mth'. Did you mean 'math'?")
    assert "Traceback" not in out.stderr
    bad_kwargs = run("preview", "--reward", "math", "--samples", "x", "--kwargs", "[1]")
    assert "error: --kwargs must be a JSON object, got list." in bad_kwargs.stderr
    empty = run("preview", "--reward", "math", "--samples", "x", "--kwargs", "[]")
    assert empty.stderr.strip() == "error: --kwargs must be a JSON object, got an empty list."


def test_preview_with_a_config_file() -> None:
    out = run(
        "preview", "--config", str(Path(__file__).parents[2] / "configs/rewards/first_reward.yaml"),
        "--samples", str(EXAMPLE / "samples.jsonl"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "scored 3 samples" in out.stdout
    neither = run("preview", "--samples", str(EXAMPLE / "samples.jsonl"))
    assert neither.returncode == 2
    assert "give the reward with either --reward" in neither.stderr
