"""Reward histograms: the per-component counts on known data, and the picture they make."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from rk_agent.errors import ConfigError
from rk_agent.rewards.plots import (
    check_plot_path,
    component_scores,
    component_stats,
    plot_reward_histograms,
)
from rk_agent.types import EvaluateResult, MetricResult


def result(score: float, **metrics: float | None) -> EvaluateResult:
    return EvaluateResult(
        score=score,
        metrics={k: MetricResult(score=v if v is not None else 0.0, is_score_valid=v is not None)
                 for k, v in metrics.items()},
    )  # fmt: skip


RESULTS: list[EvaluateResult | None] = [
    result(1.0, format=1.0, answer=1.0),
    result(0.5, format=1.0, answer=0.0),
    result(0.0, format=0.0, answer=None),
    EvaluateResult.invalid("ValueError: no answer"),
    None,  # an episode that failed before it was scored
]


def test_component_scores_keep_invalid_apart() -> None:
    scores = component_scores(RESULTS)
    assert scores == {
        "score": [1.0, 0.5, 0.0, None, None],
        "format": [1.0, 1.0, 0.0],
        "answer": [1.0, 0.0, None],
    }


def test_component_stats_on_known_data() -> None:
    stats = component_stats(RESULTS, bins=2)
    total = stats["score"]
    assert (total.count, total.invalid, total.mean) == (5, 2, 0.5)
    assert total.histogram is not None and total.histogram.counts == [1, 2]
    assert stats["format"].histogram is not None
    assert stats["format"].histogram.counts == [1, 2]
    assert (stats["answer"].count, stats["answer"].invalid) == (3, 1)
    assert math.isclose(stats["format"].mean or 0.0, 2 / 3)


def _pixels(path: Path) -> tuple[tuple[int, int], Any]:
    """(width, height) and the RGB pixels as an (N, 3) array of 0..255, read by matplotlib."""
    from matplotlib.image import imread

    image = (imread(path)[..., :3] * 255).round().astype(int)
    height, width = image.shape[:2]
    return (width, height), image.reshape(-1, 3)


def _near(pixels: Any, color: int) -> int:
    """How many pixels are within a few steps of the colour ``0xRRGGBB``."""
    import numpy as np

    target = np.array([(color >> 16) & 255, (color >> 8) & 255, color & 255])
    return int((np.abs(pixels - target).max(axis=1) < 8).sum())


def test_the_picture_has_a_panel_per_component_and_shows_invalid(tmp_path: Path) -> None:
    written = plot_reward_histograms(RESULTS, tmp_path / "out" / "rewards.png", title="t")
    assert written == tmp_path / "out" / "rewards.png"
    size, pixels = _pixels(written)
    assert size == (3 * 420, 320 + 50)  # three panels in a row, 100 dpi, a title
    assert _near(pixels, 0xFFFFFF) < len(pixels) * 0.97  # not blank
    assert _near(pixels, 0x4C72B0) > 500  # the valid scores' bars
    assert _near(pixels, 0xC44E52) > 200  # and the invalid ones, apart


def test_without_invalid_scores_there_is_no_invalid_bar(tmp_path: Path) -> None:
    path = plot_reward_histograms([result(1.0), result(1.0)], tmp_path / "one.png")
    size, pixels = _pixels(path)
    assert size == (420, 320)
    assert _near(pixels, 0xC44E52) == 0
    assert _near(pixels, 0x4C72B0) > 500


def test_only_invalid_scores_still_draw(tmp_path: Path) -> None:
    path = plot_reward_histograms([None, None], tmp_path / "failed.png")
    _, pixels = _pixels(path)
    assert _near(pixels, 0xC44E52) > 200 and _near(pixels, 0x4C72B0) == 0


def test_errors_say_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("expected a file ending in one of")):
        check_plot_path(tmp_path / "rewards.txt")
    with pytest.raises(ConfigError, match=re.escape("no scores to plot")):
        plot_reward_histograms([], tmp_path / "empty.png")
