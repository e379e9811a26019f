"""Charts drawn by the server as SVG: a line chart of figures per step, and a histogram.

The functions here compute a chart's geometry (the plot's box, the lines' points, the bars, the
axes' ticks, the alarm markers) as plain data; the template ``_charts.html`` writes it out as
inline SVG, escaping every label like any other text, so nothing is fetched and no script
draws. Axes are scaled to the data: ticks at round numbers (1, 2 or 5 times a power of ten),
rates on 0 to 1.

- `line_chart`: one or more series over training steps (a missing value breaks its line), with
  a dashed marker at each step that raised alarms, their messages as the marker's tooltip;
- `histogram_chart`: the valid values in equal-width bins (`rk_agent.rewards.stats`), the
  values without one counted apart, never drawn as 0.

Main names: `LineChart`, `HistogramChart`, `line_chart`, `histogram_chart`.

Example:
    >>> chart = line_chart("reward", "Reward", [1, 2, 3], {"mean": [0.1, None, 0.5]})
    >>> [len(line.paths) for line in chart.lines]
    [2]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from rk_agent.rewards.stats import reward_stats

__all__ = ["Bar", "HistogramChart", "Line", "LineChart", "Marker", "histogram_chart", "line_chart"]

WIDTH, HEIGHT = 460, 170
"""A chart's size in SVG units (it scales with the page)."""
_LEFT, _RIGHT, _TOP, _BOTTOM = 46, 10, 12, 24  # margins around the plot, for the axes
_DOTS = 60  # steps up to which each value is also a dot with its tooltip
BINS = 20
"""A histogram's bins."""


@dataclass(frozen=True)
class Tick:
    """An axis tick: where (SVG units along its axis) and its label."""

    at: float
    label: str


@dataclass(frozen=True)
class Dot:
    """One value of a series: where, and its tooltip."""

    x: float
    y: float
    label: str


@dataclass(frozen=True)
class Line:
    """A series: its name, its colour's class (``series-0``...), its polylines' points (one per
    run of steps with values) and, on short runs, a dot per value."""

    name: str
    css: str
    paths: list[str]
    dots: list[Dot]
    last: str


@dataclass(frozen=True)
class Marker:
    """The alarms of one step on a chart: the step's x, a label (the alarm's kind, or how many
    there are) and their messages, a line each (the tooltip)."""

    x: float
    label: str
    message: str


@dataclass(frozen=True)
class _Box:
    left: float = _LEFT
    top: float = _TOP
    right: float = WIDTH - _RIGHT
    bottom: float = HEIGHT - _BOTTOM


@dataclass(frozen=True)
class LineChart:
    """A line chart's geometry (module docstring); ``empty`` when no series has a value."""

    id: str
    title: str
    lines: list[Line]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    markers: list[Marker]
    steps: int
    box: _Box = field(default_factory=_Box)
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def empty(self) -> bool:
        """Whether there is nothing to draw."""
        return not any(line.paths for line in self.lines)


@dataclass(frozen=True)
class Bar:
    """A histogram bar: its box and its tooltip."""

    x: float
    y: float
    width: float
    height: float
    label: str


@dataclass(frozen=True)
class HistogramChart:
    """A histogram's geometry (module docstring).

    Attributes:
        count: the values given; invalid: those without a valid value; mean: of the valid ones.
        part: the histogram of a part of something shown beside it (a reward component's
            sub-component, ``answer.format``): drawn folded.
    """

    id: str
    title: str
    bars: list[Bar]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    count: int
    invalid: int
    mean: float | None
    part: bool = False
    box: _Box = field(default_factory=_Box)
    width: int = WIDTH
    height: int = HEIGHT


