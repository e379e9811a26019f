"""From scores to the report: each row's means, and the flags.

Main names: `Score` (one case's score), `Played` (a row's scores), `judge` (the report),
`score_of` (a reward's `EvaluateResult` as a `Score`), `worst` (a probe's worst variant).

The flags (`FlagKind`):

* ``probe_above_wrong``: a probe's mean total, over the cases it applies to, is above the honest
  wrong answer's mean over the same cases (by more than `TOLERANCE`).
* ``reference_below_max``: the reference's outcome is below ``max_score`` (by more than
  `MAX_TOLERANCE`) on some case.
* ``invalid_score``: any score of any row is invalid (NaN, infinite, None, an error).
* ``no_spread``: every valid total of every row and case is the same.
* ``one_component``: the total is a function of one weighted component alone (equal values of
  it always come with equal totals) while another weighted component varies: that one never
  changes the total.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from rk_agent.soundness.report import Flag, FlagKind, ProbeRow, RowRole, SoundnessReport
from rk_agent.types import EvaluateResult

__all__ = ["MAX_TOLERANCE", "TOLERANCE", "Played", "Score", "judge", "score_of", "worst"]

TOLERANCE = 1e-6
"""How far above the honest wrong answer a probe must score to be flagged."""

MAX_TOLERANCE = 1e-3
"""How far below ``max_score`` the reference may score (rewards such as ``cosine_length`` only
approach their maximum)."""

_MAX_ERRORS = 3


@dataclass(frozen=True)
class Score:
    """One case's score: ``total`` is ``None`` when invalid (``error`` says why)."""

    total: float | None
    outcome: float | None = None
    components: dict[str, float] = field(default_factory=dict)
    weighted: frozenset[str] = frozenset()
    error: str | None = None


@dataclass
class Played:
    """A row's scores: one per case it applied to (the worst variant's, for a probe)."""

    name: str
    role: RowRole
    description: str
    scores: dict[int, Score] = field(default_factory=dict)
    skipped: int = 0


def _finite(value: float | None) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def score_of(result: EvaluateResult | object) -> Score:
    """A reward's result as a `Score`: invalid unless it is an `EvaluateResult` with a valid,
    finite score."""
    if not isinstance(result, EvaluateResult):
        return Score(None, error=f"the reward returned {type(result).__name__}")
    if not result.is_score_valid or not _finite(result.score):
        return Score(None, error=result.error or result.reason or "invalid score")
    components = {
        name: metric.score
        for name, metric in result.metrics.items()
        if "." not in name and metric.is_score_valid and _finite(metric.score)
    }
    weighted = frozenset(n for n, w in (result.weights or {}).items() if w and n in components)
    return Score(result.score, result.score, components, weighted)


def worst(scores: Sequence[Score]) -> Score:
    """The worst of a probe's variants: an invalid one, else the lowest total."""
    invalid = [s for s in scores if s.total is None]
    return invalid[0] if invalid else min(scores, key=lambda s: s.total or 0.0)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _row(played: Played) -> ProbeRow:
    valid = [s for s in played.scores.values() if s.total is not None]
    names = sorted({n for s in valid for n in s.components})
    return ProbeRow(
        name=played.name,
        role=played.role,
        description=played.description,
        cases=len(played.scores),
        skipped=played.skipped,
        invalid=len(played.scores) - len(valid),
        mean=_mean([s.total for s in valid if s.total is not None]),
        outcome=_mean([s.outcome for s in valid if s.outcome is not None]),
        components={
            n: sum(s.components[n] for s in valid if n in s.components)
            / sum(1 for s in valid if n in s.components)
            for n in names
        },
        errors=[str(s.error) for s in played.scores.values() if s.total is None][:_MAX_ERRORS],
    )


