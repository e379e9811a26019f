"""Fewer and shorter garbage-collector pauses while episodes are played.

A turn allocates a few hundred container objects (messages, results, dicts), nearly all freed
at once by reference counting. CPython's cyclic collector still walks its youngest generation
every 700 net allocations, and now and then (as finished trajectories pile up) every object in
the process: the imports', a loaded model's, each trajectory so far. A collection stops every
episode of the process while it runs, so at concurrency 128 its time is added to 128 replies.

`fewer_gc_pauses` (around `rk_agent.rollouts.engine.run_rollouts`' episodes) freezes what
exists when the run starts (modules, the model, the environments: not the run's garbage), so
that collections skip it, and collects the youngest generation every ``YOUNG_THRESHOLD``
allocations instead of 700. Both are undone when the outermost run in the process ends; the
collector itself stays on, so the run's own reference cycles are still freed.

Main names: `fewer_gc_pauses`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "fewer_gc_pauses"]

YOUNG_THRESHOLD = 20_000

_depth = 0  # runs in progress in this process (they may overlap in one event loop)


@contextmanager
def fewer_gc_pauses() -> Iterator[None]:
    """Freeze the objects that exist now and collect the young generation less often, until
    the outermost such block ends (then the thresholds the process had are restored)."""
    global _depth
    _depth += 1
    saved = gc.get_threshold()
    if _depth == 1:
        gc.freeze()
        if saved[0] and saved[0] < YOUNG_THRESHOLD:  # 0: the process turned collection off
            gc.set_threshold(YOUNG_THRESHOLD, *saved[1:])
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.set_threshold(*saved)
            gc.unfreeze()
