"""One training run from a `TrainConfig`: what ``rk-agent train grpo|sft`` does.

`run_training` resolves the run (output folder, checkpoint to resume from, wandb plan, TRL's
config with device defaults), saves the resolved config next to the checkpoints, builds the
trainer (`grpo_trainer` or `build_sft_trainer`), trains, and saves the final model with its
tokenizer in ``<output_dir>/final``, a folder ``rk-agent rollout --model`` takes as is.
Checkpoints are TRL's own (``checkpoint-<step>``, every ``save_steps``); a run started again
with the same ``output_dir`` resumes from the last one (``resume: auto``). Ctrl-C stops
training and keeps every checkpoint already written. The run keeps a record of itself
(``run.json``, `rk_agent.runs.run_record`: status, step, resident memory), so a run the OS
killed is reported as such when the next one starts in its folder
(`rk_agent.trainers.previous_run`); every log line carries
``memory/rss_gb`` and ``memory/peak_rss_gb``, and the run ends by printing its peak. Memory the
steps free goes back to the OS (`rk_agent.trainers.allocator`), so it stays flat from step to
step. A GRPO run is watched (`rk_agent.trainers.watch`): ``watch.jsonl`` in the run folder, and
the alarms it raises kept in the run record (those of the steps a resumed run keeps, too); a
run started again in its folder first drops the episodes and watch lines of the steps it plays
again (`rk_agent.trainers.resumed`), so no step is written twice; with
``watch.stop_on_alarm`` the first alarm ends
the run after its step, with no final model: its checkpoints so far are what it leaves. With
dynamic sampling or task retirement (``sampling``, `rk_agent.trainers.group_sampling`) the run
record keeps their totals and the tasks retired, and the run ends by saying them.

Main names: `run_training`, `TrainOutcome`.
"""

from __future__ import annotations

import platform
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rk_agent.errors import RkAgentError, require_extra
from rk_agent.policies.local_model import DEFAULT_MODEL
from rk_agent.runs.alarms import Alarm
from rk_agent.runs.group_sampling import SamplingRecord
from rk_agent.runs.provenance import package_versions
from rk_agent.runs.run_record import (
    RunKind,
    RunRecord,
    RunStatus,
    read_run_record,
    write_run_record,
)
from rk_agent.trainers.allocator import return_freed_memory
from rk_agent.trainers.config import (
    TrainConfig,
    last_checkpoint,
    resume_checkpoint,
    save_train_config,
)
from rk_agent.trainers.memory import machine_memory_bytes, memory_figures, peak_resident_bytes
from rk_agent.trainers.preflight import check_train_inputs
from rk_agent.trainers.previous_run import previous_run_note
from rk_agent.trainers.resumed import checkpoint_step, keep_history, kept_alarms
from rk_agent.trainers.trl_args import build_trl_args, trl_config_class
from rk_agent.trainers.trl_patches import quiet_checkpointing_renames
from rk_agent.trainers.wandb_setup import apply_wandb, finish_wandb, plan_wandb, restore_environ

__all__ = ["TrainOutcome", "run_training", "save_final"]

FINAL_DIR = "final"
CPU_SMOKE_STEPS = 4


@dataclass
class TrainOutcome:
    """What a training run left behind.

    Attributes:
        output_dir: the run's folder (checkpoints, config, logs).
        final_model: the trained model and tokenizer (``None`` when interrupted).
        global_step: optimizer steps done, resumed ones included.
        resumed_from: the checkpoint the run continued from, if any.
        interrupted: whether Ctrl-C stopped it.
        log_history: TRL's logged metrics, one dict per logging step.
        peak_rss_bytes: the process's peak resident memory (the whole process: a run in a
            process that did other work before reports that work's peak if it was higher).
        step_rss_bytes: resident memory after each optimizer step, by step.
        alarms: the alarms the run raised (`rk_agent.runs.alarms`).
        stopped_by: the alarm that ended the run (``watch.stop_on_alarm``), if any.
        last_checkpoint: the newest checkpoint in ``output_dir`` when the run ended.
        sampling: what dynamic sampling and task retirement did in all (the tasks retired
            among it), when either was on.
    """

    output_dir: Path
    final_model: Path | None
    global_step: int
    resumed_from: Path | None
    interrupted: bool
    log_history: list[dict[str, Any]]
    peak_rss_bytes: int = 0
    step_rss_bytes: dict[int, int] = field(default_factory=dict)
    alarms: list[Alarm] = field(default_factory=list)
    stopped_by: Alarm | None = None
    last_checkpoint: Path | None = None
    sampling: SamplingRecord | None = None


