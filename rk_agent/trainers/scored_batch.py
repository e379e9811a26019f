"""A generation batch as TRL is about to score it: what rk-agent's batch hooks are handed.

`rk_agent.trainers.hooked_trainer.HookedGRPOTrainer` calls every hook of its loop once per
generation batch, just before TRL calls the reward functions, with one `ScoredBatch`. What
needs each batch (the trajectory log of TRL's tool loop, the watch, dynamic sampling) reads
it there, not as a side effect of whichever reward function TRL happens to call first.

Main names: `ScoredBatch`, `BatchHook`, `TrajectoriesOf`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rk_agent.runs.trajectory import Trajectory

__all__ = ["BatchHook", "ScoredBatch", "TrajectoriesOf"]


@dataclass(frozen=True)
class ScoredBatch:
    """One generation batch, before its rewards (module docstring).

    Attributes:
        rows: TRL's rows of the batch (the dataset's columns, and the ``rollout_func``'s
            extra columns: rk-agent's loop adds ``trajectory``).
        completions: TRL's completions, one per row (text or messages).
        completion_ids: the completions' token ids, one list per row.
        trajectories: each row's `Trajectory` when the loop plays episodes (rk-agent's loop:
            its ``trajectory`` column; TRL's tool loop: read from TRL's environments), else
            ``None`` (single-turn).
        step: the training step (TRL's ``global_step`` when the batch is scored).
    """

    rows: Sequence[dict[str, Any]]
    completions: Sequence[Any]
    completion_ids: Sequence[Any]
    trajectories: list[Trajectory] | None
    step: int


BatchHook = Callable[[ScoredBatch], None]
"""Called with each generation batch before its reward functions run."""

TrajectoriesOf = Callable[[Any, Sequence[Any], Sequence[str] | None, int], list[Trajectory]]
"""How a loop whose rows carry no trajectories reads them: ``(environments, completions,
task_ids, step)``, TRL's environment instances of the batch first
(`rk_agent.trainers.trl_env.TRLEnvSpec.trajectories`)."""
