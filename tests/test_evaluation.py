"""``rk_agent.evaluation``: Reward Kit's ``create_evaluation`` and ``preview_evaluation``.

The tutorial's deployment script runs as the tutorial writes it (``reward_kit`` renamed
``rk_agent``), in a subprocess whose ``FIREWORKS_API_BASE`` points at the project's fake of the
documented Fireworks API.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError
from rk_agent.evaluation import EvaluationPreview, create_evaluation, preview_evaluation
from rk_agent.fireworks.auth import Credentials
from rk_agent.fireworks.client import FireworksClient
from rk_agent.testing.fake_fireworks import FakeFireworks

TUTORIAL = Path(__file__).resolve().parents[1] / "examples" / "first_reward"
SECRET = "fw-EVALUATION-0123456789"

DEPLOY_SCRIPT = '''# deploy_relevance.py
import os
import sys
from pathlib import Path
from rk_agent.evaluation import create_evaluation

def main():
    """Deploy the relevance evaluator to Fireworks."""
    print("Deploying relevance evaluator...")

    try:
        # Deploy the evaluator
        metrics_path = Path("metrics/relevance").absolute()

        if not metrics_path.exists():
            print(f"Error: Metrics folder {metrics_path} not found.")
            return

        result = create_evaluation(
            evaluator_id="relevance-evaluator",
            metric_folders=[f"relevance={metrics_path}"],
            display_name="Response Relevance Evaluator",
            description="Evaluates how well a response addresses the user's query",
            force=True  # Update if it already exists
        )

        print(f"Successfully deployed evaluator: {result['name']}")
        print(f"Use this ID for training jobs: {result['name'].split('/')[-1]}")

    except Exception as e:
        print(f"Error deploying evaluator: {str(e)}")
        print("Make sure your API credentials are set up correctly.")

if __name__ == "__main__":
    main()
'''


@pytest.fixture
def tutorial(tmp_path: Path) -> Path:
    target = tmp_path / "my_reward_function"
    shutil.copytree(TUTORIAL, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture
def fake() -> Iterator[FakeFireworks]:
    with FakeFireworks(api_key=SECRET, account_id="acme", build_polls=0) as server:
        yield server


@pytest.fixture
def client(fake: FakeFireworks) -> Iterator[FireworksClient]:
    credentials = Credentials(api_key=SECRET, account_id="acme", api_base=fake.url)
    with FireworksClient(credentials, backoff_s=0.001, backoff_max_s=0.05) as made:
        yield made


def test_the_tutorials_deployment_script(
    tutorial: Path, tmp_path: Path, fake: FakeFireworks
) -> None:
    (tutorial / "deploy_relevance.py").write_text(DEPLOY_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIREWORKS_")}
    (tmp_path / "home").mkdir()
    env.update(HOME=str(tmp_path / "home"), FIREWORKS_API_KEY=SECRET, FIREWORKS_API_BASE=fake.url)
    done = subprocess.run(
        [sys.executable, "deploy_relevance.py"], cwd=tutorial, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Deploying relevance evaluator...",
        "Successfully deployed evaluator: accounts/acme/evaluators/relevance-evaluator",
        "Use this ID for training jobs: relevance-evaluator",
    ]
    created = next(r for r in fake.requests if r.path.endswith("/evaluatorsV2"))
    assert created.json["evaluatorId"] == "relevance-evaluator"


def test_create_evaluation_returns_the_api_object(tutorial: Path, client: FireworksClient) -> None:
    folder = tutorial / "metrics" / "relevance"
    result = create_evaluation(
        evaluator_id="relevance-evaluator", metric_folders=[f"relevance={folder}"],
        display_name="Relevance", force=True, client=client, poll_s=0.01,
    )  # fmt: skip
    assert result["name"] == "accounts/acme/evaluators/relevance-evaluator"
    assert result["state"] == "ACTIVE"
    assert result["displayName"] == "Relevance"
    assert result["entryPoint"] == "main.py::evaluate"


def test_preview_evaluation_scores_locally_and_prints(tutorial: Path) -> None:
    folder = tutorial / "metrics" / "relevance"
    preview = preview_evaluation(
        metric_folders=[f"relevance={folder}"], sample_file=str(tutorial / "samples.jsonl"),
        max_samples=10,
    )  # fmt: skip
    assert isinstance(preview, EvaluationPreview) and preview.where == "local"
    assert preview.total_samples == 3
    assert [round(r.score, 3) for r in preview.results] == [1.0, 0.667, 0.0]
    assert preview.sample_results[0].per_metric_evals == {
        "relevance": 1.0, "relevance.keyword_overlap": 1.0, "relevance.direct_answer": 1.0,
        "relevance.adds_content": 1.0,
    }  # fmt: skip
    assert preview.average_score == pytest.approx(5 / 9)
    text = str(preview)
    assert text.startswith("Evaluation preview (local)\nTotal samples: 3\n")
    assert "Sample 2 (line 2): score 0.667\n" in text
    assert "  relevance.keyword_overlap: 0.667\n" in text
    two = preview_evaluation(
        metric_folders=[f"relevance={folder}"], sample_file=tutorial / "samples.jsonl",
        max_samples=2,
    )  # fmt: skip
    assert two.total_samples == 2


def test_preview_evaluation_on_the_fake_service(tutorial: Path, client: FireworksClient) -> None:
    folder = tutorial / "metrics" / "relevance"
    preview = preview_evaluation(
        metric_folders=[f"relevance={folder}"], sample_file=str(tutorial / "samples.jsonl"),
        on_fireworks=True, client=client,
    )  # fmt: skip
    assert preview.where == "fireworks"
    assert [round(r.score, 3) for r in preview.results] == [1.0, 0.667, 0.0]
    assert preview.results[0].per_metric_evals["relevance.direct_answer"] == 1.0


def test_missing_arguments_say_what_to_pass(tutorial: Path) -> None:
    with pytest.raises(ConfigError) as no_folders:
        preview_evaluation(sample_file=tutorial / "samples.jsonl")
    assert str(no_folders.value) == (
        'expected metric_folders=["NAME=PATH", ...] (e.g. '
        '["relevance=/abs/path/metrics/relevance"]), got none. Pass a list of pairs.'
    )
    with pytest.raises(ConfigError, match=r"^preview_evaluation needs sample_file="):
        preview_evaluation(metric_folders=[f"relevance={tutorial / 'metrics/relevance'}"])
    with pytest.raises(ConfigError, match="got the string 'relevance=x'"):
        preview_evaluation(metric_folders="relevance=x", sample_file="s.jsonl")  # type: ignore[arg-type]
