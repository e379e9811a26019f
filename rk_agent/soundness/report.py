"""The soundness report: what `check_reward` and `check_env` return (pydantic, JSON round-trip).

Main names: `SoundnessReport`, `ProbeRow`, `Flag`, `FlagKind`, `RowRole`.

Example:
    >>> report = SoundnessReport(target="math", checked="reward", kind="math", cases=2)
    >>> SoundnessReport.model_validate_json(report.model_dump_json()) == report
    True
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["Flag", "FlagKind", "ProbeRow", "RowRole", "SoundnessReport"]


class FlagKind(str, Enum):
    """What a flag says is wrong."""

    PROBE_ABOVE_WRONG = "probe_above_wrong"
    """A probe scores above the honest wrong answer on average: the reward pays for the trick."""
    REFERENCE_BELOW_MAX = "reference_below_max"
    """The reference does not reach the reward's maximum on every sample (or seed)."""
    INVALID_SCORE = "invalid_score"
    """A score was NaN, infinite, None or marked invalid."""
    NO_SPREAD = "no_spread"
    """Every reply scored the same: the reward cannot rank anything."""
    ONE_COMPONENT = "one_component"
    """One component decides the total alone: another varies but never changes it."""


RowRole = Literal["reference", "wrong", "probe"]
"""A row's part: one of the two baselines, or a probe."""


class Flag(BaseModel):
    """One problem the check found.

    Attributes:
        kind: what is wrong.
        probe: the row it is about (a probe's name, ``reference``, ``wrong``), if one.
        message: one line: what was found and what to try.
    """

    kind: FlagKind
    probe: str | None = None
    message: str


class ProbeRow(BaseModel):
    """One row of the report: a baseline or a probe, over every sample (or seed).

    Attributes:
        name: ``reference``, ``wrong`` (the honest wrong answer) or the probe's name.
        role: its part.
        description: what it plays.
        cases: samples (or seeds) it was scored on.
        skipped: samples (or seeds) it did not apply to.
        invalid: cases whose score was invalid.
        mean: the mean total reward over its valid cases (for an environment, step rewards
            included); ``None`` when it has none.
        outcome: for an environment, the mean episode reward (without step rewards); for a
            reward, the same as ``mean``.
        components: the mean of each component (the result's top-level metrics).
        errors: the first few reasons of invalid scores.
    """

    name: str
    role: RowRole
    description: str = ""
    cases: int = 0
    skipped: int = 0
    invalid: int = 0
    mean: float | None = None
    outcome: float | None = None
    components: dict[str, float] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)


class SoundnessReport(BaseModel):
    """What a soundness check found: one row per baseline and probe, and the flags.

    Attributes:
        target: the reward's or the environment's name.
        checked: ``"reward"`` or ``"env"``.
        kind: the kind of probes played (`rk_agent.soundness.probes.KINDS`).
        cases: samples (or seeds) played.
        max_score: the maximum the reference should reach (``None``: not checked).
        rows: ``reference``, ``wrong``, then one per probe.
        flags: the problems found; empty when the reward (or environment) is sound as far as
            these probes can tell.
    """

    target: str
    checked: Literal["reward", "env"]
    kind: str
    cases: int
    max_score: float | None = 1.0
    rows: list[ProbeRow] = Field(default_factory=list)
    flags: list[Flag] = Field(default_factory=list)

    @property
    def flagged(self) -> bool:
        """Whether anything was flagged."""
        return bool(self.flags)

    def row(self, name: str) -> ProbeRow:
        """The row named ``name``.

        Raises:
            KeyError: there is no such row.
        """
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"no row {name!r}; rows: {', '.join(r.name for r in self.rows)}")
