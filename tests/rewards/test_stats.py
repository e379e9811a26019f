"""Reward statistics and normalisation."""

from __future__ import annotations

import math
import re

import pytest

from rk_agent import EvaluateResult, group_normalize, normalize_rewards, reward_stats
from rk_agent.errors import ConfigError


def test_stats_skip_invalid_scores() -> None:
    stats = reward_stats([0.0, 1.0, None, math.nan, EvaluateResult.invalid("x"),
                          EvaluateResult(score=0.5)], bins=2)  # fmt: skip
    assert (stats.count, stats.invalid) == (6, 3)
    assert stats.mean == pytest.approx(0.5)
    assert stats.std == pytest.approx(math.sqrt(1 / 6))
    assert (stats.min, stats.max) == (0.0, 1.0)
    assert stats.histogram is not None
    assert stats.histogram.edges == [0.0, 0.5, 1.0]
    assert stats.histogram.counts == [1, 2]


def test_stats_of_nothing_valid() -> None:
    stats = reward_stats([None, None])
    assert stats.mean is None and stats.histogram is None and stats.invalid == 2


def test_constant_batch_histogram() -> None:
    stats = reward_stats([1.0, 1.0, 1.0])
    assert stats.std == 0.0
    assert stats.histogram is not None and stats.histogram.counts == [3]


def test_zscore_with_clipping_keeps_none() -> None:
    out = normalize_rewards([0.0, 0.0, 0.0, 0.0, 10.0, None], clip=1.5)
    assert out[4] == 1.5
    assert out[0] == pytest.approx(-0.5)
    assert out[5] is None
    assert normalize_rewards([2.0, 2.0]) == [0.0, 0.0]


def test_group_normalize_by_blocks_and_keys() -> None:
    by_block = group_normalize([1.0, 0.0, 5.0, 5.0], group_size=2)
    assert by_block == pytest.approx([1.0, -1.0, 0.0, 0.0])
    by_key = group_normalize([1.0, 5.0, 0.0, 5.0], groups=["a", "b", "a", "b"], scale=False)
    assert by_key == pytest.approx([0.5, 0.0, -0.5, 0.0])


def test_group_normalize_errors() -> None:
    with pytest.raises(ConfigError, match=re.escape("3 scores cannot be split into groups of 2")):
        group_normalize([1.0, 2.0, 3.0], group_size=2)
    with pytest.raises(ConfigError, match="exactly one of"):
        group_normalize([1.0], group_size=1, groups=["a"])
    with pytest.raises(ConfigError, match="got 1 group keys for 2 scores"):
        group_normalize([1.0, 2.0], groups=["a"])
