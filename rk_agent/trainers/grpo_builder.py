"""The one place a TRL `GRPOTrainer` is built, for both of rk-agent's GRPO loops.

rk-agent's own loop (`rk_agent.trainers.grpo.grpo_trainer`: a ``rollout_func`` that plays
whole episodes) and TRL's tool loop (`rk_agent.trainers.trl_env.trl_grpo_trainer`:
``environment_factory``) differ only in what they bring, a `GRPOLoop`: the dataset, the reward
functions and their weights, the rollout function or the environment class, and what the watch
needs. `build_grpo_trainer` does the rest, the same way for both:

1. resolves the model (``None``: the embedded one) and loads its tokenizer, then lets the loop
   check it (`GRPOLoop.check_tokenizer`) before the model itself loads;
2. fills ``reward_weights`` in TRL's `GRPOConfig` with the loop's weights when unset, or checks
   that it has one weight per reward function;
3. applies rk-agent's changes to TRL (`rk_agent.trainers.trl_patches.score_completions_only`);
4. wraps the reward functions: each reward's scores kept for wandb's histograms
   (`rk_agent.trainers.reward_histograms`, when the loop asks), the watch's recorder
   (`rk_agent.trainers.watch`) unless the watch is off, and dynamic sampling's and task
   retirement's when either is on (`rk_agent.trainers.group_sampling`, checked first); each
   recorder opens every batch from a batch hook, before the reward functions run;
5. constructs a `rk_agent.trainers.hooked_trainer.HookedGRPOTrainer`: TRL's `GRPOTrainer` that
   hands each generation batch to the loop's hooks and the recorders' before scoring it (with
   its trajectories: the rows', or the loop's `GRPOLoop.trajectories`), holding a
   `GroupSampler` over the loop's tasks with dynamic sampling or retirement; TRL's warning that
   ``rollout_func`` and ``environment_factory`` are experimental is silenced (rk-agent pins
   TRL);
6. attaches the histogram callback and the watch's callback (with the token drift meter, when
   the loop names the tools the model is offered, and the sampler's counts), ahead of the
   loggers.

Main names: `GRPOLoop`, `build_grpo_trainer`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rk_agent.errors import ConfigError
from rk_agent.policies.local_model import resolve_model
from rk_agent.runs.alarms import AlarmOptions
from rk_agent.trainers.group_sampling import SamplingOptions
from rk_agent.trainers.scored_batch import BatchHook, TrajectoriesOf
from rk_agent.trainers.task_draws import TaskSource
from rk_agent.trainers.trl_patches import (
    escape_printed_completions,
    quiet_tied_weights_on_resume,
    score_completions_only,
)

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

__all__ = ["GRPOLoop", "build_grpo_trainer"]

_EXPERIMENTAL = r".*(rollout_func|environment_factory).*experimental"
"""TRL's UserWarning on every construction with either; we know, and pin TRL."""


@dataclass
class GRPOLoop:
    """What one GRPO loop brings to `build_grpo_trainer` (module docstring).

    Attributes:
        name: the function the user called, named in error messages.
        train_dataset: the tasks, one row each.
        reward_funcs: TRL reward functions.
        reward_weights: one weight per reward function, used when ``reward_weights`` is unset
            in the `GRPOConfig`.
        rollout_func: TRL's ``rollout_func`` (rk-agent's loop).
        environment_factory: TRL's ``environment_factory`` (TRL's tool loop).
        check_tokenizer: called with the tokenizer and the resolved model (a path, hub id or
            loaded model) before the model loads; raises `ConfigError` for one the loop cannot
            use.
        batch_hooks: called with each generation batch before it is scored (`ScoredBatch`;
            TRL's tool loop writes its trajectories there), ahead of the recorders' own.
        trajectories: how a batch's trajectories are read when its rows carry none (TRL's tool
            loop: from TRL's environments, `rk_agent.trainers.trl_env.TRLEnvSpec.trajectories`).
        drift_tools: the tool schemas the model is offered, to measure the token drift of a
            re-tokenizing trainer (`rk_agent.trainers.drift_rate`); ``None``: not measured.
        drift_format: the text tool-call format the drift meter renders with (``None``:
            native tool calls; see `rk_agent.trainers.drift_rate.DriftMeter`).
        reward_histograms: keep each reward's scores for wandb histograms at each log.
        task_source: the training tasks and how a fresh one becomes a dataset row, for dynamic
            sampling and task retirement; ``None``: the loop offers neither.
    """

    name: str
    train_dataset: Dataset
    reward_funcs: Sequence[Callable[..., Any]]
    reward_weights: Sequence[float]
    rollout_func: Callable[..., Any] | None = None
    environment_factory: type | None = None
    check_tokenizer: Callable[[Any, Any], None] | None = None
    batch_hooks: Sequence[BatchHook] = ()
    trajectories: TrajectoriesOf | None = None
    drift_tools: Sequence[dict[str, Any]] | None = None
    drift_format: str | None = None
    reward_histograms: bool = False
    task_source: TaskSource | None = None


