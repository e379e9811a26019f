"""Run summaries: the unbiased pass@k estimator and the statistics."""

from __future__ import annotations

import math

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
