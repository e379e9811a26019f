"""Chart geometry on known inputs: lines broken where a value is missing, round ticks, alarm
markers, histogram bars, invalid values counted apart."""

from __future__ import annotations

import math

import pytest

from rk_agent.view.charts import HEIGHT, WIDTH, histogram_chart, line_chart


def _points(path: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (p.split(",") for p in path.split())]


def test_a_line_breaks_where_a_step_has_no_value_and_spans_the_plot() -> None:
    alarms = [(3, "k", "m"), (4, "k1", "m1"), (4, "k2", "m2")]
    chart = line_chart("c", "Reward", [1, 2, 3, 4], {"mean": [0.0, None, 0.5, 1.0]}, alarms=alarms)
    [line] = chart.lines
    assert [len(_points(p)) for p in line.paths] == [1, 2]
    first, (third, last) = _points(line.paths[0])[0], _points(line.paths[1])
    assert (first[0], last[0]) == (chart.box.left, chart.box.right)  # steps 1 and 4 at the ends
    width = chart.box.right - chart.box.left
    assert third[0] == pytest.approx(chart.box.left + 2 / 3 * width, abs=0.05)  # drawn to 0.1
    assert first[1] == pytest.approx(chart.box.bottom) and last[1] == pytest.approx(chart.box.top)
    assert [t.label for t in chart.x_ticks] == ["1", "2", "3", "4"]
    assert [t.label for t in chart.y_ticks] == ["0", "0.5", "1"]
    one, two = chart.markers  # one a step, its alarms' messages a line each
    assert (one.x, one.label, one.message) == (pytest.approx(third[0], abs=0.05), "k", "m")
    assert (two.x, two.label, two.message) == (chart.box.right, "2 alarms", "m1\nm2")
    assert [d.label for d in line.dots] == ["step 1: mean 0", "step 3: mean 0.5", "step 4: mean 1"]
    assert (line.last, chart.steps, chart.empty) == ("1", 4, False)


def test_rates_run_from_0_to_1_and_nothing_to_draw_is_empty() -> None:
    chart = line_chart("c", "Success", [1, 2], {"success": [0.5, 0.5]}, rate=True)
    assert [t.label for t in chart.y_ticks] == ["0", "0.5", "1"]
    reward = line_chart("c", "Reward", [1, 2], {"mean": [-0.3, 1.7]})
    assert [t.label for t in reward.y_ticks] == ["-0.5", "0", "0.5", "1", "1.5", "2"]
    empty = line_chart("c", "Success", [], {"success": []})
    assert empty.empty and empty.lines[0].last == "-"
    nan = line_chart("c", "Reward", [1], {"mean": [math.nan]})
    assert nan.empty


def test_a_histogram_bins_the_valid_values_and_counts_the_rest_apart() -> None:
    chart = histogram_chart("h", "reward", [0.0, 0.0, 1.0, math.nan, 0.5])
    assert (chart.count, chart.invalid, chart.mean) == (5, 1, 0.375)
    assert len(chart.bars) == 20
    assert [b.label for b in chart.bars if not b.label.endswith(": 0")] == [
        "0 to 0.05: 2",
        "0.5 to 0.55: 1",
        "0.95 to 1: 1",
    ]
    tallest = max(chart.bars, key=lambda b: b.height)
    assert tallest.y == pytest.approx(chart.box.top) and tallest.label == "0 to 0.05: 2"
    assert all(b.x >= 0 and b.x + b.width <= WIDTH and b.y + b.height <= HEIGHT for b in chart.bars)
    assert [t.label for t in chart.y_ticks] == ["0", "1", "2"]


def test_a_histogram_of_one_value_is_one_bar_and_of_none_has_no_height() -> None:
    one = histogram_chart("h", "format", [1.0, 1.0, 1.0])
    assert [b.label for b in one.bars] == ["1: 3"]
    assert [t.label for t in one.x_ticks] == ["0.5", "1", "1.5"]
    nothing = histogram_chart("h", "answer", [math.nan])
    assert (nothing.count, nothing.invalid, nothing.mean) == (1, 1, None)
    assert all(b.height == 0 for b in nothing.bars)
