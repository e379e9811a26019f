"""Rewards for GRPO: an environment's rewards as TRL reward functions, one per component.

TRL logs every reward function on its own (``rewards/<name>/mean``) and weights them with
``reward_weights``. So each component gets its own function:

- multi-turn (`episode_reward_funcs`): the functions read the ``trajectory`` that
  `EpisodeRollout` returns for each row. ``episode`` is the environment's episode score
  (weight 1), ``step_rewards`` the sum of the per-step rewards (weight ``step_weight``); together
  they are the episode's return, as the environment defines it. Each episode reward component
  (``answer``, ``efficiency``, ...) is logged too, with weight 0: it is already inside
  ``episode``. The ``episode`` function also logs per-step reward statistics, tool-call and
  parse-error rates, stop reasons, turns and success (`episode_stats`, defined as run summaries
  define them: `rk_agent.runs.stats`), and adds a turn-by-turn ``trajectory``
  column to TRL's completions table (and so to wandb).
- single-turn (`single_turn_reward_funcs`): each episode reward component, through
  `rk_agent.rewards.trl_adapter.to_trl_reward`, fed the task's ground truth and metadata from the
  dataset's ``task`` column, weighted as the environment weights it.

An episode whose return has no number (`Trajectory.episode_return`: it failed before it was
scored, its score is invalid, or a step reward is) is ``None`` in every function, the
components' too: TRL finds the row unscorable (every function ``None``) and gives it no
advantage, instead of training on a fake 0 or on the episode score without its steps.

The reward a row is trained on is TRL's weighted sum of the functions' scores; `weighted_rewards`
computes it from the scores the functions returned, for the watch and for dynamic sampling's
choice of groups (one rule for both).

Main names: `episode_reward_funcs`, `episode_stats`, `single_turn_reward_funcs`,
`render_trajectory_text`, `weighted_rewards`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.imported import ImportedEnv
from rk_agent.errors import ConfigError, DataError
from rk_agent.rewards.registry import RewardLike, get_reward_function
from rk_agent.rewards.trl_adapter import to_trl_reward
from rk_agent.runs.stats import EpisodeStats
from rk_agent.runs.trajectory import Trajectory
from rk_agent.trainers.tasks import TaskTable

__all__ = [
    "RewardFunc",
    "RewardFuncs",
    "episode_reward_funcs",
    "render_trajectory_text",
    "single_turn_reward_funcs",
    "weighted_rewards",
]

RewardFunc = Callable[..., list[float | None]]
"""A TRL reward function: keyword columns in, one score per sample out (``None``: no score)."""

RewardFuncs = tuple[list[RewardFunc], list[float]]
"""TRL reward functions and their weights."""


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    fn.__name__ = name
    fn.__qualname__ = name
    return fn


def _trajectories(kwargs: dict[str, Any], name: str) -> list[Trajectory]:
    trajectories = kwargs.get("trajectory")
    if not isinstance(trajectories, list):
        raise DataError(
            f"the reward {name!r} needs the 'trajectory' column that EpisodeRollout returns; "
            "use it with GRPOTrainer(rollout_func=EpisodeRollout(...))."
        )
    return trajectories


def episode_reward_funcs(env: ChatEnv, *, step_weight: float = 1.0) -> RewardFuncs:
    """TRL reward functions (and ``reward_weights``) for multi-turn episodes.

    Args:
        env: an environment built like the training ones (for its reward component names).
        step_weight: weight of the summed per-step rewards (0 trains on the episode score only).

    Returns:
        ``(reward_funcs, reward_weights)`` for ``GRPOTrainer``/``GRPOConfig``.
    """

    def episode(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list:
        trajectories = _trajectories(kwargs, "episode")
        log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
        if callable(log_metric):
            for key, value in episode_stats(trajectories).items():
                log_metric(key, value)
        if callable(log_extra):
            log_extra("trajectory", [render_trajectory_text(t) for t in trajectories])
            log_extra("stop_reason", [t.stop_reason.value for t in trajectories])
        returns = [t.episode_return for t in trajectories]
        return [r.episode if r.valid else None for r in returns]

    def step_rewards(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list:
        # An episode whose return is invalid is not trained on its shaping alone: that would
        # count the invalid score as a silent 0 against the rest of its group.
        returns = [t.episode_return for t in _trajectories(kwargs, "step_rewards")]
        return [r.steps if r.valid else None for r in returns]

    def component(name: str) -> RewardFunc:
        def score(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list:
            out: list[float | None] = []
            for t in _trajectories(kwargs, name):
                metric = t.episode.metrics.get(name) if t.episode is not None else None
                valid = metric is not None and metric.is_score_valid and t.episode_return.valid
                out.append(metric.score if valid and metric is not None else None)
            return out

        return _named(score, name)

    funcs: list[RewardFunc] = [episode, step_rewards]
    weights = [1.0, step_weight]
    for name in env.episode_reward_weights:
        if name not in ("episode", "step_rewards"):
            funcs.append(component(name))
            weights.append(0.0)
    return funcs, weights


def episode_stats(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Batch statistics of episodes, as ``episodes/...`` metrics for TRL's log.

    The numbers are `EpisodeStats`'s (see `rk_agent.runs.stats` for the definitions, the
    same as ``summary.json``'s): context overflow counts in ``failure_rate`` (its share alone is
    ``stop/truncated``, and TRL's cut episodes' is ``budget_hit_rate``); a rate with nothing to
    count (``tool_success_rate`` without tool calls, ``success_rate`` without a verdict) is left
    out rather than logged as 0.
    """
    counted = EpisodeStats.of(trajectories)
    n = counted.episodes
    if not n:
        return {}
    step = counted.step_reward
    stats: dict[str, float | None] = {
        "episodes/success_rate": counted.success_rate,
        "episodes/failure_rate": counted.failure_rate,
        "episodes/turns_mean": counted.turns_mean,
        "episodes/turns_max": float(counted.turns_max),
        "episodes/tool_calls_per_episode": counted.tool_calls / n,
        "episodes/tool_success_rate": counted.tool_success_rate,
        "episodes/parse_error_rate": counted.parse_error_rate,
        "episodes/budget_hit_rate": counted.budget_hit_rate,
        "episodes/step_reward_mean": step.mean,
        "episodes/step_reward_std": step.std,
        "episodes/step_reward_min": step.min,
        "episodes/step_reward_max": step.max,
    }
    for reason, count in counted.stop_reasons.items():
        stats[f"episodes/stop/{reason}"] = count / n
    return {k: v for k, v in stats.items() if v is not None and math.isfinite(v)}


