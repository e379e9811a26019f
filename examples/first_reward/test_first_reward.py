"""The tutorial's test: the metric ranks the three samples as a person would."""

from __future__ import annotations

import json
from pathlib import Path

from rk_agent import get_reward_function

HERE = Path(__file__).parent
evaluate = get_reward_function(f"{HERE / 'metrics/relevance/main.py'}::evaluate")


def load_samples() -> list[dict]:
    lines = (HERE / "samples.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_scores_rank_the_samples() -> None:
    paris, photosynthesis, turtles = (evaluate(**s) for s in load_samples())
    assert paris.score == 1.0
    assert paris.metrics["direct_answer"].success is True
    assert 0.0 < photosynthesis.score < 1.0
    assert turtles.score == 0.0
    assert turtles.metrics["keyword_overlap"].score == 0.0


def test_dict_messages_are_coerced() -> None:
    result = evaluate(messages=[{"role": "user", "content": "Is water wet?"}])
    assert result.score == 0.0
    assert result.reason == "the last message must be the assistant's reply"
