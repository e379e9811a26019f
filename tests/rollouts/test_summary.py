"""Run summaries: the unbiased pass@k estimator and the statistics."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rk_agent.rollouts.summary import pass_at_k


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [(1, 0, 1, 0.0), (1, 1, 1, 1.0), (4, 1, 1, 0.25), (4, 1, 2, 0.5), (4, 2, 4, 1.0),
     (10, 3, 5, 1 - math.comb(7, 5) / math.comb(10, 5))],
)  # fmt: skip
def test_pass_at_k(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_needs_k_at_most_n() -> None:
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(2, 1, 3)


def test_a_summary_carries_the_watch_over_its_task_groups() -> None:
    from rk_agent.rollouts.summary import summarize
    from rk_agent.types import EvaluateResult
    from tests.rollouts.test_watch import _trajectory, _turn

    def episode(task: int, score: float) -> Any:
        result = EvaluateResult(score=score, metrics={"answer": score}, weights={"answer": 1.0})
        turns = [_turn(0, f"Answer: {score}", finish_reason="stop")]
        return _trajectory(turns, result, task_index=task, success=score >= 1.0)

    trajectories = [episode(0, 1.0), episode(0, 0.0), episode(1, 0.0), episode(1, 0.0)]
    watch = summarize(trajectories).watch
    assert watch is not None
    assert (watch.groups, watch.zero_spread, watch.zero_spread_all_fail) == (2, 0.5, 0.5)
    assert watch.distinct_answers == 1.5 and watch.single_answer_groups == 0.5
    assert watch.component_shares == {"answer": 1.0, "step_rewards": 0.0}
