"""TRL's `GRPOTrainer` with rk-agent's hooks: each batch announced before it is scored, and
dynamic sampling and task retirement, for both of rk-agent's loops.

Every GRPO trainer rk-agent builds (`rk_agent.trainers.grpo_builder`) is a `HookedGRPOTrainer`.

**Each batch announced.** TRL scores a generation batch in one call, ``_calculate_rewards(inputs,
prompts, completions, completion_ids_list)``, which calls the reward functions in some order.
`HookedGRPOTrainer` overrides it to hand the batch (`rk_agent.trainers.scored_batch.ScoredBatch`,
with its episodes' trajectories) to each of its ``rk_batch_hooks`` first, then scores it as TRL
does. TRL's tool loop (``--loop trl``) writes ``trajectories.jsonl`` from such a hook, and the
watch (`rk_agent.trainers.watch`) and dynamic sampling open each batch there: none of them
depends on which reward function TRL calls first.

**Dynamic sampling and task retirement.** Neither loop has a place of its own where a step's
groups can be dropped and replaced: TRL's tool loop has no ``rollout_func``, and in rk-agent's
loop (``--loop rk``) the ``rollout_func`` sees only prompts, while TRL keeps the dataset rows it
drew (their prompts go to its completions table, their columns to the reward functions). So both
loops wrap the one method of TRL that turns a generation batch's rows into what is trained on,
``_generate_and_score_completions(inputs)``: with a sampler it goes to its
`rk_agent.trainers.group_sampling.GroupSampler`, which calls it once per draw (TRL plays,
scores and normalises each draw exactly as it always does) and joins the groups it keeps
(`rk_agent.trainers.trl_batches.select_groups`). In evaluation, or with no sampler, it is
TRL's method untouched.

Each generation's counts go into TRL's metrics (``sampling/...``, averaged per logging step
like TRL's own, and so to the console and wandb). The sampler's state (fresh-task cursor, pass
over a task dataset, retirement streaks and the retired, the run's totals) is saved as
``rk_agent_sampling.json`` in every checkpoint and read back when training resumes from one,
the way TRL 1.16 keeps its own extra state (``_save_checkpoint``,
``_load_optimizer_and_scheduler``). ``tests/test_dependency_contracts.py`` and
``tests/trainers/test_trl_batches.py`` hold TRL to the methods and signatures relied on here.

Main names: `HookedGRPOTrainer`, `SAMPLING_STATE_FILE`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from trl import GRPOTrainer

from rk_agent.atomic_file import write_atomic
from rk_agent.runs.trajectory import Trajectory
from rk_agent.trainers.group_sampling import GroupSampler
from rk_agent.trainers.scored_batch import BatchHook, ScoredBatch, TrajectoriesOf
from rk_agent.trainers.trl_batches import select_groups

__all__ = ["SAMPLING_STATE_FILE", "HookedGRPOTrainer"]

logger = logging.getLogger(__name__)

SAMPLING_STATE_FILE = "rk_agent_sampling.json"
"""The sampler's state in each ``checkpoint-<step>`` folder."""


class HookedGRPOTrainer(GRPOTrainer):
    """A `GRPOTrainer` that announces each batch before scoring it, and whose generations go
    through a `GroupSampler` when it has one (module docstring).

    Args:
        rk_sampler: the sampler; ``None`` generates as TRL does.
        rk_batch_hooks: called with each generation batch (`ScoredBatch`) before TRL calls
            the reward functions, in order.
        rk_trajectories: how the batch's trajectories are read when its rows carry none (TRL's
            tool loop: from TRL's environments); ``None``: from the rows' ``trajectory``
            column, when they have one.
        **kwargs: `GRPOTrainer`'s arguments.

    Attributes:
        rk_sampler: the sampler.
        rk_batch_hooks: the batch hooks.
    """

    def __init__(
        self,
        *,
        rk_sampler: GroupSampler | None = None,
        rk_batch_hooks: Iterable[BatchHook] = (),
        rk_trajectories: TrajectoriesOf | None = None,
        **kwargs: Any,
    ) -> None:
        self.rk_sampler = rk_sampler
        self.rk_batch_hooks = list(rk_batch_hooks)
        self._rk_trajectories = rk_trajectories
        super().__init__(**kwargs)

    def _calculate_rewards(
        self, inputs: list[dict[str, Any]], prompts: Any, completions: Any, completion_ids_list: Any
    ) -> Any:
        if self.rk_batch_hooks:
            batch = self._scored_batch(inputs, completions, completion_ids_list)
            for hook in self.rk_batch_hooks:
                hook(batch)
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    def _scored_batch(
        self, inputs: list[dict[str, Any]], completions: Any, completion_ids: Any
    ) -> ScoredBatch:
        step = int(self.state.global_step)
        trajectories: list[Trajectory] | None = None
        if inputs and isinstance(inputs[0].get("trajectory"), Trajectory):
            trajectories = [row["trajectory"] for row in inputs]  # rk-agent's loop
        elif self._rk_trajectories is not None:
            has_ids = bool(inputs) and all("task_id" in row for row in inputs)
            task_ids = [row["task_id"] for row in inputs] if has_ids else None
            trajectories = self._rk_trajectories(
                getattr(self, "environments", None), list(completions), task_ids, step
            )
        return ScoredBatch(
            rows=inputs, completions=list(completions), completion_ids=list(completion_ids),
            trajectories=trajectories, step=step,
        )  # fmt: skip

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        sampler = self.rk_sampler
        if sampler is None or not getattr(self.model, "training", False):
            out: dict[str, Any] = super()._generate_and_score_completions(inputs)
            if sampler is not None:
                sampler.recorder.take()  # an evaluation's scores are not a training draw's
            return out
        step = int(self.state.global_step) + 1
        batch: dict[str, Any] = sampler.generate(
            inputs, super()._generate_and_score_completions, self._join, step
        )
        counts = sampler.last
        if counts is not None:
            for key, value in counts.flat().items():
                self._metrics["train"][key].append(value)
        return batch

    def _join(self, parts: Sequence[tuple[dict[str, Any], Sequence[int]]]) -> dict[str, Any]:
        size = self.rk_sampler.group_size if self.rk_sampler is not None else 1
        return select_groups(parts, size, int(self._tokenizer.pad_token_id))

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        if self.rk_sampler is not None and self.args.should_save:
            run = Path(self._get_output_dir(trial=trial))
            folder = run / f"checkpoint-{self.state.global_step}"
            write_atomic(folder / SAMPLING_STATE_FILE, json.dumps(self.rk_sampler.state()))

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if self.rk_sampler is None or checkpoint is None:
            return
        path = Path(checkpoint) / SAMPLING_STATE_FILE
        if path.is_file():
            self.rk_sampler.load(json.loads(path.read_text(encoding="utf-8")))
        else:
            logger.warning(
                "%s holds no %s (it was saved without dynamic sampling and task retirement): "
                "they start afresh from here, fresh tasks from the first after the table's and "
                "no task retired.",
                checkpoint, SAMPLING_STATE_FILE,
            )  # fmt: skip
