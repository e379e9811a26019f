"""Reward statistics and normalisation, for looking at a batch of rewards.

Main names:
    RewardStats, Histogram: summary of a batch (count, invalid count, mean, std, min, max, bins).
    reward_stats: compute them from scores or `EvaluateResult`s.
    normalize_rewards: z-score normalisation with clipping.
    group_normalize: normalisation within groups (GRPO advantages).

Invalid scores (``None``, NaN, results with ``is_score_valid=False``) are counted but left out of
every statistic, and stay ``None`` in normalised output: they are never turned into a fake 0.

Example:
    >>> reward_stats([0.0, 1.0, 1.0, None]).mean
    0.6666666666666666
    >>> [round(x, 3) for x in group_normalize([1.0, 0.0, 0.5, 0.5], group_size=2)]
    [1.0, -1.0, 0.0, 0.0]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from rk_agent.errors import ConfigError
from rk_agent.types import EvaluateResult

__all__ = ["Histogram", "RewardStats", "group_normalize", "normalize_rewards", "reward_stats"]

Score = float | int | EvaluateResult | None


class Histogram(BaseModel):
    """Bin edges (``len(counts) + 1`` of them) and the count in each bin."""

    edges: list[float]
    counts: list[int]


class RewardStats(BaseModel):
    """Summary of a batch of rewards. Statistics are over valid scores only."""

    count: int
    invalid: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    histogram: Histogram | None


def _valid(scores: Iterable[Score]) -> tuple[list[float | None], int]:
    values: list[float | None] = []
    invalid = 0
    for item in scores:
        if isinstance(item, EvaluateResult):
            value: float | None = item.score if item.is_score_valid else None
        elif item is None:
            value = None
        else:
            value = float(item)
            if not math.isfinite(value):
                value = None
        if value is None:
            invalid += 1
        values.append(value)
    return values, invalid


def reward_stats(scores: Iterable[Score], *, bins: int = 10) -> RewardStats:
    """Mean, population std, min, max and a histogram over the valid scores.

    Args:
        scores: numbers, ``None`` for missing, or `EvaluateResult`s.
        bins: number of equal-width histogram bins between min and max.
    """
    if bins < 1:
        raise ConfigError(f"bins must be at least 1, got {bins}.")
    values, invalid = _valid(scores)
    valid = [v for v in values if v is not None]
    if not valid:
        return RewardStats(
            count=len(values), invalid=invalid, mean=None, std=None, min=None, max=None,
            histogram=None,
        )  # fmt: skip
    mean = math.fsum(valid) / len(valid)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in valid) / len(valid))
    low, high = min(valid), max(valid)
    return RewardStats(
        count=len(values),
        invalid=invalid,
        mean=mean,
        std=std,
        min=low,
        max=high,
        histogram=_histogram(valid, low, high, bins),
    )


def _histogram(values: list[float], low: float, high: float, bins: int) -> Histogram:
    if high == low:
        return Histogram(edges=[low, high], counts=[len(values)])
    width = (high - low) / bins
    counts = [0] * bins
    for v in values:
        counts[min(int((v - low) / width), bins - 1)] += 1
    return Histogram(edges=[low + i * width for i in range(bins)] + [high], counts=counts)


def normalize_rewards(
    scores: Iterable[Score], *, clip: float | None = 5.0, eps: float = 1e-8
) -> list[float | None]:
    """Z-score normalise: ``(x - mean) / (std + eps)``, clipped to ``[-clip, clip]``.

    A batch whose scores are all equal normalises to zeros. Invalid scores stay ``None``.
    """
    values, _ = _valid(scores)
    return _normalize(values, clip=clip, eps=eps)


def group_normalize(
    scores: Sequence[Score],
    *,
    group_size: int | None = None,
    groups: Sequence[object] | None = None,
    scale: bool = True,
    clip: float | None = None,
    eps: float = 1e-8,
) -> list[float | None]:
    """Normalise within groups (one group = the samples of one prompt, as in GRPO).

    Args:
        scores: the rewards, in order.
        group_size: consecutive blocks of this size form the groups; or
        groups: one group key per score (samples need not be consecutive).
        scale: divide by the group's std (GRPO); ``False`` only subtracts the mean (Dr. GRPO).
        clip: optional clip of the result.
        eps: added to the std.

    Raises:
        ConfigError: neither or both of ``group_size`` and ``groups``, or sizes that do not fit.
    """
    if (group_size is None) == (groups is None):
        raise ConfigError("give exactly one of group_size= (consecutive blocks) or groups= (keys).")
    values, _ = _valid(scores)
    if group_size is not None:
        if group_size < 1 or len(values) % group_size:
            raise ConfigError(
                f"{len(values)} scores cannot be split into groups of {group_size}; the count "
                "must be a multiple of group_size."
            )
        keys: Sequence[object] = [i // group_size for i in range(len(values))]
    else:
        assert groups is not None
        if len(groups) != len(values):
            raise ConfigError(f"got {len(groups)} group keys for {len(values)} scores.")
        keys = groups
    members: dict[object, list[int]] = {}
    for index, key in enumerate(keys):
        members.setdefault(key, []).append(index)
    out: list[float | None] = [None] * len(values)
    for indices in members.values():
        normalised = _normalize([values[i] for i in indices], clip=clip, eps=eps, scale=scale)
        for i, value in zip(indices, normalised, strict=True):
            out[i] = value
    return out


def _normalize(
    values: list[float | None], *, clip: float | None, eps: float, scale: bool = True
) -> list[float | None]:
    valid = [v for v in values if v is not None]
    if not valid:
        return list(values)
    mean = math.fsum(valid) / len(valid)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in valid) / len(valid))
    out: list[float | None] = []
    for v in values:
        if v is None:
            out.append(None)
            continue
        z = (v - mean) / (std + eps) if scale else v - mean
        if clip is not None:
            z = max(-clip, min(clip, z))
        out.append(z)
    return out
