"""`check_env`: does an environment follow Gymnasium's API and rk-agent's contract?

Run it on your own environment in a test; every built-in passes it with warnings as errors.

Main names:
    check_env: Gymnasium's ``check_env`` plus rk-agent's checks (below).
    play_with_solver: play one episode synchronously with a solver function (no event loop, no
        engine), e.g. an environment's reference solver.
    PlayedEpisode: what `play_with_solver` returns; its return (`PlayedEpisode.episode_return`)
        follows `EpisodeReturn`'s rule, as a rollout's trajectory does.

rk-agent's checks (the first two run before Gymnasium's, the third after):

1. ``reset(seed=s)`` twice gives the same task and observation, for every checked seed; for
   generated tasks, seeds 0-9 do not all give the same task.
2. The tool schemas are valid: ``{"type": "function", "function": {...}}`` with a valid, unique
   name, a description and a JSON-schema object for the parameters.
3. With the environment's reference solver (when it has one), every checked seed's episode
   ends with ``terminated`` (not truncated) and a valid, positive episode reward.

Example:
    >>> check_env("guess")
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.registry import EnvLike, checked_env_class
from rk_agent.envs.task import Task
from rk_agent.envs.turn import TurnResult
from rk_agent.errors import EnvError
from rk_agent.types import EpisodeReturn, EvaluateResult, Message, StopReason

__all__ = ["PlayedEpisode", "check_env", "play_with_solver"]

_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@dataclass
class PlayedEpisode:
    """One episode played by `play_with_solver`.

    Attributes:
        task: the task played.
        messages: the whole conversation.
        rewards: the reward of every step, as Gymnasium's ``step`` gives it (the last one
            includes the episode reward; an invalid score counts 0 there, Gymnasium wants a
            number).
        step_results: every step's `EvaluateResult`.
        episode: the episode's `EvaluateResult`.
        terminated: the episode ended normally (an answer, or the environment ended it).
        stop_reason: why it ended.
        turns: every turn's `TurnResult`, in order (what the rollout engine records too).
    """

    task: Task
    messages: list[Message]
    rewards: list[float] = field(default_factory=list)
    step_results: list[EvaluateResult] = field(default_factory=list)
    episode: EvaluateResult | None = None
    terminated: bool = False
    stop_reason: StopReason | None = None
    turns: list[TurnResult] = field(default_factory=list)

    @property
    def episode_return(self) -> EpisodeReturn:
        """The episode's return, by the rule a rollout's trajectory follows
        (`EpisodeReturn`): no number when a step's or the episode's score is invalid."""
        return EpisodeReturn.of(
            self.episode, ((s.score, s.is_score_valid, s.fault) for s in self.step_results)
        )

    @property
    def total_reward(self) -> float | None:
        """The return's number (`episode_return`): the step rewards plus the episode score,
        ``None`` when a score is missing or invalid."""
        return self.episode_return.value


def play_with_solver(
    env: ChatEnv,
    solver: Callable[..., Any],
    *,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
) -> PlayedEpisode:
    """Play one episode: ``reset``, then ``play_turn(solver(messages, tools))`` until it ends.

    Args:
        env: the environment.
        solver: ``solver(messages, tools)`` returning the assistant's `Message` (or its text,
            or an OpenAI message dict), e.g. ``env.reference_solver``.
        seed: passed to ``reset``.
        options: passed to ``reset``.

    Example:
        >>> from rk_agent.envs.guess_env import GuessEnv
        >>> env = GuessEnv(high=100)
        >>> played = play_with_solver(env, env.reference_solver, seed=1)
        >>> played.terminated, played.episode.metrics["solved"].score
        (True, 1.0)
    """
    env.reset(seed=seed, options=options)
    played = PlayedEpisode(task=env.task, messages=[])
    while True:
        reply = solver(env.conversation, env.tool_schemas)
        action = Message(role="assistant", content=reply) if isinstance(reply, str) else reply
        turn = env.play_turn(action)
        played.turns.append(turn)
        played.rewards.append(turn.reward)
        played.step_results.append(turn.step)
        if turn.done:
            played.episode = turn.episode
            played.terminated = turn.terminated
            played.stop_reason = turn.stop_reason
            played.messages = env.conversation
            return played


def check_env(
    env: ChatEnv | EnvLike,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    use_solver: bool = True,
    **kwargs: Any,
) -> None:
    """Check an environment against Gymnasium's API and rk-agent's contract.

    Args:
        env: an environment instance, or anything `get_env_class` resolves (``"tools"``,
            ``"file.py::MyEnv"``, the class). Given a name or class, the environment is built
            with ``gymnasium.make`` (so Gymnasium can also check its render modes and
            ``close``); given an instance without a spec, those two checks are skipped.
        seeds: the seeds checked for determinism and played with the reference solver.
        use_solver: play the checked seeds with the environment's reference solver, if it
            has one.
        **kwargs: constructor arguments, when ``env`` is not an instance.

    Raises:
        EnvError: a check failed (the message says which and how).
        AssertionError: one of Gymnasium's checks failed (Gymnasium raises these).

    Example:
        >>> check_env("math", retries=1)
    """
    import gymnasium
    from gymnasium.utils.env_checker import check_env as gymnasium_check_env

    if isinstance(env, ChatEnv):
        instance = env
    else:
        cls = checked_env_class(env, kwargs)  # a typo fails here, with "did you mean"

        def create(**arguments: Any) -> ChatEnv:
            return cls(**arguments)

        spec = gymnasium.envs.registration.EnvSpec(
            id=f"rk_agent_check/{cls.__name__}-v0", entry_point=create, kwargs=kwargs
        )
        made = gymnasium.make(spec, disable_env_checker=True).unwrapped
        if not isinstance(made, ChatEnv):  # a wrapper could in principle hide it
            raise EnvError(f"check_env: gymnasium.make built a {type(made).__name__}.")
        instance = made
    try:
        _check(instance, seeds, use_solver, gymnasium_check_env)
    finally:  # also when a check fails: an environment may hold processes (MCP servers)
        instance.close()


def _check(env: ChatEnv, seeds: Sequence[int], use_solver: bool, gymnasium_check: Any) -> None:
    label = type(env).__name__
    # Ours first: on the mistakes both catch, ours say how to fix them.
    _check_determinism(env, seeds, label)
    _check_tool_schemas(env.tool_schemas, label)
    gymnasium_check(env, skip_render_check=env.spec is None)
    if env.spec is None and env.render_mode == "ansi":
        env.reset(seed=0)
        if not isinstance(env.render(), str):
            raise EnvError(f"check_env({label}): render() in 'ansi' mode must return a str.")
    solver = env.reference_solver
    if use_solver and solver is not None:
        for seed in seeds:
            _check_solved(play_with_solver(env, solver, seed=seed), seed, label)


def _check_determinism(env: ChatEnv, seeds: Sequence[int], label: str) -> None:
    for seed in seeds:
        first, first_info = env.reset(seed=seed)
        second, second_info = env.reset(seed=seed)
        if first != second or first_info["task"] != second_info["task"]:
            raise EnvError(
                f"check_env({label}): reset(seed={seed}) gave different tasks on two calls. "
                "Draw every random choice in generate_task from its `rng` argument (never "
                "from `random` or an unseeded generator)."
            )
    if env.dataset is None:
        ids = {env.reset(seed=seed)[1]["task"].id for seed in range(10)}
        if len(ids) == 1:
            raise EnvError(
                f"check_env({label}): seeds 0-9 all gave the same task; generate_task should "
                "draw the task from its `rng` argument (and give distinct tasks distinct ids)."
            )


def _check_tool_schemas(schemas: list[dict[str, Any]], label: str) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    problems: list[str] = []
    names: list[str] = []
    for index, schema in enumerate(schemas):
        function = schema.get("function")
        if schema.get("type") != "function" or not isinstance(function, dict):
            problems.append(f"tool {index} is not {{'type': 'function', 'function': {{...}}}}")
            continue
        name = function.get("name")
        names.append(str(name))
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            problems.append(f"tool {index} has an invalid name {name!r} (1-64 of [a-zA-Z0-9_-])")
        if not isinstance(function.get("description"), str) or not function["description"]:
            problems.append(f"tool {name!r} has no description")
        parameters = function.get("parameters")
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            problems.append(f"tool {name!r}: parameters must be a JSON schema of type 'object'")
            continue
        try:
            Draft202012Validator.check_schema(parameters)
        except SchemaError as exc:
            problems.append(f"tool {name!r}: parameters are not a valid JSON schema: {exc.message}")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        problems.append(f"tool names appear more than once: {duplicates}")
    if problems:
        raise EnvError(f"check_env({label}): bad tool schemas: " + "; ".join(problems) + ".")


def _check_solved(played: PlayedEpisode, seed: int, label: str) -> None:
    episode = played.episode
    if not played.terminated or episode is None:
        raise EnvError(
            f"check_env({label}): the reference solver did not finish seed {seed} "
            f"({played.stop_reason.value if played.stop_reason else 'no stop reason'}); the "
            "episode should end with terminated=True before max_turns."
        )
    if not episode.is_score_valid or episode.score <= 0:
        raise EnvError(
            f"check_env({label}): the reference solver's episode for seed {seed} has reward "
            f"{episode.score:g} (valid: {episode.is_score_valid}): {episode.reason}. A solved "
            "episode should have a valid, positive reward."
        )
