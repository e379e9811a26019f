"""Which tasks a GRPO run plays beyond TRL's own draw: fresh tasks, and tasks retired.

TRL's sampler draws each step's tasks from the training table (`rk_agent.trainers.tasks`).
Dynamic sampling and task retirement (`rk_agent.trainers.group_sampling`) need more: fresh
tasks to play in place of the groups they drop or skip, and a memory of which tasks have
nothing left to teach. `TaskDraws` keeps both, for one run:

- **Fresh tasks** (`TaskDraws.fresh`). An environment that generates its tasks gives new
  ones: the seeds after the training table's, each used once in the run, a task the table
  already holds or that was drawn before skipped. A task dataset has no tasks beyond its
  rows (rows past ``n_tasks`` may be someone's held-out set), so fresh tasks are the table's
  rows not yet drawn in the current **pass** over it: every task the run plays, whoever drew
  it, counts as drawn, and a pass ends (all rows become drawable again) when none is left.
  TRL's own draw of a row already drawn in the pass is played by another row instead
  (`TaskDraws.admit`), so no row is played twice in a pass while others wait.
- **Retirement** (``retire_after``, `TaskDraws.observe`). A task of the table whose last
  ``retire_after`` groups had no reward spread and were settled the same way
  (`rk_agent.runs.group_sampling.settled_group`: all-pass, all-fail, or without verdicts) is
  retired:
  when TRL's sampler draws it again, it is played only in a ``retire_keep`` share of those
  draws (decided per step and task from the run's seed, so the same run decides the same)
  and a fresh task is played instead.

Everything is decided from the run's seed and the state kept here; `TaskDraws.state` and
`TaskDraws.load` carry it through a checkpoint, so a resumed run draws what the uninterrupted
one would have.

Main names: `TaskSource` (`task_source`), `TaskDraws`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rk_agent.envs.base import ChatEnv
from rk_agent.runs.group_sampling import RetiredTask, Settled
from rk_agent.trainers.tasks import MAX_DRAWS_PER_TASK, TaskRow, task_of_seed

__all__ = ["TaskDraws", "TaskSource", "task_source"]


@dataclass
class TaskSource:
    """A loop's training tasks, and how a fresh task becomes one of its dataset rows.

    Attributes:
        rows: the training table (TRL's dataset, row for row).
        to_row: a task as a row of the loop's dataset (the dict TRL's dataloader gives).
        generate: for an environment that generates its tasks, the task of a seed; ``None``
            for a task dataset.
        on_fresh: told of every fresh task before it is played (the rk loop's rollout learns
            it, to find the task behind its prompt).
    """

    rows: Sequence[TaskRow]
    to_row: Callable[[TaskRow], dict[str, Any]]
    generate: Callable[[int], TaskRow] | None = None
    on_fresh: Callable[[TaskRow], None] | None = None


def task_source(
    env: ChatEnv,
    rows: Sequence[TaskRow],
    to_row: Callable[[TaskRow], dict[str, Any]],
    make_env: Callable[[], ChatEnv],
    on_fresh: Callable[[TaskRow], None] | None = None,
) -> TaskSource:
    """The `TaskSource` of a loop training on ``rows`` of ``env``: fresh tasks generated (by an
    environment of its own, made by ``make_env`` when the first is asked for) when ``env``
    generates its tasks, the table's rows when it has a dataset."""
    if env.dataset is not None:
        return TaskSource(rows, to_row, on_fresh=on_fresh)
    made: list[ChatEnv] = []

    def generate(seed: int) -> TaskRow:
        if not made:
            made.append(make_env())
        return task_of_seed(made[0], seed)

    return TaskSource(rows, to_row, generate=generate, on_fresh=on_fresh)


