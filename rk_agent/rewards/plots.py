"""Pictures of reward scores: one histogram per reward component, for people who would rather look.

What ``rk-agent preview --plot FILE.png`` and ``rk-agent show RUN_DIR --plot FILE.png`` draw:
small multiples, one panel per component (the overall ``score`` first, then each metric in the
order they first appear), each titled with its name, ``n`` (scored samples) and the mean of the
valid scores. Invalid scores (``is_score_valid=False``, a failed episode with no result, NaN)
are never drawn as 0: each panel counts them in a separate hatched bar labelled ``invalid``.

`component_scores` and `component_stats` are plain data (tested on known inputs);
`plot_reward_histograms` draws with matplotlib, imported only when it is called, on its own
figure (no pyplot, no global backend change).

Main names: `component_scores`, `component_stats`, `plot_reward_histograms`, `check_plot_path`.

Example:
    >>> from rk_agent.types import EvaluateResult
    >>> results = [EvaluateResult(score=1.0, metrics={"format": 1.0}),
    ...            EvaluateResult.invalid("timeout"), None]
    >>> component_scores(results)
    {'score': [1.0, None, None], 'format': [1.0]}
    >>> component_stats(results)["score"].invalid
    2
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rk_agent.errors import ConfigError, require_extra
from rk_agent.rewards.stats import RewardStats, reward_stats
from rk_agent.types import EvaluateResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "TOTAL",
    "check_plot_path",
    "component_scores",
    "component_stats",
    "plot_reward_histograms",
]

TOTAL = "score"
"""The name of the overall score's panel."""

_VALID_COLOR = "#4C72B0"
_INVALID_COLOR = "#C44E52"


def component_scores(
    results: Iterable[EvaluateResult | None],
) -> dict[str, list[float | None]]:
    """Each component's scores, ``None`` for an invalid one: ``{"score": [...], metric: [...]}``.

    ``None`` in ``results`` (an episode that failed before it was scored) is an invalid overall
    score. A metric counts only the results that have it.
    """
    out: dict[str, list[float | None]] = {TOTAL: []}
    for result in results:
        if result is None:
            out[TOTAL].append(None)
            continue
        out[TOTAL].append(_finite(result.score) if result.is_score_valid else None)
        for name, metric in result.metrics.items():
            value = _finite(metric.score) if metric.is_score_valid else None
            out.setdefault(name, []).append(value)
    return out


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def component_stats(
    results: Iterable[EvaluateResult | None], *, bins: int = 10
) -> dict[str, RewardStats]:
    """`RewardStats` (count, invalid, mean, histogram, ...) per component."""
    return {name: reward_stats(scores, bins=bins) for name, scores in
            component_scores(results).items()}  # fmt: skip


def plot_reward_histograms(
    results: Iterable[EvaluateResult | None] | Mapping[str, RewardStats],
    path: str | Path,
    *,
    title: str | None = None,
    bins: int = 10,
    columns: int = 3,
) -> Path:
    """Draw one histogram per reward component into an image file (PNG, SVG, PDF by suffix).

    Args:
        results: the results (or `component_stats` already computed).
        path: where to write; the folder is created.
        title: the figure's title (e.g. the reward and the samples file).
        bins: bins per histogram, between each component's min and max.
        columns: panels per row.

    Returns:
        The path written.

    Raises:
        ConfigError: nothing to draw (no results), or the suffix is not an image format
            matplotlib writes.
    """
    target = check_plot_path(path)
    stats = dict(results) if isinstance(results, Mapping) else component_stats(results, bins=bins)
    if not stats or all(s.count == 0 for s in stats.values()):
        raise ConfigError("no scores to plot: the reward scored no sample.")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    shown = {name: s for name, s in stats.items() if s.count}
    cols = max(1, min(columns, len(shown)))
    rows = math.ceil(len(shown) / cols)
    figure = Figure(figsize=(4.2 * cols, 3.2 * rows + (0.5 if title else 0)), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, cols, squeeze=False)
    for ax, (name, s) in zip(axes.flat, shown.items(), strict=False):
        _panel(ax, name, s)
    for ax in list(axes.flat)[len(shown) :]:
        ax.set_visible(False)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target)
    return target


def check_plot_path(path: str | Path) -> Path:
    """Check that ``path`` ends in an image format matplotlib writes (before any work is done).

    Raises:
        ConfigError: it does not (the message lists the formats).
        NotAvailableError: matplotlib is not installed (the ``plot`` extra).
    """
    require_extra("plot", "--plot (reward histograms)")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    target = Path(path)
    formats = FigureCanvasAgg.get_supported_filetypes()
    if target.suffix.lower().lstrip(".") not in formats:
        raise ConfigError(
            f"cannot write a plot to {str(target)!r}: expected a file ending in one of "
            f"{', '.join('.' + f for f in sorted(formats))} (e.g. rewards.png)."
        )
    return target


def _panel(ax: Axes, name: str, s: RewardStats) -> None:
    """One component: its valid scores' histogram and, apart, the invalid count."""
    from matplotlib.ticker import MaxNLocator

    valid = s.count - s.invalid
    mean = f"{s.mean:.3f}" if s.mean is not None else "n/a"
    label = f"{name}\nn={s.count}  mean={mean}"
    if s.invalid:
        label += f"  invalid={s.invalid}"
    ax.set_title(label, fontsize=10)
    ticks: list[float] = []
    tick_labels: list[str] = []
    right, width, span = 0.0, 1.0, 1.0
    if s.histogram is not None and valid:
        edges, counts = s.histogram.edges, s.histogram.counts
        low, high = edges[0], edges[-1]
        if high > low:
            span = high - low
            width = span / len(counts)
            lefts = edges[:-1]
            ticks += [low, (low + high) / 2, high]
        else:  # every valid score the same: one bar, centred on it
            width = span = max(abs(low) * 0.2, 0.2)
            lefts = [low - width / 2]
            ticks.append(low)
        tick_labels += [f"{t:.3g}" for t in ticks]
        ax.bar(lefts, counts, width=width, align="edge", color=_VALID_COLOR,
               edgecolor="white", label="valid")  # fmt: skip
        right = lefts[-1] + width
    if s.invalid:
        gap = max(width, span * 0.15)
        at = right + gap if valid else 0.0
        if valid:  # a dashed line keeps the invalid count apart from the score axis
            ax.axvline(right + gap / 2, color="grey", linestyle="--", linewidth=0.8)
        ax.bar([at], [s.invalid], width=width, align="edge", color=_INVALID_COLOR,
               hatch="//", edgecolor="black", label="invalid")  # fmt: skip
        ticks.append(at + width / 2)
        tick_labels.append("invalid")
    ax.set_xticks(ticks, tick_labels)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("samples")
