"""Training-run folders written by ``rk-agent train``'s own writers, step by step, without a model.

`TrainingRun` does for each optimizer step what a GRPO step of the rk loop does around the
model: it numbers the step's episodes by row, as `EpisodeRollout` did before ids said their step
(``0-0`` at every step: the viewer keys those by ``<id>@<step>``), tags them with the step
(``metadata.train_step``) and appends them to ``trajectories.jsonl``; the environment's reward
functions (`episode_reward_funcs`, wrapped by the `WatchRecorder`) score them; at the step's
end the `WatchCallback` writes its ``watch.jsonl`` line and raises alarms, which the
`RunRecordCallback` keeps in ``run.json`` as it rewrites the record. The episodes
themselves are real ones, played by the engine (a ``rk-agent rollout`` run's); which ones a
step gets decides its rewards' spread.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rk_agent.runs.alarms import AlarmOptions
from rk_agent.runs.run_dir import TRAJECTORIES_FILE, append_trajectories
from rk_agent.runs.trajectory import Trajectory
from rk_agent.types import RunStatus


class TrainingRun:
    """A training run's folder, written one step at a time (module docstring).

    Args:
        folder: the run's output folder.
        group_size: the episodes per task in a step (``num_generations``).
        options: the alarms' thresholds.
    """

    def __init__(
        self, folder: Path, group_size: int = 2, options: AlarmOptions | None = None
    ) -> None:
        from transformers import TrainerControl, TrainerState

        from rk_agent.envs.registry import make_env
        from rk_agent.runs.run_record import RunKind, RunRecord, write_run_record
        from rk_agent.trainers.callbacks import RunRecordCallback
        from rk_agent.trainers.rewards import episode_reward_funcs
        from rk_agent.trainers.watch import WatchCallback, WatchRecorder

        self.folder = folder
        funcs, weights = episode_reward_funcs(make_env("tools"))
        self.recorder = WatchRecorder()
        self.funcs = self.recorder.wrap(funcs)
        record = RunRecord.start(RunKind.TRAINING, global_step=0)
        write_run_record(folder, record)
        self.record = RunRecordCallback(folder, record)
        names = [f.__name__ for f in self.funcs]
        self.watch = WatchCallback(
            self.recorder, names, weights, options, folder, on_alarm=self.record.add_alarm
        )
        self.state = TrainerState()
        self.control = TrainerControl()
        self.args = SimpleNamespace(num_generations=group_size, max_completion_length=None)

    def step(self, groups: Sequence[Sequence[Trajectory]]) -> int:
        """One optimizer step on ``groups`` (each the episodes of one task); its number."""
        rows: list[Trajectory] = []
        samples: Counter[str] = Counter()
        for episode in (e for group in groups for e in group):
            index, sample = len(rows), samples[episode.task.id]
            samples[episode.task.id] += 1
            metadata: dict[str, Any] = {**episode.metadata, "train_step": self.state.global_step}
            update = {"id": f"{index}-{sample}", "task_index": index, "sample": sample}
            rows.append(episode.model_copy(update={**update, "metadata": metadata}))
        append_trajectories(self.folder / TRAJECTORIES_FILE, rows)
        completions = [[{"role": "assistant", "content": ""}] for _ in rows]
        for fn in self.funcs:
            fn(prompts=[[]] * len(rows), completions=completions, trajectory=rows)
        self.state.global_step += 1
        self.watch.on_step_end(self.args, self.state, self.control)
        self.record.on_step_end(self.args, self.state, self.control)
        return int(self.state.global_step)

    def finish(self, status: RunStatus = RunStatus.FINISHED) -> None:
        """The run's last word, as ``rk-agent train`` writes it."""
        self.record.finish(status, int(self.state.global_step))
