"""What ``rk-agent rollout`` does around the engine, for benchmarks that stand for it.

The command tunes its process's garbage collector while it plays (`rk_agent.gc_tuning`); the
library call `run_rollouts` leaves the caller's collector alone, so a benchmark calling it
directly would measure a process the command never is. ``with as_the_rollout_command():``
around the call measures what a user's command does. A checkout from before `rk_agent.gc_tuning`
(``--compare`` runs) tuned inside `run_rollouts` itself: there it does nothing.
"""

from __future__ import annotations

import contextlib
from typing import Any


def as_the_rollout_command() -> contextlib.AbstractContextManager[Any]:
    """The collector's tuning ``rk-agent rollout`` applies, as a ``with`` block."""
    try:
        from rk_agent.gc_tuning import fewer_gc_pauses
    except ImportError:  # an older checkout: run_rollouts tunes by itself
        return contextlib.nullcontext()
    return fewer_gc_pauses()
