"""The names of a GRPO run's episodes: ``s<step>-<task>-<sample>``, once in the run.

A rollout run plays each of its tasks once, so ``<task index>-<sample>`` names an episode
(`rk_agent.rollouts.episode.EpisodeSlot`). A training run plays its tasks again at every step,
so both loops (`rk_agent.trainers.rollout`, `rk_agent.trainers.trl_env`) name an episode by the
step its rollouts feed too:

- **step**: the optimizer step (1-based, as TRL logs steps, ``watch.jsonl`` and the alarms name
  them: ``metadata["train_step"]`` plus one);
- **task** (the trajectory's ``task_index``): the task's place among the run's training tasks
  (row ``i`` of the table is task ``i``, as `rk_agent.trainers.tasks.task_rows` drew it, so a
  dataset's task keeps its row's index; a task drawn later, by dynamic sampling, is numbered on
  from the table's end);
- **sample**: which sample of that task in the step (its GRPO group's ``0 .. G-1``). A task
  played by several generation batches of one step counts on from the first; in a run of several
  processes, process ``p`` of ``P`` numbers its samples ``p``, ``p + P``, ... (each holds a share
  of the batch), so no two processes name one episode alike.

So ``rk-agent show RUN --episode s3-0-1`` is the second sample of task 0 at step 3, and no id
repeats in ``trajectories.jsonl`` (a resumed run drops the steps it plays again:
`rk_agent.trainers.resumed`).

Main names: `EpisodeNames`, `EpisodeName`.

Example:
    >>> names = EpisodeNames(["a", "b"])
    >>> [n.id for n in names.name(1, ["b", "b", "c", "c"])]
    ['s1-1-0', 's1-1-1', 's1-2-0', 's1-2-1']
    >>> [n.id for n in names.name(1, ["b"])], [n.id for n in names.name(2, ["b"])]
    (['s1-1-2'], ['s2-1-0'])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["EpisodeName", "EpisodeNames"]


@dataclass(frozen=True)
class EpisodeName:
    """One episode's name: its ``id``, ``task_index`` and ``sample`` (module docstring)."""

    id: str
    task_index: int
    sample: int


class EpisodeNames:
    """Names the episodes of one training process (module docstring).

    Args:
        task_ids: the run's training tasks, in table order.
        process_index: this process among the training processes (TRL's ``process_index``).
        processes: how many there are (TRL's ``world_size``).
    """

    def __init__(
        self, task_ids: Iterable[str] = (), *, process_index: int = 0, processes: int = 1
    ) -> None:
        self._numbers: dict[str, int] = {}
        for task_id in task_ids:
            self._numbers.setdefault(task_id, len(self._numbers))
        self.process_index = process_index
        self.processes = max(1, processes)
        self._step: int | None = None
        self._counts: dict[str, int] = {}

    def task_number(self, task_id: str) -> int:
        """The task's number: its row in the table, or the next free one for a new task."""
        return self._numbers.setdefault(task_id, len(self._numbers))

    def name(self, step: int, task_ids: Sequence[str]) -> list[EpisodeName]:
        """The names of one generation batch's rows (each row's task id given), played for
        optimizer step ``step`` (1-based)."""
        if step != self._step:
            self._step, self._counts = step, {}
        names = []
        for task_id in task_ids:
            count = self._counts.get(task_id, 0)
            self._counts[task_id] = count + 1
            number = self.task_number(task_id)
            sample = count * self.processes + self.process_index
            names.append(EpisodeName(f"s{step}-{number}-{sample}", number, sample))
        return names
