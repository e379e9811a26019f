"""`SFTFilter`: which trajectories SFT keeps, the ``sft_filter`` option of a train config.

A light module (pydantic only), so a train config is checked without loading the SFT data
code; `rk_agent.trainers.sft_data` applies the filter.

Main names: `SFTFilter`, `SFT_FILTER_FIELDS`.

Example:
    >>> SFTFilter(min_reward=0.5, max_per_task=2).describe()
    'success_only=True, min_reward=0.5, drop_failed=True, max_per_task=2'
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SFT_FILTER_FIELDS", "SFTFilter"]


class SFTFilter(BaseModel):
    """Which trajectories become SFT examples.

    Attributes:
        success_only: keep only episodes the environment counts as solved.
        min_reward: keep only episodes whose episode reward is at least this (``None``: no
            threshold; an episode without a valid reward fails any threshold).
        drop_failed: drop episodes that recorded a `Failure` (model errors, timeouts, ...).
        max_per_task: keep at most this many samples of each task (by ``task.id``), those
            with the highest return (`Trajectory.episode_return`; an episode without one, an
            invalid score, comes last, never ranked as a 0), so that easy tasks do not
            dominate.
    """

    model_config = ConfigDict(extra="forbid")

    success_only: bool = True
    min_reward: float | None = None
    drop_failed: bool = True
    max_per_task: int | None = Field(default=None, ge=1)

    def describe(self) -> str:
        """The settings as one line: ``success_only=True, min_reward=None, ...``."""
        return ", ".join(f"{name}={value}" for name, value in self.model_dump().items())


SFT_FILTER_FIELDS = (
    "success_only (true or false), min_reward (a number, or null for none), "
    "drop_failed (true or false), max_per_task (an integer of at least 1, or null for no limit)"
)
"""The fields of `SFTFilter` and the values each takes, for error messages."""
