"""Reward Kit's tutorial commands, typed as the tutorial types them (``rk-agent`` for
``reward-kit``), run as real subprocesses in a folder laid out as the tutorial lays it out
(``examples/first_reward``: ``metrics/relevance/main.py`` and ``samples.jsonl``).

``deploy`` goes to the project's fake of the documented Fireworks API (a loopback server that
builds the uploaded package), because the real service cannot be reached from here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rk_agent.testing.fake_fireworks import FakeFireworks

TUTORIAL = Path(__file__).resolve().parents[2] / "examples" / "first_reward"
RK_AGENT = str(Path(sys.executable).with_name("rk-agent"))
SECRET = "fw-TUTORIAL-0123456789"


@pytest.fixture
def tutorial(tmp_path: Path) -> Path:
    """A copy of the tutorial's folder (so nothing is written into the repository)."""
    target = tmp_path / "my_reward_function"
    shutil.copytree(TUTORIAL, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture
def fake() -> Iterator[FakeFireworks]:
    with FakeFireworks(api_key=SECRET, account_id="acme", build_polls=0) as server:
        yield server


def shell_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIREWORKS_")}
    (tmp_path / "home").mkdir(exist_ok=True)
    return {**env, "HOME": str(tmp_path / "home"), "COLUMNS": "200", "NO_COLOR": "1", **extra}


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RK_AGENT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_preview_as_the_tutorial_writes_it(tutorial: Path, tmp_path: Path) -> None:
    done = run(
        ["preview", "--metrics-folders", "relevance=./metrics/relevance",
         "--samples", "./samples.jsonl"],
        tutorial, shell_env(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("│")]
    assert [row.split("│")[2].strip() for row in rows] == ["1.000", "0.667", "0.000"]
    assert "relevance.keyword_overlap=1.00" in rows[0]
    assert "relevance.direct_answer=0.00" in rows[1]
    assert "scored 3 samples (3 valid, 0 invalid); mean 0.556" in done.stdout


def test_two_folders_score_the_mean_and_json_has_namespaced_metrics(
    tutorial: Path, tmp_path: Path
) -> None:
    (tutorial / "metrics" / "short").mkdir()
    (tutorial / "metrics" / "short" / "main.py").write_text(
        "def evaluate(messages, **kwargs):\n"
        "    return 1.0 if len(messages[-1]['content']) < 40 else 0.0\n"
    )
    done = run(
        ["preview", "--metrics-folders", "relevance=./metrics/relevance",
         "--metrics-folders", "short=./metrics/short", "--samples", "./samples.jsonl", "--json"],
        tutorial, shell_env(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    scores = [row["result"]["score"] for row in report["rows"]]
    # relevance 1.0 / 0.667 / 0.0; short 1.0 (Paris) / 0.0 / 1.0 (turtles)
    assert scores == pytest.approx([1.0, 1 / 3, 0.5])
    assert report["reward"] == "relevance+short"
    assert set(report["rows"][0]["result"]["metrics"]) == {
        "relevance", "relevance.keyword_overlap", "relevance.direct_answer",
        "relevance.adds_content", "short",
    }  # fmt: skip
    weighted = run(
        ["preview", "-m", "relevance=./metrics/relevance", "-m", "short=./metrics/short",
         "--weight", "short=3", "--samples", "./samples.jsonl", "--json", "--max-samples", "1"],
        tutorial, shell_env(tmp_path),
    )  # fmt: skip
    assert [r["result"]["score"] for r in json.loads(weighted.stdout)["rows"]] == [1.0]


def test_deploy_as_the_tutorial_writes_it(
    tutorial: Path, tmp_path: Path, fake: FakeFireworks
) -> None:
    env = shell_env(tmp_path, FIREWORKS_API_KEY=SECRET, FIREWORKS_API_BASE=fake.url)
    command = [
        "deploy", "--id", "relevance-evaluator",
        "--metrics-folders", "relevance=./metrics/relevance",
        "--display-name", "Response Relevance Evaluator",
        "--description", "Evaluates how well a response addresses the user's query",
        "--force",
    ]  # fmt: skip
    done = run(command, tutorial, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "Evaluator accounts/acme/evaluators/relevance-evaluator created (ACTIVE); entry point "
        "main.py::evaluate, requirements: pydantic>=2.7."
    )
    created = next(r for r in fake.requests if r.path.endswith("/evaluatorsV2"))
    assert created.json["evaluator"]["displayName"] == "Response Relevance Evaluator"
    assert created.json["evaluator"]["description"] == (
        "Evaluates how well a response addresses the user's query"
    )
    again = run(command, tutorial, env)
    assert "relevance-evaluator unchanged (ACTIVE)" in again.stdout
    main = tutorial / "metrics" / "relevance" / "main.py"
    main.write_text(main.read_text().replace("plus 0.2", "plus a fifth"))
    replaced = run(command, tutorial, env)
    assert replaced.returncode == 0, replaced.stderr
    assert "relevance-evaluator replaced (ACTIVE)" in replaced.stdout


@pytest.mark.parametrize(
    ("folders", "message"),
    [
        (
            ["relevance"],
            'expected a metric folder as NAME=PATH (e.g. "relevance=./metrics/relevance"), got '
            "'relevance'. Write the metric's name, '=', then the folder that holds its main.py.",
        ),
        (
            ["relevance=./metrics/relevanse"],
            "metric folder 'relevance': expected a folder at './metrics/relevanse', but it does "
            "not exist (relative paths start from {cwd}). Fix the path after 'relevance='.",
        ),
        (
            ["relevance=./metrics"],
            "metric folder 'relevance': expected main.py in './metrics', found none (it holds no "
            ".py file). Put the metric's evaluate() in './metrics/main.py'.",
        ),
        (
            ["relevance=./metrics/relevance", "relevance=./metrics/relevance"],
            "metric name 'relevance' is given twice ('relevance=./metrics/relevance' and "
            "'relevance=./metrics/relevance'); expected one folder per name. Give each folder "
            "its own name.",
        ),
    ],
)
@pytest.mark.parametrize("command", ["preview", "deploy"])
def test_bad_folders_are_one_line_errors(
    tutorial: Path, tmp_path: Path, command: str, folders: list[str], message: str
) -> None:
    args = [command, *[a for f in folders for a in ("--metrics-folders", f)]]
    args += ["--samples", "./samples.jsonl"] if command == "preview" else ["--id", "x", "--force"]
    done = run(args, tutorial, shell_env(tmp_path, FIREWORKS_API_KEY=SECRET))
    assert done.returncode == 2
    assert done.stderr == f"error: {message.format(cwd=tutorial)}\n"


def test_a_main_py_without_evaluate(tutorial: Path, tmp_path: Path) -> None:
    main = tutorial / "metrics" / "relevance" / "main.py"
    main.write_text(main.read_text().replace("def evaluate(", "def relevance("))
    done = run(
        ["preview", "--metrics-folders", "relevance=./metrics/relevance", "--samples",
         "./samples.jsonl"], tutorial, shell_env(tmp_path),
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "error: metric folder 'relevance': expected './metrics/relevance/main.py' to define "
        "evaluate(messages, **kwargs), but it defines keywords, relevance. Name the metric's "
        "reward function evaluate.\n"
    )


def test_a_reward_or_folders_not_both(tutorial: Path, tmp_path: Path) -> None:
    env = shell_env(tmp_path)
    both = run(["deploy", "x.py::fn", "-m", "relevance=./metrics/relevance", "--id", "x"],
               tutorial, env)  # fmt: skip
    assert both.stderr == (
        "error: expected a reward or --metrics-folders, got both ('x.py::fn' and "
        "'relevance=./metrics/relevance'). Drop one: `rk-agent deploy my_rewards.py::fn` or "
        '`rk-agent deploy --metrics-folders "relevance=./metrics/relevance"`.\n'
    )
    mixed = run(["preview", "--reward", "math", "-m", "relevance=./metrics/relevance",
                 "--samples", "samples.jsonl"], tutorial, env)  # fmt: skip
    assert mixed.returncode == 2
    assert mixed.stderr == (
        "error: give the reward with either --reward NAME|PATH, --config FILE or "
        "--metrics-folders NAME=PATH (exactly one of them).\n"
    )
    bad = run(["preview", "-m", "relevance=./metrics/relevance", "--combine", "avg",
               "--samples", "samples.jsonl"], tutorial, env)  # fmt: skip
    assert bad.stderr == (
        "error: expected --combine to be one of mean, weighted_sum, min, product, got 'avg'.\n"
    )


def test_fireworks_preview_of_metric_folders(
    tutorial: Path, tmp_path: Path, fake: FakeFireworks
) -> None:
    env = shell_env(tmp_path, FIREWORKS_API_KEY=SECRET, FIREWORKS_API_BASE=fake.url)
    done = run(
        ["fireworks", "preview", "--metrics-folders", "relevance=./metrics/relevance",
         "--samples", "./samples.jsonl"], tutorial, env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line.split("│")[2:4] for line in done.stdout.splitlines() if line.startswith("│")]
    assert [(score.strip(), ok.strip()) for score, ok in rows] == [
        ("1.000", "yes"), ("0.667", "yes"), ("0.000", "yes"),
    ]  # fmt: skip
    sent = next(r for r in fake.requests if r.path.endswith(":previewEvaluator"))
    files = sent.json["evaluator"]["criteria"][0]["codeSnippets"]["fileContents"]
    assert "relevance/main.py" in files and "metric_folders_evaluator.py" in files


def test_several_folders_after_one_flag_as_reward_kit_writes_them(
    tutorial: Path, tmp_path: Path
) -> None:
    env = shell_env(tmp_path, FIREWORKS_API_KEY=SECRET)
    listed = run(
        ["preview", "--metrics-folders", "relevance=./metrics/relevance",
         "again=./metrics/relevance", "--samples", "./samples.jsonl", "--json"], tutorial, env,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["reward"] == "relevance+again"
    dry = run(
        ["deploy", "--id", "two", "--metrics-folders", "relevance=./metrics/relevance",
         "again=./metrics/relevance", "--dry-run"], tutorial, env,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "again/main.py, main.py, metric_folders_evaluator.py, relevance/main.py" in dry.stdout
    stray = run(["preview", "--samples", "./samples.jsonl", "extra"], tutorial, env)
    assert stray.stderr == (
        "error: unexpected argument 'extra': rk-agent preview takes options (--reward, --config "
        "or --metrics-folders, and --samples).\n"
    )
    two = run(["deploy", "a.py::f", "b.py::g"], tutorial, env)
    assert two.stderr == (
        "error: expected one reward, got 2 ('a.py::f', 'b.py::g'). Give one reward per "
        "`rk-agent deploy`, or several metric folders with --metrics-folders.\n"
    )
