"""One figure a benchmark measured, next to its target, in a line `run_all.py` collects.

Every benchmark prints its figures for people as it likes; each figure a doc or a closing note
quotes is also printed once through `figure`, as ``FIGURE {json}``, so that
``benchmarks/run_all.py`` (``make bench``) can list every quoted figure with its target from
one run at one commit. A ratio of two things (the client against the SDK, the engine against
its ideal) is computed from one run of both, never from figures taken apart.
"""

from __future__ import annotations

import json

PREFIX = "FIGURE "


def figure(name: str, value: float, unit: str, target: str, met: bool | None) -> None:
    """Print one figure: its name, value and unit, the target in words, and whether it is met
    (``None`` where the figure has no target of its own)."""
    record = {"name": name, "value": value, "unit": unit, "target": target, "met": met}
    print(PREFIX + json.dumps(record), flush=True)
