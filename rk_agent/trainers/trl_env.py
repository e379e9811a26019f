"""rk-agent environments in TRL's own tool loop: ``GRPOTrainer(environment_factory=...)``.

TRL 1.16 recommends ``environment_factory`` for tool environments: TRL runs the tool loop,
builds the masks and generates with transformers or vLLM (colocate or server). `trl_environment`
gives everything that slot needs for a tool-style rk-agent environment, in the shape TRL's own
third-party specs have (``trl.experimental.openreward``): ``.train_dataset``,
``.environment_factory``, ``.reward_funcs`` (and ``.reward_weights`` for ``GRPOConfig``).
`trl_grpo_trainer` builds the whole ``GRPOTrainer`` (as rk-agent's own loop does:
`rk_agent.trainers.grpo_builder`); it is what ``rk-agent train grpo --loop trl`` runs.

- The dataset is the environment's tasks (`rk_agent.trainers.tasks`), each prompt the opening
  conversation the environment shows (its system prompt included).
- The environment class (`rk_agent.trainers.trl_tool_env`) offers the environment's tools as
  its methods and runs them through the environment's own machinery.
- The rewards are those of rk-agent's loop (`rk_agent.trainers.rewards.episode_reward_funcs`),
  fed the `Trajectory` of each episode as the environment steps and scores it: ``episode`` (the
  weighted episode score, weight 1), ``step_rewards`` (the summed per-step rewards, weight
  ``step_weight``) and each episode component (``answer``, ``efficiency``, ...) with weight 0,
  as it is already inside ``episode``. ``episode`` also logs, through TRL's ``log_metric``,
  ``episodes/...``: tool calls per episode, the tool success rate, per-step reward statistics,
  turns, stop reasons, success and failure rates; and adds a turn-by-turn ``trajectory`` column
  to TRL's completions table. A failed episode or an invalid score is ``None``, never 0.
- The watch (`rk_agent.trainers.watch`) also logs the token drift a re-tokenizing trainer would
  have had: TRL trains on its own prompt and completion ids, and `rk_agent.trainers.drift_rate`
  compares them with the chat template over each episode's messages, turn by turn.
- Dynamic sampling and task retirement (``sampling``, `rk_agent.trainers.group_sampling`) work
  as in rk-agent's loop: the spec's ``task_source`` opens fresh tasks as rows of its dataset.

Main names: `trl_environment`, `TRLEnvSpec`, `trl_grpo_trainer`.

Example (a TRL script of your own; ``--use_vllm`` and the rest are TRL's as usual)::

    from trl import GRPOConfig, GRPOTrainer
    from rk_agent import trl_environment

    spec = trl_environment("tools", n_tasks=64)
    args = GRPOConfig(output_dir="out", reward_weights=spec.reward_weights,
                      max_tool_calling_iterations=spec.max_tool_calling_iterations)
    trainer = GRPOTrainer(model="path/to/model", args=args, train_dataset=spec.train_dataset,
                          environment_factory=spec.environment_factory,
                          reward_funcs=spec.reward_funcs)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rk_agent.envs.env_setup import EnvFactory, env_label, env_maker
from rk_agent.envs.registry import EnvLike
from rk_agent.errors import ConfigError, DataError, require_extra
from rk_agent.rewards.registry import RewardLike
from rk_agent.runs.alarms import AlarmOptions
from rk_agent.runs.provenance import NATIVE
from rk_agent.runs.run_dir import TRAJECTORIES_FILE, append_trajectories
from rk_agent.runs.trajectory import Trajectory
from rk_agent.tool_calls import DEFAULT_TOOL_CALL_FORMAT, ToolCallFormat
from rk_agent.trainers.episode_names import EpisodeNames
from rk_agent.trainers.group_sampling import SamplingOptions
from rk_agent.trainers.grpo_builder import GRPOLoop, build_grpo_trainer
from rk_agent.trainers.rewards import RewardFunc, episode_reward_funcs
from rk_agent.trainers.scored_batch import ScoredBatch
from rk_agent.trainers.task_draws import TaskSource, task_source
from rk_agent.trainers.tasks import TaskRow, env_dataset, task_columns, task_rows
from rk_agent.trainers.trl_tool_env import (
    TRLToolEnv,
    episode_trajectory,
    scored_trajectory,
    trl_env_class,
)

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rk_agent.envs.base import ChatEnv

__all__ = ["TRLEnvSpec", "trl_environment", "trl_grpo_trainer"]


@dataclass
class TRLEnvSpec:
    """An rk-agent environment ready for ``GRPOTrainer(environment_factory=...)``.

    Attributes:
        train_dataset: the tasks, one row each (``prompt``, ``task``, ``seed``, ...).
        environment_factory: the environment class TRL instantiates (`trl_env_class`).
        reward_funcs: TRL reward functions (see the module docstring).
        reward_weights: one weight per reward function, for ``GRPOConfig(reward_weights=...)``.
        max_tool_calling_iterations: the environment's ``max_turns - 1``, for
            ``GRPOConfig(max_tool_calling_iterations=...)``, so TRL plays at most the turns the
            environment allows.
        env_name: the environment's name.
        model_name: recorded in trajectories as the policy (`trl_grpo_trainer` sets it).
        tool_schemas: the environment's tool schemas (what TRL offers, as the methods derive
            them).
        task_source: the training tasks, and fresh ones as rows of ``train_dataset`` (dynamic
            sampling and task retirement, `rk_agent.trainers.task_draws`).
        names: names the episodes of a training step (``s<step>-<task>-<sample>``,
            `rk_agent.trainers.episode_names`); `trl_grpo_trainer` tells it the process.
    """

    train_dataset: Dataset
    environment_factory: type[TRLToolEnv]
    reward_funcs: list[RewardFunc]
    reward_weights: list[float]
    max_tool_calling_iterations: int
    env_name: str
    model_name: str = "policy"
    tool_schemas: list[dict[str, Any]] = field(default_factory=list)
    task_source: TaskSource | None = None
    names: EpisodeNames = field(default_factory=EpisodeNames)

    def trajectories(
        self,
        environments: Sequence[Any] | None,
        completions: Sequence[Any],
        task_ids: Sequence[str] | None = None,
        step: int | None = None,
    ) -> list[Trajectory]:
        """The `Trajectory` of each rollout of a batch (`episode_trajectory`), in order.

        Args:
            environments: TRL's ``environments`` reward argument.
            completions: TRL's ``completions``.
            task_ids: the rows' ``task_id`` column, to number the samples of each task.
            step: the training step (TRL's ``global_step``), recorded; with it, the episodes
                are named ``s<step + 1>-<task>-<sample>`` (`names`).

        Raises:
            DataError: ``environments`` are not this spec's environment instances.
        """
        if (
            environments is None
            or len(environments) != len(completions)
            or not all(isinstance(e, self.environment_factory) for e in environments)
        ):
            raise DataError(
                "the rewards of rk_agent.trl_environment(...) read the rk-agent environment of "
                "each rollout: pass spec.environment_factory to GRPOTrainer(environment_factory="
                "...) together with spec.reward_funcs."
            )
        done = [scored_trajectory(e) for e in environments]
        if all(t is not None for t in done):  # the batch's first reward function scored it
            return [t for t in done if t is not None]
        ids = list(task_ids) if task_ids is not None else [str(i) for i in range(len(completions))]
        if step is not None:
            names = self.names.name(step + 1, ids)
            played = zip(environments, completions, names, strict=True)
            return [
                episode_trajectory(
                    environment,
                    completion,
                    index=name.task_index,
                    sample=name.sample,
                    model=self.model_name,
                    step=step,
                    episode_id=name.id,
                )
                for environment, completion, name in played
            ]
        samples: dict[str, int] = {}
        out = []
        for index, (environment, completion) in enumerate(
            zip(environments, completions, strict=True)
        ):
            sample = samples.get(ids[index], 0)
            samples[ids[index]] = sample + 1
            trajectory = episode_trajectory(
                environment, completion, index=index, sample=sample, model=self.model_name,
                step=step,
            )  # fmt: skip
            out.append(trajectory)
        return out


def trl_environment(
    env: EnvLike | EnvFactory,
    *,
    n_tasks: int | None = None,
    seed: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    rewards: Mapping[str, RewardLike] | Sequence[str] | None = None,
    step_weight: float = 1.0,
    tool_call_format: str | ToolCallFormat = DEFAULT_TOOL_CALL_FORMAT,
) -> TRLEnvSpec:
    """A tool environment as TRL's ``environment_factory`` spec (see the module docstring).

    Args:
        env: the environment (short name, Gymnasium id, ``file.py::Class``, ``module:Class``
            or the class), or the `EnvFactory` of a run's `EnvSetup` (its setup then holds
            ``env_kwargs`` and ``rewards``). It is resolved once: the tasks, rewards and tools
            are read from one environment, and every other one is built fresh alike.
        n_tasks: training tasks (task ``i`` reset with seed ``seed + i``); default: all tasks
            of the env's dataset.
        seed: the first task seed.
        env_kwargs: keyword arguments for the environment (``tasks``, ``max_turns``, ...).
        rewards: episode rewards replacing the environment's (``{name: reward}`` or names).
        step_weight: weight of the summed per-step rewards.
        tool_call_format: the text tool-call format a reply in which TRL found no call is
            checked in (a call attempted in it is a parse error, with that format's feedback),
            as rk-agent's loop gives it to its policy (`rk_agent.trainers.trl_tool_env`).

    Raises:
        ConfigError: the environment needs rk-agent's loop (it talks back with user messages,
            like ``guess``, or has no tools), or an option is invalid (an unknown
            ``tool_call_format`` too). Nothing is loaded first.

    Example:
        >>> spec = trl_environment("tools", n_tasks=4)
        >>> [f.__name__ for f in spec.reward_funcs], spec.reward_weights
        (['episode', 'step_rewards', 'answer', 'efficiency'], [1.0, 1.0, 0.0, 0.0])
    """
    require_extra("train", "trl_environment")
    kwargs = dict(env_kwargs or {})
    if rewards:
        named = rewards if isinstance(rewards, Mapping) else {str(r): r for r in rewards}
        kwargs["episode_rewards"] = dict(named)
    name = env_label(env)
    make = env_maker(env, kwargs)
    built = make()
    factory = trl_env_class(make, name=name, probe=built, tool_call_format=tool_call_format)
    rows = task_rows(built, n_tasks, seed)
    funcs, weights = episode_reward_funcs(built, step_weight=step_weight)
    opener: list[ChatEnv] = []  # an environment of its own to open fresh tasks with

    def fresh_row(row: TaskRow) -> dict[str, Any]:
        if not opener:
            opener.append(make())
        return _columns(opener[0], row)

    spec = TRLEnvSpec(
        train_dataset=_dataset(built, rows),
        environment_factory=factory,
        reward_funcs=[],
        reward_weights=weights,
        max_tool_calling_iterations=max(0, built.max_turns - 1),
        env_name=name,
        tool_schemas=list(built.tool_schemas),
        task_source=task_source(built, rows, fresh_row, make),
        names=EpisodeNames(row.task.id for row in rows),
    )
    spec.reward_funcs = [_reward(fn, spec) for fn in funcs]
    return spec


def _dataset(env: ChatEnv, rows: Sequence[TaskRow]) -> Dataset:
    """`env_dataset`, each prompt being the opening conversation the environment shows."""
    dataset = env_dataset(env, rows=rows)
    prompts = [_columns(env, row)["prompt"] for row in rows]
    return dataset.remove_columns("prompt").add_column("prompt", prompts)


def _columns(env: ChatEnv, row: TaskRow) -> dict[str, Any]:
    """One row of `_dataset`: `task_columns`, with the opening conversation the environment
    shows as its prompt."""
    observation, _ = env.reset(seed=row.seed, options={"task": row.task})
    prompt = [{"role": m["role"], "content": m.get("content") or ""} for m in observation]
    return {**task_columns(row), "prompt": prompt}


def _reward(fn: Callable[..., Any], spec: TRLEnvSpec) -> RewardFunc:
    """``fn`` (it reads ``trajectory``) fed the batch's trajectories from TRL's environments
    (each episode stepped once: every function, and the trainer's batch hooks, get the same
    `Trajectory`)."""

    def reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list:
        state = kwargs.get("trainer_state")
        trajectories = spec.trajectories(
            kwargs.pop("environments", None),
            completions,
            task_ids=kwargs.get("task_id"),
            step=int(state.global_step) if state is not None else None,
        )
        return list(fn(prompts, completions, trajectory=trajectories, **kwargs))

    reward.__name__ = reward.__qualname__ = fn.__name__
    return reward


def trl_grpo_trainer(
    env: EnvLike | EnvFactory,
    *,
    args: GRPOConfig,
    model: str | os.PathLike[str] | PreTrainedModel | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    n_tasks: int | None = None,
    seed: int = 0,
    rewards: Mapping[str, RewardLike] | Sequence[str] | None = None,
    step_weight: float = 1.0,
    callbacks: list[TrainerCallback] | None = None,
    watch: AlarmOptions | None = None,
    tool_call_format: str | ToolCallFormat = DEFAULT_TOOL_CALL_FORMAT,
    sampling: SamplingOptions | None = None,
) -> GRPOTrainer:
    """A `GRPOTrainer` that trains ``model`` on a tool environment with TRL's own tool loop.

    The environment is checked first (a `ConfigError` comes before any model loads). Every
    ``GRPOConfig`` option passes through to TRL untouched (``use_vllm``, ``vllm_mode``,
    ``max_completion_length``, ...), except two that are filled in when left unset:
    ``reward_weights`` (the spec's) and ``max_tool_calling_iterations`` (the environment's
    ``max_turns - 1``). Episodes are appended to ``<output_dir>/trajectories.jsonl`` by the
    trainer itself, once per generation batch before its rewards
    (`rk_agent.trainers.hooked_trainer.HookedGRPOTrainer`), in the batch's order.

    Args:
        env: the environment (see `trl_environment`).
        args: TRL's `GRPOConfig` (``max_completion_length`` bounds a whole episode's tokens).
        model: a local folder, hub id or loaded model; ``None`` is the embedded model.
        tokenizer: default: the model folder's. Its chat template must support tool calling
            and be one TRL can parse replies of (e.g. Qwen2.5's, which the embedded model has).
        env_kwargs: keyword arguments for the environment.
        n_tasks: training tasks (default: all tasks of the env's dataset).
        seed: the first task seed.
        rewards: episode rewards replacing the environment's.
        step_weight: weight of the summed per-step rewards.
        callbacks: extra `transformers.TrainerCallback`s.
        watch: the alarms' thresholds (`AlarmOptions`); default: the defaults. With
            ``enabled=False`` the run is not watched (`rk_agent.trainers.watch`).
        tool_call_format: the text tool-call format replies are checked in (see
            `trl_environment`).
        sampling: dynamic sampling and task retirement
            (`rk_agent.trainers.group_sampling.SamplingOptions`), as in
            `rk_agent.trainers.grpo.grpo_trainer`; default: off.

    Raises:
        ConfigError: the environment needs rk-agent's loop, the chat template cannot do tool
            calls, ``reward_weights`` has the wrong length, ``tool_call_format`` is unknown,
            or sampling options the run cannot honour.
    """
    spec = trl_environment(
        env, n_tasks=n_tasks, seed=seed, env_kwargs=env_kwargs, rewards=rewards,
        step_weight=step_weight, tool_call_format=tool_call_format,
    )  # fmt: skip
    log = Path(args.output_dir or ".") / TRAJECTORIES_FILE

    def write_trajectories(batch: ScoredBatch) -> None:
        if batch.trajectories is not None:
            append_trajectories(log, batch.trajectories)

    if args.max_tool_calling_iterations is None:
        args.max_tool_calling_iterations = spec.max_tool_calling_iterations
    spec.names.process_index = int(getattr(args, "process_index", 0) or 0)
    spec.names.processes = max(1, int(getattr(args, "world_size", 1) or 1))

    def check_tokenizer(tokenizer: Any, model_spec: Any) -> None:
        _check_tool_template(tokenizer, str(model_spec if isinstance(model_spec, str) else "model"))
        spec.model_name = str(
            getattr(getattr(model_spec, "config", None), "name_or_path", model_spec)
        )

    loop = GRPOLoop(
        name="trl_grpo_trainer",
        train_dataset=spec.train_dataset,
        reward_funcs=spec.reward_funcs,
        reward_weights=spec.reward_weights,
        environment_factory=spec.environment_factory,
        check_tokenizer=check_tokenizer,
        batch_hooks=[write_trajectories],  # before the reward functions run: the trainer's hook
        trajectories=spec.trajectories,
        # TRL trains on its prompt and completion ids; the drift is theirs against re-rendering.
        drift_tools=spec.tool_schemas,
        drift_format=NATIVE,
        task_source=spec.task_source,
    )
    return build_grpo_trainer(
        loop, args=args, model=model, tokenizer=tokenizer, callbacks=callbacks, watch=watch,
        sampling=sampling,
    )  # fmt: skip


def _check_tool_template(tokenizer: Any, model: str) -> None:
    """TRL's checks of the chat template, before the model loads, as `ConfigError`s."""
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    fix = (
        "Use a model whose chat template calls tools in a format TRL parses (Qwen2.5/3, "
        "Llama 3.1/3.2, ...), or set tokenizer.chat_template to TRL's "
        "trl/chat_templates/qwen2_5.jinja for a ChatML model (the embedded model has it)."
    )
    if not supports_tool_calling(tokenizer):
        raise ConfigError(
            f"the chat template of {model} cannot render tool calls, which TRL's tool loop "
            f"(--loop trl) needs. {fix}"
        )
    has_parser = any(
        getattr(tokenizer, attr, None) is not None
        for attr in ("response_template", "response_schema")
    )
    if not has_parser:
        try:
            add_response_schema(tokenizer)
        except ValueError as exc:
            raise ConfigError(
                f"TRL cannot read tool calls from the replies of {model}: it does not know its "
                f"chat template ({exc}). {fix}"
            ) from exc
