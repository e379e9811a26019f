"""What a GRPO run's dynamic sampling and task retirement did, step by step and in all.

Dynamic sampling (`rk_agent.trainers.group_sampling`) drops the groups whose rewards have no
spread (`rk_agent.runs.watch.has_spread`: GRPO gives them no advantage) and plays groups of
fresh tasks in their place, up to a bound of extra draws a step; task retirement stops drawing
a task whose groups were all-pass or all-fail (zero spread, every episode solved or every one
failed: `settled_group`) for several steps in a row. This module holds what
they report, light to read (no torch, no TRL):

- `StepSampling`: one generation's counts (groups drawn, kept, dropped, filled, replaced,
  whether the bound was hit), in every TRL log as ``sampling/...``, in the step's line of
  ``watch.jsonl`` and in the zero-spread alarm's message (`StepSampling.note`);
- `RetiredTask`: a task retired, when and why (`Settled`);
- `SamplingRecord`: the run's totals and its retired tasks, kept in ``run.json``
  (`rk_agent.runs.run_record.RunRecord.sampling`) and listed when the run ends.

Every group drawn is either kept (it has spread and is trained on), dropped (no spread, not
trained on) or filled (no spread, trained on to fill TRL's fixed batch: the bound was hit, or
only retirement is on): ``drawn == kept + dropped + filled``.

Main names: `StepSampling`, `Settled` (`settled_group`), `RetiredTask`, `SamplingRecord`.

Example:
    >>> step = StepSampling(draws=2, drawn=6, kept=4, dropped=2)
    >>> step.note()
    'dynamic sampling dropped 2 of the 6 groups drawn (2 draws) and trained on 4 with spread.'
    >>> record = SamplingRecord()
    >>> record.add(3, step)
    >>> record.steps, record.kept, record.bound_hit_steps
    (1, 4, [])
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from rk_agent.runs.watch import has_spread

__all__ = ["RetiredTask", "SamplingRecord", "Settled", "StepSampling", "settled_group"]

MAX_LISTED_STEPS = 1000
"""`SamplingRecord.bound_hit_steps` keeps at most this many steps (the first ones)."""


class Settled(str, Enum):
    """How a group without reward spread showed its task has nothing left to teach."""

    ALL_PASS = "all_pass"
    """Every episode of the group succeeded, for the same reward (the task is mastered)."""
    ALL_FAIL = "all_fail"
    """Every episode of the group failed, for the same reward (the task is out of reach)."""
    NO_SPREAD = "no_spread"
    """The rewards are all equal and the episodes have no verdicts (or verdicts that
    disagree)."""

    @property
    def phrase(self) -> str:
        """What groups settled this way were, for messages: ``all-pass``, ``all-fail`` or
        ``without reward spread``."""
        return (
            "without reward spread" if self is Settled.NO_SPREAD else self.value.replace("_", "-")
        )


def settled_group(
    rewards: Sequence[float | None], verdicts: Sequence[bool | None] | None = None
) -> Settled | None:
    """How a group shows its task has nothing left to teach, or ``None`` when it does not.

    A group with reward spread (`rk_agent.runs.watch.has_spread`) still teaches: ``None``. One
    without is all-pass or all-fail as the watch counts them (every episode with a verdict
    succeeded, or failed, and at least one has a verdict), else no-spread (no verdicts, or
    verdicts that disagree on equal rewards).

    Example:
        >>> settled_group([1.0, 1.0], [True, True]), settled_group([0.2, 0.0], [False, False])
        (<Settled.ALL_PASS: 'all_pass'>, None)
        >>> settled_group([0.0, 0.0], [False, None]), settled_group([0.5, 0.5])
        (<Settled.ALL_FAIL: 'all_fail'>, <Settled.NO_SPREAD: 'no_spread'>)
    """
    if has_spread(rewards):
        return None
    judged = [v for v in verdicts or [] if v is not None]
    if judged and all(judged):
        return Settled.ALL_PASS
    if judged and not any(judged):
        return Settled.ALL_FAIL
    return Settled.NO_SPREAD


class StepSampling(BaseModel):
    """What dynamic sampling and task retirement did in one generation (module docstring).

    Attributes:
        dynamic: dynamic sampling is on (``False``: only retirement is, and every group drawn
            is trained on).
        draws: generation rounds played (1 when nothing was dropped).
        drawn: groups played, in all rounds.
        kept: groups with reward spread, trained on.
        dropped: groups without spread, not trained on.
        filled: groups without spread, trained on all the same: to fill the batch when the
            bound was hit, or every one without dynamic sampling.
        bound_hit: the step ran out of extra draws (or of fresh tasks) before it held only
            groups with spread.
        replaced: groups of TRL's own draw replaced before they were played: a retired task,
            or (a task dataset) a task already drawn in this pass over the dataset.
        retired: the tasks retired at this step.
    """

    model_config = ConfigDict(extra="ignore")

    dynamic: bool = True
    draws: int = 1
    drawn: int = 0
    kept: int = 0
    dropped: int = 0
    filled: int = 0
    bound_hit: bool = False
    replaced: int = 0
    retired: list[str] = Field(default_factory=list)

    def flat(self, prefix: str = "sampling/") -> dict[str, float]:
        """The counts as ``{prefix + name: value}`` for TRL's log and wandb."""
        return {
            f"{prefix}draws": float(self.draws),
            f"{prefix}groups_drawn": float(self.drawn),
            f"{prefix}groups_kept": float(self.kept),
            f"{prefix}groups_dropped": float(self.dropped),
            f"{prefix}groups_filled": float(self.filled),
            f"{prefix}bound_hit": float(self.bound_hit),
            f"{prefix}groups_replaced": float(self.replaced),
            f"{prefix}tasks_retired": float(len(self.retired)),
        }

    def note(self) -> str | None:
        """One sentence on what was dropped, for the zero-spread alarm and the step's warning
        (``None`` without dynamic sampling)."""
        if not self.dynamic:
            return None
        rounds = "1 draw" if self.draws == 1 else f"{self.draws} draws"
        text = (
            f"dynamic sampling dropped {self.dropped} of the {self.drawn} groups drawn "
            f"({rounds}) and trained on {self.kept} with spread"
        )
        if self.filled:
            groups = "group" if self.filled == 1 else "groups"
            text += f"; it hit its bound, so {self.filled} zero-spread {groups} filled the batch"
        return text + "."


