"""Trainer callbacks of ``rk-agent train``: the run record and resident memory in every log.

`RunRecordCallback` keeps the run's record, ``<output_dir>/run.json``
(`rk_agent.runs.run_record`), up to date after every optimizer step and checkpoint, with
its memory figures (`rk_agent.trainers.memory`) and, with dynamic sampling or task retirement,
their totals and retired tasks, and adds ``memory/rss_gb`` (resident
memory now) and ``memory/peak_rss_gb`` (the process's peak so far) to every log line, so TRL's
log, the console and wandb show whether memory stays flat from step to step. It must run
before the reporting callbacks (`attach`), since it adds its figures to the logs they send.

`StepLines` says when each optimizer step starts, for output that is not a terminal (a pipe,
a log file), where a progress bar shows nothing while a step's rollouts run for minutes.

Main names: `RunRecordCallback`, `StepLines`, `attach`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from rk_agent.runs.alarms import Alarm
from rk_agent.runs.group_sampling import SamplingRecord
from rk_agent.runs.run_record import RunRecord, RunStatus, write_run_record
from rk_agent.trainers.memory import memory_figures, peak_resident_bytes, resident_bytes

__all__ = ["RunRecordCallback", "StepLines", "attach"]

_GB = 1024**3


class RunRecordCallback(TrainerCallback):
    """Writes the run record as training goes and logs resident memory (module docstring).

    Args:
        output_dir: the run's folder.
        record: the record written when the run started.

    Attributes:
        record: the latest record written.
        step_rss: resident memory in bytes after each optimizer step, by step.
    """

    def __init__(self, output_dir: str | Path, record: RunRecord) -> None:
        self.output_dir = Path(output_dir)
        self.record = record
        self.step_rss: dict[int, int] = {}

    def finish(self, status: RunStatus, global_step: int, error: str | None = None) -> None:
        """Write the run's last word: finished, interrupted or failed."""
        self._write(status=status, global_step=global_step, error=error)

    def add_alarm(self, alarm: Alarm) -> None:
        """Keep an alarm the run raised in the record (`rk_agent.trainers.watch`)."""
        self._write(alarms=[*self.record.alarms, alarm])

    def set_sampling(self, record: SamplingRecord) -> None:
        """Keep the run's dynamic sampling and retirement totals (written with the step's
        record, `rk_agent.trainers.group_sampling`)."""
        self.record = self.record.model_copy(update={"sampling": record.model_copy(deep=True)})

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._write(global_step=int(state.global_step))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        rss = resident_bytes()
        if rss is not None:
            self.step_rss[int(state.global_step)] = rss
        self._write(global_step=int(state.global_step))

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._write(
            global_step=int(state.global_step), last_checkpoint=f"checkpoint-{state.global_step}"
        )

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if logs is None:
            return
        figures = {"memory/peak_rss_gb": round(peak_resident_bytes() / _GB, 3)}
        rss = resident_bytes()
        if rss is not None:
            figures["memory/rss_gb"] = round(rss / _GB, 3)
        logs.update(figures)
        # The Trainer copied `logs` into its history just before calling us: keep them equal.
        history = state.log_history
        if history and history[-1].get("step") == state.global_step:
            history[-1].update(figures)

    def _write(self, **changes: Any) -> None:
        self.record = self.record.refreshed(**memory_figures(), **changes)
        write_run_record(self.output_dir, self.record)


class StepLines(TrainerCallback):
    """One plain line as each optimizer step starts: ``step 3/20: rollouts and update``."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        total = f"/{state.max_steps}" if state.max_steps and state.max_steps > 0 else ""
        self.say(f"step {state.global_step + 1}{total}: started")


def attach(trainer: Any, callback: TrainerCallback) -> None:
    """Put ``callback`` first among ``trainer``'s callbacks, ahead of the loggers (wandb, ...)."""
    trainer.callback_handler.callbacks.insert(0, callback)
