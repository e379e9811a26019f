"""Per-reward histograms in wandb during GRPO training.

TRL logs each reward function's mean and std; the shape of the scores (all 0 and 1? a long
tail? how many invalid?) is lost. `record_scores` wraps the trainer's reward functions so every
score they return is kept by name in a `ScoreBuffer`, and `RewardHistogramCallback` turns what
was kept since the last log into one ``wandb.Histogram`` per reward
(``rewards/<name>/histogram``, valid scores only) plus ``rewards/<name>/invalid_count`` at each
logging step, then starts afresh. It logs with ``commit=False`` and must run before the
reporting callbacks (`rk_agent.trainers.callbacks.attach`), so the histograms land on the same
wandb step as TRL's own figures. Nothing happens when wandb is not among ``report_to`` or no
wandb run is active; wandb is imported only then.

Main names: `ScoreBuffer`, `record_scores`, `RewardHistogramCallback`, `histogram_logs`.
"""

from __future__ import annotations

import functools
import inspect
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from transformers import TrainerCallback

from rk_agent.trainers.rewards import RewardFunc

__all__ = ["RewardHistogramCallback", "ScoreBuffer", "histogram_logs", "record_scores"]


class ScoreBuffer:
    """Scores by reward name since the last `take` (thread-safe)."""

    def __init__(self) -> None:
        self._scores: dict[str, list[float | None]] = {}
        self._lock = threading.Lock()

    def add(self, name: str, scores: Sequence[Any]) -> None:
        """Keep ``scores``; ``None``, NaN and anything not a number count as invalid."""
        kept = [_number(s) for s in scores]
        with self._lock:
            self._scores.setdefault(name, []).extend(kept)

    def take(self) -> dict[str, list[float | None]]:
        """Everything kept so far, by name, and empty the buffer."""
        with self._lock:
            taken, self._scores = self._scores, {}
        return taken


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def record_scores(funcs: Sequence[RewardFunc], buffer: ScoreBuffer) -> list[RewardFunc]:
    """The same reward functions (same names, same results) that also keep their scores.

    An ``async`` reward function is passed through as it is (TRL awaits those itself).
    """

    def wrap(fn: RewardFunc) -> RewardFunc:
        name = getattr(fn, "__name__", type(fn).__name__)
        if inspect.iscoroutinefunction(fn):
            return cast(RewardFunc, fn)

        @functools.wraps(fn)
        def recording(*args: Any, **kwargs: Any) -> list[float | None]:
            scores = fn(*args, **kwargs)
            buffer.add(name, scores)
            return scores

        return recording

    return [wrap(fn) for fn in funcs]


class RewardHistogramCallback(TrainerCallback):
    """Logs a ``wandb.Histogram`` per reward at each logging step (module docstring).

    Args:
        buffer: where the wrapped reward functions keep their scores.
    """

    def __init__(self, buffer: ScoreBuffer) -> None:
        self.buffer = buffer

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        report_to = getattr(args, "report_to", None) or []
        if "wandb" not in report_to or not getattr(state, "is_world_process_zero", True):
            return
        import wandb

        if wandb.run is None:
            return  # no run yet: keep the scores for the next log
        data = histogram_logs(self.buffer.take(), wandb.Histogram)
        if data:
            wandb.log(data, commit=False)  # joins TRL's log of this step (it commits)


def histogram_logs(
    scores: dict[str, list[float | None]], histogram: Callable[[list[float]], Any]
) -> dict[str, Any]:
    """``{"rewards/<name>/histogram": histogram(valid), "rewards/<name>/invalid_count": n}``.

    Example:
        >>> histogram_logs({"answer": [1.0, 0.0, None]}, list)
        {'rewards/answer/histogram': [1.0, 0.0], 'rewards/answer/invalid_count': 1}
    """
    data: dict[str, Any] = {}
    for name, values in scores.items():
        valid = [v for v in values if v is not None]
        if valid:
            data[f"rewards/{name}/histogram"] = histogram(valid)
        data[f"rewards/{name}/invalid_count"] = len(values) - len(valid)
    return data