def render_trajectory_text(trajectory: Trajectory, limit: int = 600) -> str:
    """One episode as plain text, turn by turn (for tables: TRL's completions, wandb)."""

    def cut(text: str) -> str:
        return text if len(text) <= limit else text[:limit] + " ..."

    lines = []
    for message in trajectory.opening_messages:
        lines.append(f"[{message.role}] {cut(message.text)}")
    for turn in trajectory.turns:
        calls = "".join(
            f"\n  -> {c.function.name}({cut(c.function.arguments)})"
            for c in turn.assistant.tool_calls or []
        )
        lines.append(f"[assistant, turn {turn.index + 1}, reward {turn.reward:g}] "
                     f"{cut(turn.assistant.text)}{calls}")  # fmt: skip
        if turn.parse_error:
            lines.append(f"  !! parse error: {cut(turn.parse_error)}")
        for message in turn.environment:
            lines.append(f"[{message.role}] {cut(message.text)}")
    score = trajectory.episode_reward
    lines.append(
        f"== {trajectory.stop_reason.value}; episode reward "
        f"{'invalid' if score is None else f'{score:g}'}; success {trajectory.success}"
        + (f"; failure: {trajectory.failure.message}" if trajectory.failure else "")
    )
    return "\n".join(lines)


def single_turn_reward_funcs(
    env: ChatEnv, rewards: dict[str, RewardLike] | None = None
) -> RewardFuncs:
    """TRL reward functions for single-turn GRPO on an environment's tasks.

    Args:
        env: the environment; its episode rewards and weights are used unless ``rewards``.
        rewards: ``{name: reward}`` instead (weight 1 each).

    Returns:
        ``(reward_funcs, reward_weights)``; each function reads the ``task`` column of
        `rk_agent.trainers.tasks.env_dataset` for the ground truth and metadata.

    Raises:
        ConfigError: an imported environment's own reward scores only the episodes its
            sessions play, and its source cannot score a transcript alone.
    """
    if rewards is None:
        _check_scores_without_episodes(env)
        components = {name: get_reward_function(r) for name, r in env.episode_reward_specs.items()}
        weights = [env.episode_reward_weights.get(name, 1.0) for name in components]
    else:
        components = {name: get_reward_function(r) for name, r in rewards.items()}
        weights = [1.0] * len(components)
    funcs = [_with_task(name, to_trl_reward(fn, name=name)) for name, fn in components.items()]
    return funcs, weights