class TaskDraws:
    """The run's fresh tasks and retired ones (module docstring).

    Args:
        source: the loop's tasks.
        seed: the run's seed (the order of a pass, whether a retired task still plays).
        retire_after: retire a task after this many settled groups in a row; ``None``: never.
        retire_keep: the share of TRL's draws of a retired task that still play it.

    Example:
        >>> from rk_agent.envs.guess_env import GuessEnv
        >>> from rk_agent.trainers.tasks import task_columns, task_of_seed, task_rows
        >>> env = GuessEnv(high=50)
        >>> rows = task_rows(env, 2, seed=0)
        >>> source = TaskSource(rows, task_columns, generate=lambda s: task_of_seed(env, s))
        >>> draws = TaskDraws(source)
        >>> draws.begin_step()
        >>> [row.seed for row in draws.fresh(2)]  # the seeds after the table's
        [2, 3]
    """

    def __init__(
        self,
        source: TaskSource,
        *,
        seed: int = 0,
        retire_after: int | None = None,
        retire_keep: float = 0.0,
    ) -> None:
        self.source = source
        self.seed = seed
        self.retire_after = retire_after
        self.retire_keep = retire_keep
        self._table = {row.task.id: row for row in source.rows}
        self._order = [row.task.id for row in source.rows]
        self.next_seed = max((row.seed for row in source.rows), default=-1) + 1
        self.fresh_ids: set[str] = set()
        self.pass_index = 0
        self.pass_drawn: set[str] = set()
        self.streaks: dict[str, tuple[Settled, int]] = {}
        self.retired: dict[str, RetiredTask] = {}
        self._this_step: set[str] = set()

    @property
    def generated(self) -> bool:
        """Whether fresh tasks are generated (else they are the dataset's undrawn rows)."""
        return self.source.generate is not None

    def begin_step(self) -> None:
        """Start a generation: nothing is drawn in it yet."""
        self._this_step = set()

    def admit(self, task_ids: Sequence[str], step: int) -> list[TaskRow | None]:
        """Which of TRL's drawn tasks (one per group) to play: ``None`` plays it, a row plays
        that fresh task in its place (a retired task, or a dataset row already drawn in this
        pass). With no fresh task to give, the drawn one plays."""
        out: list[TaskRow | None] = []
        for task_id in task_ids:
            if self._plays(task_id, step):
                self._mark(task_id)
                out.append(None)
                continue
            fresh = self.fresh(1, exclude=task_ids)
            if fresh:
                out.append(fresh[0])
            else:
                self._mark(task_id)
                out.append(None)
        return out

    def fresh(self, n: int, exclude: Iterable[str] = ()) -> list[TaskRow]:
        """Up to ``n`` fresh tasks, each told to ``source.on_fresh`` and counted as drawn;
        fewer when there are no more (a dataset whose every row is retired or in this step;
        a generator that repeats itself)."""
        generate = self.source.generate
        rows = self._generate(generate, n) if generate else self._undrawn(n, set(exclude))
        for row in rows:
            self._mark(row.task.id)
            if self.source.on_fresh is not None:
                self.source.on_fresh(row)
        return rows

    def observe(self, task_id: str, settled: Settled | None, step: int) -> RetiredTask | None:
        """Count one group of ``task_id`` (``settled``: how it showed nothing is left to learn,
        ``None``: it had something); return the retirement it causes, if any. Only the
        training table's tasks retire (a generated fresh task is never drawn again)."""
        if self.retire_after is None or task_id in self.retired or task_id not in self._table:
            return None
        if settled is None:
            self.streaks.pop(task_id, None)
            return None
        kind, count = self.streaks.get(task_id, (settled, 0))
        count = count + 1 if kind is settled else 1
        if count < self.retire_after:
            self.streaks[task_id] = (settled, count)
            return None
        self.streaks.pop(task_id, None)
        retired = RetiredTask(task_id=task_id, step=step, settled=settled, groups=count)
        self.retired[task_id] = retired
        return retired

    def state(self) -> dict[str, Any]:
        """What `load` needs to go on as this run would (JSON-ready)."""
        return {
            "next_seed": self.next_seed,
            "fresh_ids": sorted(self.fresh_ids),
            "pass_index": self.pass_index,
            "pass_drawn": sorted(self.pass_drawn),
            "streaks": {k: [kind.value, count] for k, (kind, count) in self.streaks.items()},
            "retired": [r.model_dump(mode="json") for r in self.retired.values()],
        }

    def load(self, state: dict[str, Any]) -> None:
        """Go on from `state` (a checkpoint's). The fresh tasks drawn before it are not told to
        ``on_fresh`` again: none of them is drawn again."""
        self.next_seed = int(state.get("next_seed", self.next_seed))
        self.fresh_ids = set(state.get("fresh_ids", []))
        self.pass_index = int(state.get("pass_index", 0))
        self.pass_drawn = set(state.get("pass_drawn", []))
        self.streaks = {
            k: (Settled(kind), int(count)) for k, (kind, count) in state.get("streaks", {}).items()
        }
        retired = [RetiredTask.model_validate(r) for r in state.get("retired", [])]
        self.retired = {r.task_id: r for r in retired}

    # ---------------------------------------------------------------- internals

    def _plays(self, task_id: str, step: int) -> bool:
        if task_id in self.retired and _chance(self.seed, step, task_id) >= self.retire_keep:
            return False
        return self.generated or task_id not in self.pass_drawn

    def _mark(self, task_id: str) -> None:
        self._this_step.add(task_id)
        if not self.generated:
            self.pass_drawn.add(task_id)

    def _generate(self, generate: Callable[[int], TaskRow], n: int) -> list[TaskRow]:
        rows: list[TaskRow] = []
        for _ in range(n * MAX_DRAWS_PER_TASK):
            if len(rows) == n:
                break
            row = generate(self.next_seed)
            self.next_seed += 1
            task_id = row.task.id
            if task_id in self._table or task_id in self.fresh_ids or task_id in self._this_step:
                continue
            self.fresh_ids.add(task_id)
            rows.append(row)
        return rows

    def _undrawn(self, n: int, exclude: set[str]) -> list[TaskRow]:
        rows = self._candidates(exclude)[:n]
        if len(rows) < n and self.pass_drawn - self._this_step:
            # The pass is over: every row may be drawn again, but not twice in this step.
            self.pass_index += 1
            self.pass_drawn = set(self._this_step)
            taken = {r.task.id for r in rows}
            rows += self._candidates(exclude | taken)[: n - len(rows)]
        return rows

    def _candidates(self, exclude: set[str]) -> list[TaskRow]:
        order = list(self._order)
        random.Random(f"{self.seed}:{self.pass_index}").shuffle(order)
        skip = exclude | self.pass_drawn | self._this_step | set(self.retired)
        return [self._table[task_id] for task_id in order if task_id not in skip]


def _chance(seed: int, step: int, task_id: str) -> float:
    """A number in [0, 1) fixed by the run's seed, the step and the task."""
    digest = hashlib.sha256(f"{seed}:{step}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64