def build_grpo_trainer(
    loop: GRPOLoop,
    *,
    args: GRPOConfig,
    model: str | os.PathLike[str] | PreTrainedModel | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    callbacks: list[TrainerCallback] | None = None,
    watch: AlarmOptions | None = None,
    sampling: SamplingOptions | None = None,
) -> GRPOTrainer:
    """The `GRPOTrainer` of ``loop`` (module docstring).

    Args:
        loop: what the loop brings.
        args: TRL's `GRPOConfig`; ``reward_weights`` is filled in when unset.
        model: a local folder, hub id or loaded model; ``None`` is the embedded model.
        tokenizer: default: the model folder's tokenizer.
        callbacks: extra `transformers.TrainerCallback`s.
        watch: the alarms' thresholds (`AlarmOptions`); default: the defaults. With
            ``enabled=False`` the run is not watched.
        sampling: dynamic sampling and task retirement (`SamplingOptions`); default: off.

    Raises:
        ConfigError: a loaded model without its tokenizer, a tokenizer the loop refuses,
            ``reward_weights`` of the wrong length, or sampling options the run cannot honour
            (`rk_agent.trainers.group_sampling.check_sampling`, or a loop without tasks to
            draw).
    """
    from transformers import AutoTokenizer, PreTrainedModel

    from rk_agent.trainers.callbacks import attach
    from rk_agent.trainers.drift_rate import DriftMeter
    from rk_agent.trainers.hooked_trainer import HookedGRPOTrainer
    from rk_agent.trainers.reward_histograms import (
        RewardHistogramCallback,
        ScoreBuffer,
        record_scores,
    )
    from rk_agent.trainers.watch import WatchCallback, WatchRecorder

    sampling = sampling or SamplingOptions()
    _check_sampling(loop, args, sampling)
    model_spec: Any = model if isinstance(model, PreTrainedModel) else resolve_model(model)
    if tokenizer is None:
        if isinstance(model_spec, PreTrainedModel):
            raise ConfigError(f"{loop.name}(model=<a loaded model>) also needs tokenizer=...")
        tokenizer = AutoTokenizer.from_pretrained(model_spec)
    if loop.check_tokenizer is not None:
        loop.check_tokenizer(tokenizer, model_spec)
    _fill_reward_weights(args, loop)
    score_completions_only()  # on a CPU, TRL's LM head would also score the prompt
    escape_printed_completions()  # a completion's escape codes never reach the terminal
    funcs: list[Any] = list(loop.reward_funcs)
    scores = ScoreBuffer()  # every reward's scores, for wandb histograms at each log
    if loop.reward_histograms:
        funcs = record_scores(funcs, scores)
    watch = watch or AlarmOptions()
    recorder = WatchRecorder()
    hooks: list[BatchHook] = list(loop.batch_hooks)
    if watch.enabled:
        funcs = recorder.wrap(funcs)
        hooks.append(recorder.begin)
    sampler = None
    if sampling.enabled and loop.task_source is not None:
        sampled = WatchRecorder()  # each draw's scores and trajectories
        funcs = sampled.wrap(funcs)
        hooks.append(sampled.begin)
        sampler = _sampler(loop.task_source, sampling, sampled, funcs, args)
    names = [getattr(f, "__name__", "") for f in funcs]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_EXPERIMENTAL, category=UserWarning)
        common: dict[str, Any] = {
            "model": model_spec, "reward_funcs": funcs, "args": args,
            "train_dataset": loop.train_dataset, "processing_class": tokenizer,
            "rollout_func": loop.rollout_func, "environment_factory": loop.environment_factory,
            "callbacks": callbacks,
        }  # fmt: skip
        trainer = HookedGRPOTrainer(
            rk_sampler=sampler, rk_batch_hooks=hooks, rk_trajectories=loop.trajectories,
            **common,
        )  # fmt: skip
    quiet_tied_weights_on_resume(trainer)  # a resumed tied LM head is no missing key
    if loop.reward_histograms:
        attach(trainer, RewardHistogramCallback(scores))  # ahead of wandb's own callback
    if watch.enabled:
        drift = None
        if loop.drift_tools is not None:
            drift = DriftMeter(tokenizer, loop.drift_tools, loop.drift_format)
        watcher = WatchCallback(
            recorder, names, args.reward_weights or [], watch, args.output_dir, drift=drift,
            sampling=sampler.take_pending if sampler is not None else None,
        )  # fmt: skip
        attach(trainer, watcher)
    return trainer


def _check_sampling(loop: GRPOLoop, args: GRPOConfig, sampling: SamplingOptions) -> None:
    from rk_agent.trainers.group_sampling import check_sampling

    check_sampling(sampling, args, loop.reward_funcs)
    if sampling.enabled and loop.task_source is None:
        raise ConfigError(
            f"{loop.name} was given dynamic sampling or task retirement, but its loop names no "
            "training tasks to draw fresh ones from (GRPOLoop.task_source). Give it one, or "
            "train without them."
        )


def _sampler(
    source: TaskSource,
    sampling: SamplingOptions,
    recorder: Any,
    funcs: Sequence[Callable[..., Any]],
    args: GRPOConfig,
) -> Any:
    from rk_agent.trainers.group_sampling import GroupSampler
    from rk_agent.trainers.task_draws import TaskDraws

    draws = TaskDraws(
        source,
        seed=int(args.seed),
        retire_after=sampling.retire_after,
        retire_keep=sampling.retire_keep,
    )
    names = [getattr(f, "__name__", "") for f in funcs]
    weights = list(args.reward_weights or [])
    size = int(args.num_generations or 1)  # TRL checks it
    return GroupSampler(sampling, draws, recorder, names, weights, size)


def _fill_reward_weights(args: GRPOConfig, loop: GRPOLoop) -> None:
    if args.reward_weights is None:
        args.reward_weights = list(loop.reward_weights)
    elif len(args.reward_weights) != len(loop.reward_funcs):
        names = [getattr(f, "__name__", "") for f in loop.reward_funcs]
        raise ConfigError(
            f"reward_weights has {len(args.reward_weights)} entries but there are "
            f"{len(loop.reward_funcs)} reward functions {names}; give one weight each, in that "
            "order, or leave reward_weights unset for the environment's weights."
        )