def line_chart(
    chart_id: str,
    title: str,
    steps: Sequence[int],
    series: Mapping[str, Sequence[float | None]],
    *,
    alarms: Iterable[tuple[int, str, str]] = (),
    rate: bool = False,
) -> LineChart:
    """A line chart of ``series`` (each a value per step of ``steps``, ``None``: none).

    Args:
        chart_id: the chart's id on the page.
        title: what it shows.
        steps: the x values, ascending.
        series: each series' values by name, in the order drawn.
        alarms: ``(step, kind, message)`` of each alarm, drawn as markers.
        rate: the values are fractions: the y axis runs from 0 to 1.
    """
    box = _Box()
    values = [v for vs in series.values() for v in vs if v is not None and math.isfinite(v)]
    ticks = _tick_values(0.0, 1.0) if rate else _span(values)
    low, high = ticks[0], ticks[-1]
    y_ticks = _ticks(ticks, low, high, box.bottom, box.top)
    first, last = (steps[0], steps[-1]) if steps else (0, 1)
    if first == last:
        first, last = first - 1, last + 1

    def x(step: float) -> float:
        return box.left + (step - first) / (last - first) * (box.right - box.left)

    def y(value: float) -> float:
        return box.bottom - (value - low) / (high - low) * (box.bottom - box.top)

    lines = []
    for number, (name, vs) in enumerate(series.items()):
        paths: list[str] = []
        points: list[str] = []
        dots: list[Dot] = []
        for step, value in zip(steps, vs, strict=False):
            if value is None or not math.isfinite(value):
                if points:
                    paths.append(" ".join(points))
                points = []
                continue
            points.append(f"{x(step):.1f},{y(value):.1f}")
            if len(steps) <= _DOTS:
                dots.append(Dot(x(step), y(value), f"step {step}: {name} {_label(value)}"))
        if points:
            paths.append(" ".join(points))
        shown = next((v for v in reversed(vs) if v is not None and math.isfinite(v)), None)
        lines.append(Line(name, f"series-{number}", paths, dots, _label(shown)))
    x_ticks = [  # steps are whole numbers
        Tick(x(t), _label(t))
        for t in _tick_values(first, last)
        if first <= t <= last and t % 1 == 0
    ]
    by_step: dict[int, list[tuple[str, str]]] = {}
    for step, kind, message in alarms:
        by_step.setdefault(step, []).append((kind, message))
    markers = [
        Marker(
            x(step),
            raised[0][0] if len(raised) == 1 else f"{len(raised)} alarms",
            "\n".join(message for _, message in raised),
        )
        for step, raised in sorted(by_step.items())
        if steps
    ]
    return LineChart(chart_id, title, lines, x_ticks, y_ticks, markers, len(steps), box)


def histogram_chart(
    chart_id: str, title: str, values: Iterable[float], *, part: bool = False
) -> HistogramChart:
    """A histogram of ``values`` (NaN and infinite ones counted apart as invalid)."""
    box = _Box()
    stats = reward_stats(values, bins=BINS)
    edges = stats.histogram.edges if stats.histogram else [0.0, 1.0]
    counts = stats.histogram.counts if stats.histogram else [0]
    low, high = edges[0], edges[-1]
    if high == low:
        low, high = low - 0.5, high + 0.5
    ticks = sorted({float(round(t)) for t in _tick_values(0.0, float(max(max(counts), 1)))})
    top = ticks[-1]
    y_ticks = _ticks(ticks, 0.0, top, box.bottom, box.top)
    span = high - low
    bars = []
    for count, left, right in zip(counts, edges, edges[1:], strict=False):
        if edges[0] == edges[-1]:  # one value: one bar in the middle
            left, right = low + span * 0.45, low + span * 0.55
        x0 = box.left + (left - low) / span * (box.right - box.left)
        x1 = box.left + (right - low) / span * (box.right - box.left)
        height = count / top * (box.bottom - box.top)
        label = f"{_label(edges[0] if edges[0] == edges[-1] else left)}"
        if edges[0] != edges[-1]:
            label += f" to {_label(right)}"
        bars.append(
            Bar(x0 + 0.5, box.bottom - height, max(x1 - x0 - 1, 1), height, f"{label}: {count}")
        )
    x_ticks = [
        Tick(box.left + (t - low) / span * (box.right - box.left), _label(t))
        for t in _tick_values(low, high)
        if low <= t <= high
    ]
    return HistogramChart(
        chart_id, title, bars, x_ticks, y_ticks, stats.count, stats.invalid, stats.mean, part, box
    )


def _span(values: list[float]) -> list[float]:
    """Round tick values spanning ``values`` (around the one value when all are equal)."""
    if not values:
        return _tick_values(0.0, 1.0)
    low, high = min(values), max(values)
    if high == low:
        return _tick_values(low - 0.5, high + 0.5)
    return _tick_values(low, high)


def _tick_values(low: float, high: float, count: int = 5) -> list[float]:
    """Round numbers spanning ``low`` to ``high`` (about ``count`` of them)."""
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    start = math.floor(low / step + 1e-9) * step
    ticks: list[float] = []
    value = start
    while value <= high + step * 1e-6 and len(ticks) < 20:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 12))
    return ticks


def _ticks(values: list[float], low: float, high: float, bottom: float, top: float) -> list[Tick]:
    """Ticks at ``values`` on an axis from ``low`` (at ``bottom``) to ``high`` (at ``top``)."""
    return [Tick(bottom - (v - low) / (high - low) * (bottom - top), _label(v)) for v in values]


def _label(value: float | None) -> str:
    if value is None:
        return "-"
    if float(value).is_integer() and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
