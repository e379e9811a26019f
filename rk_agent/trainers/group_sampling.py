"""Dynamic sampling and task retirement for GRPO, in both loops (``--loop rk`` and ``trl``).

A GRPO group whose rewards are all equal gets no advantage: it adds nothing to the gradient,
but its episodes cost their full generation time. With **dynamic sampling** (DAPO's) each step
drops such groups and plays groups of fresh tasks in their place
(`rk_agent.trainers.task_draws`), round after round, until the step holds as many groups with
spread as TRL drew, or ``max_extra_draws`` rounds beyond the first have been played. TRL trains
on a batch of fixed shape, so a step that hits the bound fills the missing places with groups
it dropped (their advantage is zero: they teach nothing, as without dynamic sampling) and says
so. With **task retirement** (``retire_after``) a task whose last groups all passed or all
failed, with equal rewards, stops being played
(`rk_agent.trainers.task_draws.TaskDraws.admit`).

`GroupSampler.generate` runs one generation: it is handed TRL's drawn rows, TRL's own scoring
of a list of rows (``GRPOTrainer._generate_and_score_completions``: the episodes played, the
rewards computed, the advantages normalised per group) and a way to join the chosen groups of
several scored batches into one (`rk_agent.trainers.trl_batches.select_groups`). Each row's
reward is read from what TRL's reward functions returned for it (kept by a `WatchRecorder`)
and weighted by `rk_agent.trainers.rewards.weighted_rewards`, the watch's rule too; a group has
spread by `rk_agent.runs.watch.has_spread`, the watch's definition. The trainer that calls it
is `rk_agent.trainers.hooked_trainer.HookedGRPOTrainer`.

What each generation did is a `rk_agent.runs.group_sampling.StepSampling`: in TRL's log
(``sampling/...``), the watch's line and zero-spread alarm, and the run's totals
(`GroupSampler.record`, ``run.json``).

Main names: `SamplingOptions`, `GroupSampler`, `check_sampling`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from rk_agent.errors import ConfigError, NotAvailableError
from rk_agent.runs.group_sampling import SamplingRecord, StepSampling, settled_group
from rk_agent.runs.watch import has_spread
from rk_agent.trainers.rewards import weighted_rewards

if TYPE_CHECKING:
    from rk_agent.trainers.task_draws import TaskDraws
    from rk_agent.trainers.watch import WatchRecorder

__all__ = ["GroupSampler", "SamplingOptions", "check_sampling"]

logger = logging.getLogger(__name__)

_KEPT = 100
"""`GroupSampler.take_pending` keeps at most this many generations unread."""

Rows = list[dict[str, Any]]
Score = Callable[[Rows], Any]
"""TRL's scoring of rows (a multiple of ``num_generations``, groups consecutive): a batch."""
Merge = Callable[[Sequence[tuple[Any, Sequence[int]]]], Any]
"""One batch of the chosen groups: ``(batch, group indexes)`` per scored batch, in order."""


class SamplingOptions(BaseModel):
    """Dynamic sampling and task retirement (module docstring); both off by default.

    Attributes:
        dynamic: drop the groups without reward spread and play fresh tasks in their place.
        max_extra_draws: the most rounds of fresh groups a step plays beyond its first.
        retire_after: retire a task whose last this-many groups were all-pass (or all of them
            all-fail): no reward spread, every episode solved (failed); ``None``: never.
        retire_keep: the share of TRL's draws of a retired task that still play it (0: none).
    """

    model_config = ConfigDict(extra="forbid")

    dynamic: bool = False
    max_extra_draws: int = Field(default=2, ge=0)
    retire_after: int | None = Field(default=None, ge=1)
    retire_keep: float = Field(default=0.0, ge=0, lt=1)

    @property
    def enabled(self) -> bool:
        """Whether either is on (then the `HookedGRPOTrainer` holds a `GroupSampler`)."""
        return self.dynamic or self.retire_after is not None