class RetiredTask(BaseModel):
    """A task retirement took out of the draws.

    Attributes:
        task_id: the task.
        step: the optimizer step that retired it (1-based, as TRL logs steps).
        settled: how its last groups showed it has nothing left to teach.
        groups: how many groups in a row did (the ``retire_after`` option).
    """

    task_id: str
    step: int
    settled: Settled
    groups: int


class SamplingRecord(BaseModel):
    """A run's dynamic sampling and retirement in all (``run.json``'s ``sampling``).

    Attributes:
        steps: generations counted.
        drawn: groups played.
        kept: groups with spread trained on.
        dropped: groups without spread not trained on.
        filled: groups without spread trained on to fill the batch.
        replaced: groups of TRL's draw replaced before they were played.
        extra_draws: generation rounds beyond the first.
        bound_hit_steps: the steps that hit the bound (the first `MAX_LISTED_STEPS`).
        retired: the tasks retired, in order.
    """

    model_config = ConfigDict(extra="ignore")

    steps: int = 0
    drawn: int = 0
    kept: int = 0
    dropped: int = 0
    filled: int = 0
    replaced: int = 0
    extra_draws: int = 0
    bound_hit_steps: list[int] = Field(default_factory=list)
    retired: list[RetiredTask] = Field(default_factory=list)

    def add(self, step: int, sampling: StepSampling) -> None:
        """Count one generation of optimizer step ``step``."""
        self.steps += 1
        self.drawn += sampling.drawn
        self.kept += sampling.kept
        self.dropped += sampling.dropped
        self.filled += sampling.filled
        self.replaced += sampling.replaced
        self.extra_draws += sampling.draws - 1
        if sampling.bound_hit and len(self.bound_hit_steps) < MAX_LISTED_STEPS:
            self.bound_hit_steps.append(step)

    def summary(self) -> str:
        """One line for the end of a run."""
        text = (
            f"dynamic sampling over {_count(self.steps, 'step')}: {self.drawn} groups drawn, "
            f"{self.kept} kept, {self.dropped} dropped, {self.filled} filled; "
            f"{self.extra_draws} extra draws"
        )
        if self.bound_hit_steps:
            text += f"; the bound was hit on {_count(len(self.bound_hit_steps), 'step')}"
        return text + "."

    def retired_summary(self) -> str | None:
        """One line listing the retired tasks, or ``None`` when none was."""
        if not self.retired:
            return None
        listed = ", ".join(f"{r.task_id} (step {r.step}, {r.settled.value})" for r in self.retired)
        return f"{_count(len(self.retired), 'task')} retired: {listed}."


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
