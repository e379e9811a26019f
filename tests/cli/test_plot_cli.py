"""``rk-agent preview --plot`` and ``rk-agent show RUN_DIR --plot`` as real subprocesses: the
picture is written, holds the histograms, and matplotlib loads only when a plot is asked for."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_dir import RunDir
from rk_agent.runs.trajectory import Failure, Trajectory, Turn
from rk_agent.types import EvaluateResult, Message, MetricResult, StopReason
from tests.fireworks.test_rft_data import task

TUTORIAL = Path(__file__).resolve().parents[2] / "examples" / "first_reward"
RK_AGENT = str(Path(sys.executable).with_name("rk-agent"))


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIREWORKS_")}
    return subprocess.run(
        [RK_AGENT, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
        env={**env, "COLUMNS": "200", "NO_COLOR": "1"},
    )  # fmt: skip


def picture(path: Path) -> tuple[int, int, Any]:
    from matplotlib.image import imread

    image = imread(path)
    return image.shape[1], image.shape[0], image[..., :3].reshape(-1, 3)


def not_blank(pixels: Any) -> bool:
    return bool((pixels < 0.95).any(axis=1).mean() > 0.03)


@pytest.fixture
def tutorial(tmp_path: Path) -> Path:
    target = tmp_path / "my_reward_function"
    shutil.copytree(TUTORIAL, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_preview_plot_as_the_tutorial_writes_preview(tutorial: Path) -> None:
    done = run(
        ["preview", "--metrics-folders", "relevance=./metrics/relevance",
         "--samples", "./samples.jsonl", "--plot", "rewards.png"],
        tutorial,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "reward histograms: rewards.png" in done.stdout
    width, height, pixels = picture(tutorial / "rewards.png")
    assert width >= 420 and height >= 320 and not_blank(pixels)


def test_preview_json_keeps_stdout_json(tutorial: Path) -> None:
    import json

    done = run(["preview", "-m", "relevance=./metrics/relevance", "-s", "./samples.jsonl",
                "--json", "--plot", "out/r.png"], tutorial)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"]
    assert "reward histograms: out/r.png" in done.stderr
    assert (tutorial / "out" / "r.png").is_file()


def test_a_wrong_suffix_fails_before_scoring(tutorial: Path) -> None:
    done = run(["preview", "-m", "relevance=./metrics/relevance", "-s", "./samples.jsonl",
                "--plot", "rewards.txt"], tutorial)  # fmt: skip
    assert done.returncode != 0
    assert "cannot write a plot to 'rewards.txt': expected a file ending in one of" in (
        done.stdout + done.stderr
    )
    assert "scored" not in done.stdout


def test_matplotlib_loads_only_for_a_plot(tutorial: Path) -> None:
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom rk_agent.cli.app import app\n"
        "args = ['preview', '-m', 'relevance=./metrics/relevance', '-s', './samples.jsonl']\n"
        "result = CliRunner().invoke(app, args + sys.argv[1:])\n"
        "print(result.exit_code, 'matplotlib' in sys.modules)\n"
    )
    without = subprocess.run([sys.executable, "-c", code], cwd=tutorial, capture_output=True,
                             text=True, timeout=120)  # fmt: skip
    assert without.stdout.split()[-2:] == ["0", "False"], without.stderr
    with_plot = subprocess.run([sys.executable, "-c", code, "--plot", "p.png"], cwd=tutorial,
                               capture_output=True, text=True, timeout=120)  # fmt: skip
    assert with_plot.stdout.split()[-2:] == ["0", "True"], with_plot.stderr


def test_show_plots_a_run_with_failed_and_invalid_episodes(tmp_path: Path) -> None:
    run_dir = RunDir.create(tmp_path / "run", RolloutConfig(env="tools", n=3, group_size=2))
    outcomes: list[EvaluateResult | None] = [
        EvaluateResult(score=1.0, metrics={"answer": MetricResult(score=1.0)}),
        EvaluateResult(score=0.0, metrics={"answer": MetricResult(score=0.0)}),
        EvaluateResult(score=0.5, metrics={"answer": MetricResult(score=0.5)}),
        EvaluateResult.invalid("ValueError: unreadable answer"),
        None,
        EvaluateResult(score=1.0, metrics={"answer": MetricResult(score=1.0)}),
    ]
    for n, episode in enumerate(outcomes):
        failure = (
            Failure(kind="env_error", message="boom", where="environment")
            if episode is None
            else None
        )
        run_dir.append(Trajectory(
            id=f"{n // 2}-{n % 2}", task_index=n // 2, sample=n % 2, seed=n, task=task(n // 2),
            env="tools", model="m", episode=episode, failure=failure,
            stop_reason=StopReason.ERROR if episode is None else StopReason.ANSWERED,
            turns=[Turn(index=0, assistant=Message(role="assistant", content="x"))],
        ))  # fmt: skip
    run_dir.close()
    done = run(["show", str(run_dir.path), "--limit", "0", "--plot", "hist.png"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "reward histograms: hist.png" in done.stdout
    width, height, pixels = picture(tmp_path / "hist.png")
    assert (width, height) == (2 * 420, 320 + 50)  # score and answer, with a title
    assert not_blank(pixels)
    red = (abs(pixels - [0xC4 / 255, 0x4E / 255, 0x52 / 255]).max(axis=1) < 0.03).sum()
    assert red > 200  # the two episodes without a valid score, counted apart
