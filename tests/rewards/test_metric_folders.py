"""Metric folders (``NAME=PATH``): the checks, their messages, and how folders combine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError
from rk_agent.rewards.metric_folders import (
    MetricFolder,
    folder_requirements,
    load_metric_folder,
    metric_folders_reward,
    parse_metric_folders,
    parse_weights,
)

LENGTH = """from rk_agent import EvaluateResult, Message, MetricResult, reward_function


@reward_function
def evaluate(messages: list[Message], **kwargs):
    words = len(messages[-1].content.split())
    return EvaluateResult(score=min(1.0, words / 4), reason=f"{words} words",
                          metrics={"words": MetricResult(score=words / 10, reason="count")})
"""
POLITE = """def evaluate(messages, **kwargs):
    return 1.0 if "please" in messages[-1]["content"].lower() else 0.0
"""
CHAT = [{"role": "user", "content": "Help?"}, {"role": "assistant", "content": "Yes please do"}]


@pytest.fixture
def metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tutorial layout: ./metrics/length/main.py and ./metrics/polite/main.py."""
    for name, source in (("length", LENGTH), ("polite", POLITE)):
        (tmp_path / "metrics" / name).mkdir(parents=True)
        (tmp_path / "metrics" / name / "main.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "metrics"


def test_one_folder_keeps_its_score_and_namespaces_its_metrics(metrics: Path) -> None:
    result = metric_folders_reward(["length=./metrics/length"])(messages=CHAT)
    assert result.score == 0.75
    assert result.metrics["length"].score == 0.75
    assert result.metrics["length.words"].score == pytest.approx(0.3)


def test_several_folders_score_the_mean_by_default(metrics: Path) -> None:
    reward = metric_folders_reward(["length=./metrics/length", "polite=./metrics/polite"])
    result = reward(messages=CHAT)
    assert reward.reward_spec.name == "length+polite"
    assert result.score == pytest.approx((0.75 + 1.0) / 2)
    assert sorted(result.metrics) == ["length", "length.words", "polite"]


def test_weights_and_other_methods(metrics: Path) -> None:
    pairs = ["length=./metrics/length", "polite=./metrics/polite"]
    weighted = metric_folders_reward(pairs, weights={"polite": 3.0})(messages=CHAT)
    assert weighted.score == pytest.approx((0.75 + 3.0) / 4)
    assert metric_folders_reward(pairs, method="min")(messages=CHAT).score == 0.75
    by_mapping = metric_folders_reward({"polite": metrics / "polite"})(messages=CHAT)
    assert by_mapping.score == 1.0


def test_load_one_folder(metrics: Path) -> None:
    assert load_metric_folder("polite=./metrics/polite")(messages=CHAT).score == 1.0


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (
            ["relevance"],
            'expected a metric folder as NAME=PATH (e.g. "relevance=./metrics/relevance"), '
            "got 'relevance'. Write the metric's name, '=', then the folder that holds its "
            "main.py.",
        ),
        (
            ["=./metrics/length"],
            'expected a metric folder as NAME=PATH (e.g. "relevance=./metrics/relevance"), '
            "got '=./metrics/length'. Write the metric's name, '=', then the folder that holds "
            "its main.py.",
        ),
        (
            ["length=./metrics/length", "length=./metrics/polite"],
            "metric name 'length' is given twice ('length=./metrics/length' and "
            "'length=./metrics/polite'); expected one folder per name. Give each folder its "
            "own name.",
        ),
        (
            ["my metric=./metrics/length"],
            "expected a metric name of letters, digits, '_' and '-', got 'my metric' (in "
            "'my metric=./metrics/length'). Rename it, e.g. 'my_metric'.",
        ),
        (
            [],
            "no metric folders given: expected at least one NAME=PATH pair such as "
            '"relevance=./metrics/relevance". Pass --metrics-folders NAME=PATH (repeat it for '
            "more folders).",
        ),
    ],
)
def test_bad_pairs(metrics: Path, pairs: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_metric_folders(pairs)


def test_bad_folders(metrics: Path) -> None:
    cwd = Path.cwd()
    with pytest.raises(ConfigError) as missing:
        parse_metric_folders(["length=./metrics/lenght"])
    assert str(missing.value) == (
        "metric folder 'length': expected a folder at './metrics/lenght', but it does not exist "
        f"(relative paths start from {cwd}). Fix the path after 'length='."
    )
    with pytest.raises(ConfigError) as a_file:
        parse_metric_folders(["length=./metrics/length/main.py"])
    assert str(a_file.value) == (
        "metric folder 'length': expected a folder, got the file './metrics/length/main.py'. "
        "Give the folder that holds main.py, e.g. 'length=./metrics/length'."
    )
    (metrics / "empty").mkdir()
    (metrics / "empty" / "helpers.py").write_text("X = 1\n")
    with pytest.raises(ConfigError) as no_main:
        parse_metric_folders(["empty=./metrics/empty"])
    assert str(no_main.value) == (
        "metric folder 'empty': expected main.py in './metrics/empty', found none (it holds "
        "helpers.py). Put the metric's evaluate() in './metrics/empty/main.py'."
    )
    (metrics / "empty" / "main.py").write_text("def score(messages):\n    return 1.0\n")
    with pytest.raises(ConfigError) as no_evaluate:
        parse_metric_folders(["empty=./metrics/empty"])
    assert str(no_evaluate.value) == (
        "metric folder 'empty': expected './metrics/empty/main.py' to define "
        "evaluate(messages, **kwargs), but it defines score. Name the metric's reward function "
        "evaluate."
    )
    (metrics / "empty" / "main.py").write_text("def evaluate(messages:\n")
    with pytest.raises(ConfigError, match=r"is not valid Python: .* \(line 1\)\. Fix the file\.$"):
        parse_metric_folders(["empty=./metrics/empty"])


def test_an_imported_evaluate_counts(metrics: Path) -> None:
    (metrics / "alias").mkdir()
    (metrics / "alias" / "main.py").write_text("from polite_impl import evaluate\n")
    (metrics / "alias" / "polite_impl.py").write_text(POLITE)
    assert metric_folders_reward(["alias=./metrics/alias"])(messages=CHAT).score == 1.0


def test_requirements_and_weights(metrics: Path) -> None:
    (metrics / "polite" / "requirements.txt").write_text("# for the metric\nregex>=2024.1\n\n")
    assert folder_requirements(MetricFolder("polite", metrics / "polite")) == ["regex>=2024.1"]
    assert folder_requirements(MetricFolder("length", metrics / "length")) == []
    assert parse_weights(["polite=2", "length=0.5"]) == {"polite": 2.0, "length": 0.5}
    with pytest.raises(ConfigError) as bad:
        parse_weights(["polite"])
    assert str(bad.value) == (
        "expected a weight as NAME=NUMBER (e.g. relevance=2), got 'polite'. Write the metric "
        "folder's name, '=', then a number."
    )