def check_sampling(
    options: SamplingOptions,
    trl: Mapping[str, Any] | Any,
    reward_funcs: Sequence[Callable[..., Any]] = (),
) -> None:
    """Refuse what dynamic sampling or retirement cannot do, before anything loads.

    Args:
        options: the options.
        trl: TRL's options, as a mapping (a train config's ``trl:``) or a `GRPOConfig`.
        reward_funcs: the reward functions (an async one's scores cannot be read).

    Raises:
        ConfigError: ``multi_objective_aggregation="normalize_then_sum"`` with dynamic
            sampling, training in several processes, or an async reward function.
    """
    if not options.enabled:
        return

    def option(name: str) -> Any:
        return trl.get(name) if isinstance(trl, Mapping) else getattr(trl, name, None)

    if options.dynamic and option("multi_objective_aggregation") == "normalize_then_sum":
        raise ConfigError(
            "dynamic sampling drops the groups whose rewards have no spread, which GRPO gives no "
            "advantage; with multi_objective_aggregation='normalize_then_sum' TRL normalises "
            "over the whole batch and gives them one. Use the default 'sum_then_normalize', or "
            "train without dynamic sampling."
        )
    processes = int(option("world_size") or 1)
    if processes > 1:
        raise ConfigError(
            f"dynamic sampling and task retirement work in one training process, but this run "
            f"has {processes}: each holds only its share of a group. Train in one process, or "
            "without them."
        )
    for fn in reward_funcs:
        if inspect.iscoroutinefunction(fn):
            name = getattr(fn, "__name__", type(fn).__name__)
            raise ConfigError(
                f"dynamic sampling and task retirement read each row's reward from the reward "
                f"functions, but {name!r} is async, and TRL awaits it out of their sight. Make "
                "it a plain function, or train without them."
            )


