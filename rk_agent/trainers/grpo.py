"""Building a TRL `GRPOTrainer` for an rk-agent environment.

`grpo_trainer` wires the pieces: the environment's tasks become the dataset
(`rk_agent.trainers.tasks`), its rewards become TRL reward functions, one per component
(`rk_agent.trainers.rewards`), and, for multi-turn training, `EpisodeRollout` plays whole
episodes with the model being trained, or with a vLLM server (TRL's ``use_vllm=True,
vllm_mode="server"``, or ``server_url``), and masks the environment's tokens out of the loss.
Each reward's scores also go to wandb as a histogram per logging step, when wandb is on
(`rk_agent.trainers.reward_histograms`), and every step is watched: the signals that show a
step teaching nothing, and alarms when they say so (`rk_agent.trainers.watch`), with the token
drift a re-tokenizing trainer would have had (multi-turn: `rk_agent.trainers.drift_rate`; the
loop itself trains on the generated ids). The trainer itself is built as TRL's own loop's is
(`rk_agent.trainers.grpo_builder`: model, tokenizer, TRL's patches, the watch, and with
``sampling`` dynamic sampling and task retirement, `rk_agent.trainers.group_sampling`);
everything else is TRL's own `GRPOTrainer` and `GRPOConfig`, untouched.

Main names: `grpo_trainer`.

Example (what ``rk-agent train grpo --env guess`` does, in a script)::

    from trl import GRPOConfig
    from rk_agent.trainers.grpo import grpo_trainer

    args = GRPOConfig(output_dir="out", max_steps=10, num_generations=4,
                      per_device_train_batch_size=4, max_completion_length=256)
    trainer = grpo_trainer("guess", model="path/to/model", args=args, n_tasks=64)
    trainer.train()
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rk_agent.envs.env_setup import EnvFactory, env_label, env_maker
from rk_agent.envs.registry import EnvLike
from rk_agent.errors import require_extra
from rk_agent.policies.episode_tokens import check_fixed_tools
from rk_agent.rewards.registry import RewardLike
from rk_agent.runs.alarms import AlarmOptions
from rk_agent.tool_calls import DEFAULT_TOOL_CALL_FORMAT, ToolCallFormat, get_tool_call_format
from rk_agent.trainers.group_sampling import SamplingOptions
from rk_agent.trainers.grpo_builder import GRPOLoop, build_grpo_trainer
from rk_agent.trainers.rewards import episode_reward_funcs, single_turn_reward_funcs
from rk_agent.trainers.rollout import EpisodeRollout, vllm_server_url
from rk_agent.trainers.task_draws import task_source
from rk_agent.trainers.tasks import TaskTable, env_dataset, task_columns, task_rows

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

__all__ = ["grpo_trainer"]


def grpo_trainer(
    env: EnvLike | EnvFactory,
    *,
    args: GRPOConfig,
    model: str | os.PathLike[str] | PreTrainedModel | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    n_tasks: int | None = None,
    seed: int = 0,
    multi_turn: bool = True,
    rewards: Mapping[str, RewardLike] | Sequence[str] | None = None,
    step_weight: float = 1.0,
    max_tokens_per_turn: int | None = None,
    callbacks: list[TrainerCallback] | None = None,
    server_url: str | None = None,
    served_model: str | None = None,
    server_options: Mapping[str, Any] | None = None,
    watch: AlarmOptions | None = None,
    tool_call_format: str | ToolCallFormat = DEFAULT_TOOL_CALL_FORMAT,
    sampling: SamplingOptions | None = None,
) -> GRPOTrainer:
    """A `GRPOTrainer` that trains ``model`` on ``env`` with the environment's rewards.

    Args:
        env: the environment (short name, Gymnasium id, ``file.py::Class``, ``module:Class``),
            or the `EnvFactory` of a run's `EnvSetup` (its setup then holds ``env_kwargs``
            and ``rewards``). It is resolved once: the tasks, rewards and tools are read from
            one environment, and the rollouts build fresh ones of the same class.
        args: TRL's `GRPOConfig` (``max_completion_length`` bounds a whole episode's tokens).
        model: a local folder, hub id or loaded model; ``None`` is the embedded model.
        tokenizer: default: the model folder's tokenizer.
        env_kwargs: keyword arguments for the environment (``tasks``, ``max_turns``, ...).
        n_tasks: training tasks (task ``i`` reset with seed ``seed + i``); default: all tasks
            of the env's dataset.
        seed: the first task seed.
        multi_turn: play whole episodes (`EpisodeRollout`); ``False`` trains on one reply per
            task, scored by the episode rewards (no tools are run).
        rewards: episode rewards replacing the environment's (``{name: reward}`` or names).
        step_weight: multi-turn: weight of the summed per-step rewards.
        max_tokens_per_turn: multi-turn: most new tokens per reply (default: the budget left).
        callbacks: extra `transformers.TrainerCallback`s.
        server_url: multi-turn: play the episodes against this vLLM (or compatible) server
            instead of the trainer's model; default: TRL's server when ``args.use_vllm`` and
            ``args.vllm_mode == "server"``. See `EpisodeRollout`.
        served_model: multi-turn: the served model id (default: the first the server lists).
        server_options: multi-turn: more `VLLMPolicy` arguments (``api_key``, ``timeout_s``,
            ``max_retries``, ...).
        watch: the alarms' thresholds (`AlarmOptions`); default: the defaults. With
            ``enabled=False`` the run is not watched.
        tool_call_format: multi-turn: the text tool-call format the rollout's policy reads
            replies with (a name or a `rk_agent.tool_calls.ToolCallFormat`; the feedback after
            a malformed call is its note), as `rk_agent.trainers.trl_env.trl_grpo_trainer`
            checks replies in it.
        sampling: dynamic sampling and task retirement
            (`rk_agent.trainers.group_sampling.SamplingOptions`); default: off. Fresh tasks
            are generated with the seeds after the training tasks', or, for a task dataset,
            are its rows not yet drawn in the current pass (`rk_agent.trainers.task_draws`).

    An environment whose tools differ per task (``tool_scope`` ``task``) trains as any other:
    each episode's prompt is rendered with its own tools, and the drift check reads each
    episode's record of them.

    Raises:
        ConfigError: an option is invalid (e.g. ``reward_weights`` of the wrong length, an
            unknown ``tool_call_format``, or multi-turn with ``use_vllm`` in ``colocate``
            mode), or multi-turn on an environment whose tools change between turns
            (``tool_scope`` ``turn``).
    """
    require_extra("train", "grpo_trainer")
    tool_format = get_tool_call_format(tool_call_format)  # an unknown name: before any load
    if multi_turn and server_url is None:
        vllm_server_url(args)  # colocated vLLM is refused before the model loads
    env_kwargs = dict(env_kwargs or {})
    if rewards:
        named = rewards if isinstance(rewards, Mapping) else {str(r): r for r in rewards}
        env_kwargs["episode_rewards"] = dict(named)
    make = env_maker(env, env_kwargs)
    built = make()
    if multi_turn:
        check_fixed_tools(built, env_label(env))
    rows = task_rows(built, n_tasks, seed)
    table = TaskTable(rows)
    rollout_func = drift_tools = drift_format = None
    if multi_turn:
        funcs, weights = episode_reward_funcs(built, step_weight=step_weight)
        rollout_func = EpisodeRollout(
            make,
            table,
            env_name=env.name if isinstance(env, EnvFactory) else str(env),
            max_tokens_per_turn=max_tokens_per_turn,
            trajectory_log=Path(args.output_dir or ".") / "trajectories.jsonl",
            server_url=server_url,
            served_model=served_model,
            server_options=server_options,
            tool_call_format=tool_format,
        )
        # The rollout's policy renders tools as `tool_format="auto"` decides.
        drift_tools = built.tool_schemas
        drift_format = _drift_format(
            (server_options or {}).get("tool_format", "auto"), tool_format.name
        )
    else:
        funcs, weights = single_turn_reward_funcs(built)
    loop = GRPOLoop(
        name="grpo_trainer",
        train_dataset=env_dataset(built, rows=rows),
        reward_funcs=funcs,
        reward_weights=weights,
        rollout_func=rollout_func,
        drift_tools=drift_tools,
        drift_format=drift_format,
        reward_histograms=True,
        # A fresh task is told to the rollout, which finds each prompt's task in the table.
        task_source=task_source(built, rows, task_columns, make, on_fresh=table.add),
    )
    return build_grpo_trainer(
        loop, args=args, model=model, tokenizer=tokenizer, callbacks=callbacks, watch=watch,
        sampling=sampling,
    )  # fmt: skip


def _drift_format(tool_option: str, text_format: str) -> str | None:
    """The rollout policy's ``tool_format`` as `DriftMeter` takes it (``"text"``: the name of
    its text tool-call format)."""
    return {"native": "native", "text": text_format}.get(tool_option)
