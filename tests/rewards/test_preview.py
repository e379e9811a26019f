"""preview_samples: score a JSONL file, report bad lines with their numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rk_agent.errors import DataError, UnknownNameError
from rk_agent.rewards.preview import preview_samples

GOOD = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "4"}],
        "ground_truth": "4"}  # fmt: skip


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_scores_good_lines_and_reports_bad_ones(tmp_path: Path) -> None:
    samples = write(
        tmp_path / "s.jsonl",
        [
            json.dumps(GOOD),
            "{not json",
            json.dumps({"ground_truth": "4"}),
            json.dumps({"messages": [{"role": "robot", "content": "x"}]}),
            json.dumps({**GOOD, "ground_truth": "5"}),
        ],
    )
    report = preview_samples("math", samples)
    assert [row.line for row in report.rows] == [1, 5]
    assert [row.result.score for row in report.rows] == [1.0, 0.0]
    assert [s.line for s in report.skipped] == [2, 3, 4]
    assert report.skipped[0].error.startswith(f"{samples}:2: invalid JSON")
    assert "no messages field" in report.skipped[1].error
    assert "not in the OpenAI chat format" in report.skipped[2].error
    assert report.stats.mean == 0.5
    assert "correct" in report.metric_means


def test_a_sample_the_reward_cannot_take_is_skipped(tmp_path: Path) -> None:
    samples = write(
        tmp_path / "s.jsonl",
        [json.dumps({"messages": [{"role": "user", "content": "only a question"}]})],
    )
    report = preview_samples(lambda response: 1.0, samples)
    assert report.rows == []
    assert "the messages have no assistant message" in report.skipped[0].error


def test_bound_kwargs_reach_the_reward(tmp_path: Path) -> None:
    samples = write(tmp_path / "s.jsonl", [json.dumps(GOOD)])
    report = preview_samples("format", samples, pattern=r"\d+")
    assert report.rows[0].result.score == 1.0


def test_unknown_reward_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError):
        preview_samples("mathh", tmp_path / "s.jsonl")
    with pytest.raises(DataError, match="cannot open"):
        preview_samples("math", tmp_path / "missing.jsonl")