class GroupSampler:
    """Plays a step's groups as dynamic sampling and retirement say (module docstring).

    Args:
        options: the options.
        draws: the run's fresh and retired tasks.
        recorder: wraps TRL's reward functions and keeps each scoring's scores (and the
            episodes' trajectories, for their verdicts).
        names: the reward functions' names, in order.
        weights: their weights (``reward_weights``).
        group_size: ``num_generations``.

    Attributes:
        record: the run's totals and retired tasks.
        last: the latest generation's counts.
        on_step: each is called with the step and its `StepSampling` after every generation.
    """

    def __init__(
        self,
        options: SamplingOptions,
        draws: TaskDraws,
        recorder: WatchRecorder,
        names: Sequence[str],
        weights: Sequence[float],
        group_size: int,
    ) -> None:
        self.options = options
        self.draws = draws
        self.recorder = recorder
        self.names = list(names)
        self.weights = [float(w) for w in weights]
        self.group_size = group_size
        self.record = SamplingRecord()
        self.on_step: list[Callable[[int, StepSampling], None]] = []
        self.last: StepSampling | None = None
        self._pending: list[StepSampling] = []

    def generate(self, inputs: Rows, score: Score, merge: Merge, step: int) -> Any:
        """Play and score one generation of optimizer step ``step`` (1-based); the batch TRL
        trains on, of as many groups as ``inputs`` holds."""
        size = self.group_size
        groups = [list(inputs[i : i + size]) for i in range(0, len(inputs), size)]
        target = len(groups)
        self.draws.begin_step()
        counts = StepSampling(dynamic=self.options.dynamic, draws=0)
        chosen = self.draws.admit([str(g[0]["task_id"]) for g in groups], step)
        for index, row in enumerate(chosen):
            if row is not None:
                groups[index] = self._group(row)
                counts.replaced += 1
        kept: list[tuple[int, int]] = []  # (draw, group) of the groups with spread
        flat: list[tuple[int, int]] = []
        batches: list[Any] = []
        draw = groups
        while True:
            batch = score([row for group in draw for row in group])
            batches.append(batch)
            counts.draws += 1
            counts.drawn += len(draw)
            for index, spread in enumerate(self._observe(draw, step, counts)):
                (kept if spread else flat).append((len(batches) - 1, index))
            if not self.options.dynamic or len(kept) >= target:
                break
            if counts.draws > self.options.max_extra_draws:
                counts.bound_hit = True
                break
            fresh = self.draws.fresh(target - len(kept))
            if not fresh:
                counts.bound_hit = True
                break
            draw = [self._group(row) for row in fresh]
        fill = flat[: max(0, target - len(kept))] if self.options.dynamic else flat
        counts.kept, counts.filled = len(kept), len(fill)
        counts.dropped = counts.drawn - counts.kept - counts.filled
        self._report(step, counts)
        picked = sorted(kept + fill)
        if len(batches) == 1 and len(picked) == target:
            return batches[0]  # every group of TRL's draw, in its order: nothing to join
        parts = [
            (batch, [g for d, g in picked if d == number]) for number, batch in enumerate(batches)
        ]
        return merge([(batch, indexes) for batch, indexes in parts if indexes])

    def take_pending(self) -> list[StepSampling]:
        """The generations counted since the last call (the watch reads them each step)."""
        taken, self._pending = self._pending, []
        return taken

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps (`load`)."""
        return {"draws": self.draws.state(), "record": self.record.model_dump(mode="json")}

    def load(self, state: Mapping[str, Any]) -> None:
        """Go on from a checkpoint's `state`."""
        self.draws.load(dict(state.get("draws", {})))
        self.record = SamplingRecord.model_validate(state.get("record", {}))

    # ---------------------------------------------------------------- internals

    def _group(self, row: Any) -> Rows:
        return [self.draws.source.to_row(row) for _ in range(self.group_size)]

    def _observe(self, draw: list[Rows], step: int, counts: StepSampling) -> list[bool]:
        """Each group's spread, from the rewards TRL just computed; retirement counts them."""
        batches = self.recorder.take()
        if len(batches) != 1:
            raise NotAvailableError(
                f"dynamic sampling reads the rewards of each scoring from TRL's one call of the "
                f"reward functions, but saw {len(batches)} calls; this TRL scores otherwise than "
                "TRL 1.16. Train without dynamic sampling and task retirement, or with TRL 1.16."
            )
        scores, trajectories = batches[0].scores, batches[0].trajectories
        rewards, _ = weighted_rewards(scores, self.names, self.weights)
        size = self.group_size
        spreads = []
        for index, group in enumerate(draw):
            rows = slice(index * size, (index + 1) * size)
            verdicts = [t.success for t in trajectories[rows]] if trajectories else None
            group_rewards = rewards[rows]
            spreads.append(has_spread(group_rewards))
            retired = self.draws.observe(
                str(group[0]["task_id"]), settled_group(group_rewards, verdicts), step
            )
            if retired is not None:
                counts.retired.append(retired.task_id)
                self.record.retired.append(retired)
                logger.warning(
                    "step %d: task %s retired: its last %d groups were %s; it is %s",
                    step, retired.task_id, retired.groups, retired.settled.phrase,
                    "no longer played" if not self.options.retire_keep
                    else f"played in {self.options.retire_keep:.0%} of its draws from now on",
                )  # fmt: skip
        return spreads

    def _report(self, step: int, counts: StepSampling) -> None:
        self.record.add(step, counts)
        self.last = counts
        self._pending = [*self._pending[-_KEPT:], counts]  # a run without the watch reads none
        if counts.bound_hit:
            logger.warning(
                "step %d: %s Raise --max-extra-draws, or make the tasks' rewards vary within a "
                "group (partial credit, easier or harder tasks).",
                step, counts.note(),
            )  # fmt: skip
        for hook in self.on_step:
            hook(step, counts)
