"""Text that looks like markup is printed as written by every command that prints what it did
not write itself: samples, rewards' reasons, model output, skipped lines, help strings.

``[/INST]`` is common in Llama transcripts and judges' reasons; rich read it as a closing tag
and crashed (``MarkupError``), and ``[bold]x[/bold]`` lost its brackets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rk_agent.testing.stub_server import StubServer

TRICKY = "[/INST] and [bold]x[/bold] and [red]"
ENV = {**os.environ, "COLUMNS": "400"}

REWARD = '''
from rk_agent import EvaluateResult, MetricResult, reward_function


@reward_function
def quoting(messages, ground_truth=None, **kwargs):
    """Quote the ground truth and the reply back, brackets and all."""
    reply = messages[-1]["content"] if isinstance(messages[-1], dict) else messages[-1].content
    return EvaluateResult(
        score=0.5,
        reason=f"expected {ground_truth!s}; got {reply}",
        metrics={"echo": MetricResult(score=0.5, reason=f"saw {reply}")},
    )
'''


def rk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rk_agent", *args], capture_output=True, text=True, timeout=240,
        env=ENV,
    )  # fmt: skip


def test_preview_prints_samples_reasons_and_skipped_lines_as_written(tmp_path: Path) -> None:
    (tmp_path / "quoting.py").write_text(REWARD)
    samples = tmp_path / "samples.jsonl"
    sample = {
        "messages": [{"role": "user", "content": "Say it."},
                     {"role": "assistant", "content": TRICKY}],
        "ground_truth": "[/INST]",
    }  # fmt: skip
    samples.write_text(json.dumps(sample) + "\n" + '{"broken [/INST]\n')
    out = rk("preview", "--samples", str(samples), "--reward", f"{tmp_path}/quoting.py::quoting")
    assert out.returncode == 1, out.stderr  # preview's code for "some lines were skipped"
    assert "MarkupError" not in out.stderr + out.stdout
    assert f"expected [/INST]; got {TRICKY}" in out.stdout
    assert "skipped" in out.stdout and "[/INST]" in out.stdout.split("skipped", 1)[1]


def test_show_prints_model_output_and_reasons_as_written(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with StubServer([f"{TRICKY}\n#### 4"]) as server:
        played = rk(
            "rollout", "--env", "math", "--base-url", server.base_url, "--model", "m",
            "--n", "1", "--output", str(run_dir),
        )  # fmt: skip
    assert played.returncode == 0, played.stderr
    shown = rk("show", str(run_dir), "--episode", "0-0")
    assert shown.returncode == 0, shown.stderr
    assert TRICKY in shown.stdout
    assert "MarkupError" not in shown.stderr


def test_help_strings_with_brackets_keep_them() -> None:
    out = rk("rollout", "--help")
    assert out.returncode == 0, out.stderr
    assert "pip install 'rk-agent[ray]'" in " ".join(out.stdout.split())
