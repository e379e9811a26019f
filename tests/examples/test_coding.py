"""examples/coding, run as a user runs it: ``python examples/coding/<script>.py`` in a
subprocess from the repository root, output checked against the known scores of the
reference solutions (all tests pass) and the buggy ones (a known fraction passes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "coding"

# problem id -> the fraction of its tests the buggy solution passes
BUGGY = {
    "add": "0.333", "is_palindrome": "0.667", "fizzbuzz": "0.750", "factorial": "0.667",
    "reverse_words": "0.333", "max_of_list": "0.667", "count_vowels": "0.667",
    "sum_stdin": "0.000", "squares_stdin": "0.000", "fib": "0.333",
}  # fmt: skip


def python(script: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FIREWORKS_")}
    return subprocess.run(
        [sys.executable, f"examples/coding/{script}", *args], cwd=ROOT, capture_output=True,
        text=True, timeout=280, env={**clean, "WANDB_MODE": "disabled", **env},
    )  # fmt: skip


def test_the_dataset_has_ten_problems_with_tests() -> None:
    rows = [json.loads(line) for line in (EXAMPLE / "problems.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == list(BUGGY)
    assert all(r["ground_truth"] and r["messages"][-1]["role"] == "user" for r in rows)


def test_local_eval() -> None:
    done = python("local_eval.py")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    scores = {line.split()[0]: line.split()[1:3] for line in lines[1:11]}
    assert scores == {pid: ["1.000", buggy] for pid, buggy in BUGGY.items()}
    mean = sum(float(b) for b in BUGGY.values()) / len(BUGGY)
    assert f"10 problems; buggy solutions pass {mean:.3f} of the tests on average" in lines
    assert lines[-1] == "every reference solution passes all its tests; every buggy one fails some"


def test_fireworks_preview_without_a_key_uses_the_fake_and_says_so() -> None:
    done = python("fireworks_preview.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(
        "FIREWORKS_API_KEY is not set: previewing against rk-agent's fake Fireworks API at "
        "http://127.0.0.1:"
    )
    scores = [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("Sample")]
    # samples.jsonl: add, is_palindrome, fizzbuzz, each with the reference then the buggy code
    assert scores == ["1.000", "0.333", "1.000", "0.667", "1.000", "0.750"]
    assert "  code_tests.pass_rate: 0.750" in done.stdout


def test_the_metric_folder_previews_locally_with_the_cli() -> None:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("rk-agent")), "preview", "--metrics-folders",
         "code_tests=./metrics/code_tests", "--samples", "./samples.jsonl", "--json"],
        cwd=EXAMPLE, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [round(r["result"]["score"], 3) for r in report["rows"]] == [
        1.0, 0.333, 1.0, 0.667, 1.0, 0.75,
    ]  # fmt: skip


def test_trl_dry_run_scores_through_the_adapter() -> None:
    done = python("trl_grpo_integration.py", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    got = {line.split()[0]: (line.split()[2], line.split()[4]) for line in done.stdout.splitlines()}
    assert got == {pid: ("1.000", buggy) for pid, buggy in BUGGY.items()}


@pytest.mark.slow
def test_trl_runs_a_real_grpo_step_on_cpu() -> None:
    done = python("trl_grpo_integration.py", "--max-steps", "1", "--max-completion-length", "8")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "GRPO ran 1 step(s) on the CPU with the code_execution reward"
    assert lines[-2].startswith("step 1: rewards/code_execution/mean=")
