"""The training process's memory figures."""

from __future__ import annotations

from rk_agent.trainers.memory import (
    machine_memory_bytes,
    memory_figures,
    peak_resident_bytes,
    resident_bytes,
)


def test_memory_readings_are_plausible() -> None:
    now, peak = resident_bytes(), peak_resident_bytes()
    assert now is not None and 10 * 1024**2 < now <= peak
    machine = machine_memory_bytes()
    assert machine is not None and peak < machine
    figures = memory_figures()
    assert sorted(figures) == ["peak_rss_bytes", "rss_bytes"]