def run_training(
    config: TrainConfig, *, say: Callable[[str], None] = print, command: str = "rk-agent"
) -> TrainOutcome:
    """Train as ``config`` says; see the module docstring.

    Args:
        config: the resolved training config.
        say: where progress lines go (the CLI prints them).
        command: how the commands it suggests start, as the user runs rk-agent (the CLI
            passes ``uv run rk-agent`` when it was started so).

    Raises:
        ConfigError: an option is invalid (unknown TRL option, bad env, no checkpoint to
            resume with ``resume: true``).
        DataError: the SFT trajectories are unreadable or none passes the filter.
        NotAvailableError: TRL and torch are not installed (the ``train`` extra).
    """
    require_extra("train", f"training ({config.kind})")
    check_train_inputs(config)  # a missing file or unknown env fails before anything is written
    return_freed_memory()
    output_dir = Path(str(config.output_dir))
    resumed_from = resume_checkpoint(config)
    plan = plan_wandb(config.wandb, output_dir)
    values = dict(config.trl)
    values.setdefault("report_to", plan.report_to)
    if config.kind == "grpo" and plan.report_to:
        # The completions table (with the turn-by-turn `trajectory` column) goes to wandb and
        # <output_dir>/completions/, not to the terminal (one episode is hundreds of lines).
        values.setdefault("log_completions", True)
        values.setdefault("num_completions_to_print", 0)
    piped = not sys.stdout.isatty()
    if piped:  # a progress bar shows nothing in a pipe: plain log lines instead
        values.setdefault("disable_tqdm", True)
    args = build_trl_args(trl_config_class(config.kind), values, output_dir=output_dir)
    if _smoke_run(config, args):
        args.max_steps = CPU_SMOKE_STEPS
        say(
            f"CPU and no max_steps/num_train_epochs given: training {CPU_SMOKE_STEPS} steps "
            "(a smoke run); set --max_steps N for a real run."
        )
    fresh = not output_dir.exists()
    saved = save_train_config(config, output_dir)
    earlier = previous_run_note(output_dir)  # before this run's record replaces it
    step_kept = checkpoint_step(resumed_from)
    alarms_kept = kept_alarms(read_run_record(output_dir), step_kept)
    record = RunRecord.start(
        RunKind.TRAINING,
        global_step=0,
        seed=config.env.seed if config.kind == "grpo" else None,
        training_seed=getattr(args, "seed", None),
        python=platform.python_version(),
        packages=package_versions(),
        machine_memory_bytes=machine_memory_bytes(),
        alarms=alarms_kept,
        **memory_figures(),
    )
    write_run_record(output_dir, record)
    try:
        say(f"run folder: {output_dir} (config: {saved.name})")
        if earlier is not None:
            say(earlier)
        if resumed_from is not None:
            say(f"resuming from {resumed_from}")
        trainer = _grpo(config, args) if config.kind == "grpo" else _sft(config, args, say)
        if config.kind == "grpo":  # SFT writes no episodes
            _keep_history(output_dir, step_kept, say)
    except RkAgentError:
        if fresh:  # nothing trained: leave no empty run folder behind
            shutil.rmtree(output_dir, ignore_errors=True)
        raise
    except KeyboardInterrupt:  # Ctrl-C while the model loads: nothing was trained
        record = record.model_copy(update={"status": RunStatus.INTERRUPTED})
        write_run_record(output_dir, record)
        kept = last_checkpoint(output_dir)
        say(
            "interrupted before the first step: nothing was trained in this run"
            + (f"; the last checkpoint is still {kept}." if kept is not None else ".")
        )
        return TrainOutcome(
            output_dir=output_dir, final_model=None, global_step=0, resumed_from=resumed_from,
            interrupted=True, log_history=[], peak_rss_bytes=peak_resident_bytes(),
            step_rss_bytes={}, alarms=alarms_kept, stopped_by=None, last_checkpoint=kept,
        )  # fmt: skip
    from rk_agent.trainers.callbacks import RunRecordCallback, StepLines, attach

    recorder = RunRecordCallback(output_dir, record)
    attach(trainer, recorder)
    watcher = _watcher(trainer)
    if watcher is not None:
        watcher.on_alarm = recorder.add_alarm
        watcher.alarms.raised.extend(alarms_kept)  # raised once in a run, resumed or not
    sampler = getattr(trainer, "rk_sampler", None)
    if sampler is not None:  # totals into run.json with every step's record
        sampler.on_step.append(lambda step, counts: recorder.set_sampling(sampler.record))
    if piped:
        trainer.add_callback(StepLines(say))
    for note in plan.notes:
        say(note)
    previous = apply_wandb(plan, resume=resumed_from is not None)
    interrupted = False
    try:
        with quiet_checkpointing_renames():  # TRL's own loop (--loop trl) calls them each step
            trainer.train(resume_from_checkpoint=str(resumed_from) if resumed_from else None)
    except KeyboardInterrupt:
        interrupted = True
    except BaseException as exc:
        recorder.finish(RunStatus.FAILED, trainer.state.global_step, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        finish_wandb()
        restore_environ(previous)
    step = int(trainer.state.global_step)
    final: Path | None = None
    stopped_by = watcher.stopped_by if watcher is not None else None
    kept = last_checkpoint(output_dir)
    if stopped_by is not None and not interrupted:
        recorder.finish(RunStatus.STOPPED, step)
        where = (
            f"its last checkpoint is {kept}"
            if kept is not None
            else "no checkpoint was written before it (save_steps is larger)"
        )
        say(
            f"stopped at step {step} by the {stopped_by.kind.value} alarm (--stop-on-alarm); "
            f"no final model was saved; {where}."
        )
    elif interrupted:
        recorder.finish(RunStatus.INTERRUPTED, step)
        if kept is not None:
            say(
                f"interrupted at step {step}; the last checkpoint is {kept}. Run the same "
                "command again to resume from it."
            )
        else:
            say(
                f"interrupted at step {step}, before the first checkpoint (every save_steps "
                "steps): nothing was kept; the same command starts over."
            )
    else:
        final = save_final(trainer, output_dir)
        recorder.finish(RunStatus.FINISHED, step)
        say(f"model saved to {final}; evaluate it with `{command} rollout --model {final}`")
    if sampler is not None:
        _say_sampling(sampler.record, sampler.options.dynamic, say)
    peak = peak_resident_bytes()
    say(f"peak resident memory: {peak / 1024**3:.2f} GB")
    return TrainOutcome(
        output_dir=output_dir,
        final_model=final,
        global_step=step,
        resumed_from=resumed_from,
        interrupted=interrupted,
        log_history=list(trainer.state.log_history),
        peak_rss_bytes=peak,
        step_rss_bytes=dict(recorder.step_rss),
        alarms=list(watcher.alarms.raised) if watcher is not None else [],
        stopped_by=stopped_by,
        last_checkpoint=kept,
        sampling=sampler.record if sampler is not None else None,
    )


def _keep_history(output_dir: Path, step: int, say: Callable[[str], None]) -> None:
    """A GRPO run's folder made to hold only the steps its checkpoint holds
    (`rk_agent.trainers.resumed`), saying what was dropped."""
    note = keep_history(output_dir, step).note()
    if note is not None:
        say(note)


def _say_sampling(record: SamplingRecord, dynamic: bool, say: Callable[[str], None]) -> None:
    """The end of a run with dynamic sampling or retirement: its totals, the tasks retired."""
    if dynamic and record.steps:
        say(record.summary())
    retired = record.retired_summary()
    if retired is not None:
        say(retired)


def save_final(trainer: Any, output_dir: str | Path) -> Path:
    """Save the trained model and its tokenizer to ``<output_dir>/final`` and return that folder.

    The folder is a complete model: ``rk-agent rollout --model`` and ``from_pretrained`` take it.
    """
    final = Path(output_dir) / FINAL_DIR
    trainer.save_model(str(final))
    trainer.processing_class.save_pretrained(str(final))
    return final


def _watcher(trainer: Any) -> Any:
    """The trainer's `WatchCallback`, if it is watched (GRPO)."""
    from rk_agent.trainers.watch import WatchCallback

    callbacks = trainer.callback_handler.callbacks
    return next((c for c in callbacks if isinstance(c, WatchCallback)), None)


def _smoke_run(config: TrainConfig, args: Any) -> bool:
    """GRPO on a CPU with no length given: a few steps, not TRL's 3 epochs (hours)."""
    given = {"max_steps", "num_train_epochs"} & config.trl.keys()
    return config.kind == "grpo" and bool(args.use_cpu) and not given


def _grpo(config: TrainConfig, args: Any) -> Any:
    # The environment is resolved once for the run, as a rollout's is: its factory holds the
    # rewards, max_turns and tasks (read once) and one connection per MCP server (stopped at
    # exit), and knows the registered name trajectories record.
    spec = config.env
    envs = spec.factory()
    common: dict[str, Any] = {
        "args": args,
        "model": config.model,
        "n_tasks": None if spec.tasks is not None else config.n_tasks,
        "seed": spec.seed,
        "watch": config.watch,
        "tool_call_format": config.tool_call_format,
        "sampling": config.sampling,
    }
    try:
        if config.loop == "trl":
            from rk_agent.trainers.trl_env import trl_grpo_trainer

            return trl_grpo_trainer(envs, **common)
        from rk_agent.trainers.grpo import grpo_trainer

        return grpo_trainer(envs, multi_turn=config.multi_turn, **common)
    except BaseException:
        envs.close()  # no trainer: its environment and MCP servers go now
        raise


def _sft(config: TrainConfig, args: Any, say: Callable[[str], None]) -> Any:
    from rk_agent.trainers.sft import build_sft_trainer
    from rk_agent.trainers.sft_data import build_sft_data

    data = build_sft_data(
        str(config.trajectories), filter=config.sft_filter, trust_run=config.trust_run
    )
    say(f"SFT data: {data.report}")
    fit = "max_length" not in config.trl  # TRL's default (1024) would cut long episodes
    trainer = build_sft_trainer(
        config.model or DEFAULT_MODEL, None, data.dataset, args, fit_max_length=fit
    )
    if fit:
        say(
            f"max_length: {getattr(trainer.args, 'max_length', None)} tokens, the longest "
            "conversation, so none is cut (set --max_length to cap it)"
        )
    return trainer