def judge(
    *,
    target: str,
    checked: str,
    kind: str,
    cases: int,
    max_score: float | None,
    played: Sequence[Played],
) -> SoundnessReport:
    """The report: a row per baseline and probe, and every flag."""
    flags: list[Flag] = []
    for row in played:
        flags += _invalid(row)
    reference = next(p for p in played if p.role == "reference")
    wrong = next(p for p in played if p.role == "wrong")
    if max_score is not None:
        flags += _below_max(reference, max_score)
    for row in played:
        if row.role == "probe":
            flags += _above_wrong(row, wrong)
    flags += _no_spread(played)
    flags += _one_component(played)
    return SoundnessReport(
        target=target,
        checked=checked,  # type: ignore[arg-type]
        kind=kind,
        cases=cases,
        max_score=max_score,
        rows=[_row(p) for p in played],
        flags=flags,
    )


def _invalid(row: Played) -> list[Flag]:
    bad = [s for s in row.scores.values() if s.total is None]
    if not bad:
        return []
    return [
        Flag(
            kind=FlagKind.INVALID_SCORE,
            probe=row.name,
            message=f"{row.name}: {len(bad)} of {len(row.scores)} scores are invalid (first: "
            f"{bad[0].error}); a reward should score every reply, with 0 for a bad one.",
        )
    ]


def _below_max(reference: Played, max_score: float) -> list[Flag]:
    outcomes = [s.outcome for s in reference.scores.values() if s.outcome is not None]
    short = [o for o in outcomes if o < max_score - MAX_TOLERANCE]
    if not short:
        return []
    return [
        Flag(
            kind=FlagKind.REFERENCE_BELOW_MAX,
            probe="reference",
            message=f"the reference scores below the maximum {max_score:g} on {len(short)} of "
            f"{len(outcomes)} cases (lowest {min(short):.3f}): the right answer should earn "
            "the most; fix the reward or the references (or give the right max_score).",
        )
    ]


def _above_wrong(row: Played, wrong: Played) -> list[Flag]:
    shared = [
        i
        for i, s in row.scores.items()
        if s.total is not None and i in wrong.scores and wrong.scores[i].total is not None
    ]
    if not shared:
        return []
    mine = sum(row.scores[i].total or 0.0 for i in shared) / len(shared)
    theirs = sum(wrong.scores[i].total or 0.0 for i in shared) / len(shared)
    if mine <= theirs + TOLERANCE:
        return []
    return [
        Flag(
            kind=FlagKind.PROBE_ABOVE_WRONG,
            probe=row.name,
            message=f"probe {row.name!r} ({row.description}) scores {mine:.3f} on average, "
            f"above the honest wrong answer's {theirs:.3f}: the reward pays for this trick.",
        )
    ]


def _totals(played: Sequence[Played]) -> list[Score]:
    return [s for p in played for s in p.scores.values() if s.total is not None]


def _no_spread(played: Sequence[Played]) -> list[Flag]:
    totals = {round(s.total or 0.0, 9) for s in _totals(played)}
    if len(totals) != 1:
        return []
    return [
        Flag(
            kind=FlagKind.NO_SPREAD,
            message=f"every reply scored {totals.pop():g}, the reference and the probes alike: "
            "the reward cannot rank replies, so there is nothing to learn from it.",
        )
    ]


def _one_component(played: Sequence[Played]) -> list[Flag]:
    scores = _totals(played)
    weighted = sorted(set().union(*(s.weighted for s in scores))) if scores else []
    if len(weighted) < 2:
        return []
    flags = []
    for name in weighted:
        groups: dict[float, set[float]] = {}
        for s in scores:
            if name in s.components:
                groups.setdefault(round(s.components[name], 9), set()).add(round(s.total or 0, 9))
        if any(len(totals) > 1 for totals in groups.values()):
            continue
        moving = [
            other
            for other in weighted
            if other != name
            and len({round(s.components[other], 9) for s in scores if other in s.components}) > 1
        ]
        if moving:
            flags.append(
                Flag(
                    kind=FlagKind.ONE_COMPONENT,
                    probe=None,
                    message=f"component {name!r} decides the total alone: {', '.join(moving)} "
                    "vary but never change it (check the weights and the gate).",
                )
            )
    return flags