def _check_scores_without_episodes(env: ChatEnv) -> None:
    """Refuse an imported environment whose own reward scores only the episode its session
    plays (`ImportedEnv.score_recorded` not given by its source): single-turn GRPO plays none."""
    if not isinstance(env, ImportedEnv) or env.reward_name() not in env.episode_reward_specs:
        return
    if type(env).score_recorded is not ImportedEnv.score_recorded:
        return
    raise ConfigError(
        f"{env.env_name} cannot train single-turn (--single-turn): its reward "
        f"{env.reward_name()!r} scores an episode in the session that played it, and "
        "single-turn GRPO plays no episode (TRL generates one reply per prompt). Train it on "
        "whole episodes (drop --single-turn), or give a --reward that reads the transcript."
    )


def _with_task(name: str, adapter: Callable[..., Any]) -> RewardFunc:
    def reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list:
        tasks = kwargs.pop("task", None)
        if isinstance(tasks, list):
            decoded = [TaskTable.decode(t) for t in tasks]
            kwargs["ground_truth"] = [t.ground_truth for t in decoded]
            kwargs["metadata"] = [t.metadata for t in decoded]
        prompts = [[{k: v for k, v in m.items() if k in ("role", "content")} for m in p]
                   if isinstance(p, list) else p for p in prompts]  # fmt: skip
        return list(adapter(prompts, completions, **kwargs))

    return _named(reward, name)


def weighted_rewards(
    scores: Mapping[str, Sequence[Any]], names: Sequence[str], weights: Sequence[float]
) -> tuple[list[float | None], list[bool]]:
    """Each row's reward as TRL trains on it, from what the reward functions returned.

    The reward is the sum of ``weight x score`` over the functions that scored the row; a
    ``None`` score (or a value that is no number) is left out, as TRL leaves it out. A row no
    function scored, or one with a NaN or infinite score, has no reward (``None``), and the
    second list says which rows had a NaN or infinite score.

    Args:
        scores: each function's scores by name, one per row.
        names: the functions' names, in order.
        weights: their weights (``reward_weights``).

    Example:
        >>> weighted_rewards({"a": [1.0, None, 1.0], "b": [0.5, None, float("nan")]},
        ...                  ["a", "b"], [1.0, 2.0])
        ([2.0, None, None], [False, False, True])
    """
    rows = max((len(s) for s in scores.values()), default=0)
    rewards: list[float | None] = []
    nans: list[bool] = []
    for i in range(rows):
        total, seen, nan = 0.0, False, False
        for name, weight in zip(names, weights, strict=False):
            values = scores.get(name, [])
            score = values[i] if i < len(values) else None
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                continue
            if not math.isfinite(score):
                nan = True
                continue
            total += weight * float(score)
            seen = True
        rewards.append(total if seen and not nan else None)
        nans.append(nan)
    return rewards, nans
