"""`check_env`: the contract check of `rk_agent.envs.check`, and with ``adversarial=True`` the
probe catalogue played as policies against the environment.

Each probe plays one episode per seed (one per variant; its worst variant counts), next to two
baselines: the reference solver, and an honest wrong answer, the reference solver answering
another task's question (the question of the next seed with another ground truth put in place
of this one's, so its tool calls are real and its answer is wrong). Per row the report has the
mean total reward (step rewards included), the mean episode reward (``outcome``), and each
episode component (``steps``: the step rewards' sum); the flags are those of
`rk_agent.soundness.flags`, with the reference's episode reward checked against ``max_score``.
Before either, the reference solver's episode is played through the rollout engine and replayed
into the environment (`check_replay`): an environment whose replay differs is not deterministic
under its seed, and a run of it could not be replayed, forked or compared fairly.

Main names: `check_env`, `check_replay`, `env_kind`.

Example:
    >>> report = check_env("guess", adversarial=True, episodes=2)
    >>> report.row("reference").outcome
    1.0
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, overload

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.check import check_env as check_contract, play_with_solver
from rk_agent.envs.registry import EnvLike, make_env
from rk_agent.errors import ConfigError, EnvError
from rk_agent.policies.function_policy import FunctionPolicy
from rk_agent.policies.policy import SamplingParams
from rk_agent.rollouts.episode import EpisodeSlot, play_episode
from rk_agent.runs.replay import replay_trajectory
from rk_agent.soundness.catalogue import catalogue
from rk_agent.soundness.flags import Played, Score, judge, worst
from rk_agent.soundness.probes import KINDS, Probe, ProbeView
from rk_agent.soundness.report import SoundnessReport
from rk_agent.soundness.reward_check import call_probe
from rk_agent.types import Message

__all__ = ["check_env", "env_kind"]

_KINDS = {"code": "code", "math": "math"}


class _Skip(Exception):
    """A probe does not apply to this episode."""


def env_kind(env: ChatEnv) -> str:
    """The probe kind of an environment: ``tools`` when it offers tools, ``code`` / ``math`` for
    those built-ins, else ``generic``."""
    if env.tool_schemas:
        return "tools"
    return _KINDS.get(getattr(env, "env_name", ""), "generic")


@overload
def check_env(
    env: ChatEnv | EnvLike,
    *,
    adversarial: Literal[False] = False,
    seeds: Sequence[int] = ...,
    use_solver: bool = ...,
    **kwargs: Any,
) -> None: ...
@overload
def check_env(
    env: ChatEnv | EnvLike,
    *,
    adversarial: Literal[True],
    seeds: Sequence[int] = ...,
    use_solver: bool = ...,
    episodes: int = ...,
    probes: Sequence[Probe] = ...,
    builtin_probes: bool = ...,
    kind: str | None = ...,
    max_score: float | None = ...,
    **kwargs: Any,
) -> SoundnessReport: ...
@overload
def check_env(
    env: ChatEnv | EnvLike,
    *,
    adversarial: bool,
    seeds: Sequence[int] = ...,
    use_solver: bool = ...,
    episodes: int = ...,
    probes: Sequence[Probe] = ...,
    builtin_probes: bool = ...,
    kind: str | None = ...,
    max_score: float | None = ...,
    **kwargs: Any,
) -> SoundnessReport | None: ...


def check_env(
    env: ChatEnv | EnvLike,
    *,
    adversarial: bool = False,
    seeds: Sequence[int] = (0, 1, 2),
    use_solver: bool = True,
    episodes: int = 10,
    probes: Sequence[Probe] = (),
    builtin_probes: bool = True,
    kind: str | None = None,
    max_score: float | None = 1.0,
    **kwargs: Any,
) -> SoundnessReport | None:
    """Check an environment's contract; with ``adversarial=True`` also play the probes.

    Args:
        env: an environment instance, or anything `rk_agent.envs.get_env_class` resolves.
        adversarial: also play the probe catalogue (and ``probes``) and return the report.
        seeds: the seeds of the contract check (`rk_agent.envs.check.check_env`).
        use_solver: the contract check plays its seeds with the reference solver.
        episodes: probe episodes per row: seeds ``0 .. episodes - 1``.
        probes: your own probes (`rk_agent.soundness.probes.Probe`), played as policies.
        builtin_probes: play the built-in catalogue for the environment's kind.
        kind: the probe kind (`KINDS`); default `env_kind`.
        max_score: the episode reward the reference solver should reach (``None``: no check).
        **kwargs: constructor arguments, when ``env`` is not an instance.

    Returns:
        ``None`` without ``adversarial``; else the `SoundnessReport`.

    With ``use_solver`` (the default) the reference solver's episode is also replayed into the
    environment and must come out as recorded (`check_replay`: a determinism check).

    Raises:
        EnvError: a contract check failed, or the replay differs; ConfigError: the environment
            has no reference solver (needed for the baselines), a bad kind, or a probe that
            raised.

    Example:
        >>> check_env("guess")
    """
    check_contract(env, seeds=seeds, use_solver=use_solver, **kwargs)
    instance = env if isinstance(env, ChatEnv) else make_env(env, **kwargs)
    try:
        if use_solver:
            check_replay(instance, seed=seeds[0] if seeds else 0)
        if not adversarial:
            return None
        return _probe_env(
            instance, episodes, probes, builtin_probes, kind, max_score, _label(env, instance)
        )
    finally:
        if instance is not env:
            instance.close()


def check_replay(env: ChatEnv, *, seed: int = 0) -> None:
    """Is ``env`` deterministic? Play one episode with its reference solver through the
    rollout engine, then replay it into ``env`` (`rk_agent.runs.replay`): every observation,
    step reward and the episode's result must come out as recorded. Nothing to do for an
    environment without a reference solver.

    Raises:
        EnvError: the replay differs (the first difference is named): the environment depends
            on something its seed does not fix (an unseeded random tool, the clock, a service),
            so a run of it cannot be replayed or forked, nor its groups compared fairly.
    """
    solver = env.reference_solver
    if solver is None:
        return
    # As the engine plans it (`plan_slots`): a dataset's task 0 is its row 0.
    options = {"task_index": 0} if env.dataset is not None else None
    slot = EpisodeSlot(task_index=0, sample=0, seed=seed, options=options)
    play = play_episode(env, FunctionPolicy(solver), slot, sampling=SamplingParams(),
                        env_name=type(env).__name__)  # fmt: skip
    with ThreadPoolExecutor(1) as pool:  # its own event loop, whether or not one is running
        trajectory = pool.submit(asyncio.run, play).result()
    if trajectory.failure is not None:
        raise EnvError(
            f"check_env: the reference solver's episode (seed {seed}) failed before it could "
            f"be replayed: {trajectory.failure.kind.value}: {trajectory.failure.message}"
        )
    report = replay_trajectory(env, trajectory)
    difference = report.first_difference
    if difference is not None:
        at = f" at turn {difference.turn}" if difference.turn is not None else ""
        raise EnvError(
            f"check_env: {type(env).__name__} is not deterministic: replaying the reference "
            f"solver's episode (seed {seed}) differs{at}: {difference.describe()}. "
            "Seed every source of randomness from reset(seed=...) (self.np_random), and keep "
            "the clock and outside services out of observations and rewards."
        )


def _label(env: ChatEnv | EnvLike, instance: ChatEnv) -> str:
    if isinstance(env, str):
        return env
    return getattr(instance, "env_name", None) or type(instance).__name__


def _probe_env(
    env: ChatEnv,
    episodes: int,
    probes: Sequence[Probe],
    builtin_probes: bool,
    kind: str | None,
    max_score: float | None,
    label: str,
) -> SoundnessReport:
    solver = env.reference_solver
    if solver is None:
        why = getattr(env, "no_solver_reason", None)  # an imported environment says why
        raise ConfigError(
            f"check_env(adversarial=True) needs the environment's reference solver for its "
            f"baselines; {label} has none: {why}. Check its contract alone with "
            "rk_agent.envs.check_env."
            if why
            else f"check_env(adversarial=True) needs the environment's reference solver for its "
            f"baselines; {type(env).__name__} has none. Give the class one with "
            "`reference_solver = staticmethod(solve)`."
        )
    kind = kind or env_kind(env)
    if kind not in KINDS:
        raise ConfigError(f"unknown probe kind {kind!r}; expected one of {', '.join(KINDS)}.")
    if episodes < 2:
        raise ConfigError(f"episodes must be at least 2 (the wrong answer of one is another's), "
                          f"got {episodes}.")  # fmt: skip
    played_probes = [*(catalogue(kind) if builtin_probes else []), *probes]
    questions = _questions(env, episodes)
    rows = [
        Played("reference", "reference", "the environment's reference solver"),
        Played("wrong", "wrong", "an honest wrong answer: the solver on another task's question"),
        *(Played(p.name, "probe", p.description) for p in played_probes),
    ]
    finals: dict[int, Message] = {}
    for seed in range(episodes):
        rows[0].scores[seed] = _play(env, solver, seed, finals)
    for seed in range(episodes):
        other = _other(questions, seed)
        if other not in finals:
            _play(env, solver, other, finals)
        wrong = _honest_wrong(solver, questions[seed][0], questions[other][0], finals[other])
        rows[1].scores[seed] = _play(env, wrong, seed)
        for row, candidate in zip(rows[2:], played_probes, strict=True):
            variants = []
            for variant in range(max(1, candidate.variants)):
                policy = _policy(candidate, solver, wrong, kind, variant)
                try:
                    variants.append(_play(env, policy, seed))
                except _Skip:
                    break
            else:
                row.scores[seed] = worst(variants)
                continue
            row.skipped += 1
    return judge(
        target=label, checked="env", kind=kind, cases=episodes, max_score=max_score, played=rows
    )


def _questions(env: ChatEnv, episodes: int) -> list[tuple[str, str]]:
    """``(question, ground-truth key)`` of each seed (and a few more, to find other answers)."""
    out = []
    for seed in range(episodes + 5):
        task = env.reset(seed=seed)[1]["task"]
        question = next((m.text for m in task.messages if m.role == "user"), "")
        out.append((question, repr(task.ground_truth)))
    return out


def _other(questions: list[tuple[str, str]], seed: int) -> int:
    """The next seed whose task has another question and another ground truth."""
    mine = questions[seed]
    for other in [*range(seed + 1, len(questions)), *range(seed)]:
        if questions[other][1] != mine[1] and questions[other][0] != mine[0]:
            return other
    raise ConfigError(
        "check_env(adversarial=True): every seed gave the same answer, so there is no honest "
        "wrong answer (another task's); give the environment varied tasks."
    )


Solver = Callable[..., Any]


def _honest_wrong(solver: Solver, mine: str, other: str, other_final: Message) -> Solver:
    """The honest wrong answer: in an environment with tools, the solver's calls, then the
    final reply of another task; without tools, the solver shown another task's question (or,
    when the solver knows no answer to it, that task's final reply)."""

    def wrong(messages: list[Message], tools: Any = None) -> Any:
        if tools:
            reference = _reply(solver, messages, tools)
            return reference if reference is not None and reference.tool_calls else other_final
        shown = [
            m.model_copy(update={"content": m.text.replace(mine, other)}) if m.role == "user" else m
            for m in messages
        ]
        try:
            return solver(shown, tools)
        except EnvError:
            # A solver that answers only the episodes open now (an imported environment's:
            # the answer lives with the episode's session) knows no answer to the other
            # task's question shown here; its own reply to that task is the same wrong answer.
            return other_final

    return wrong


def _reply(solver: Solver, messages: list[Message], tools: Any) -> Message | None:
    try:
        reply = solver(messages, tools)
    except Exception:  # the solver off its own path (after a probe's move): no reference here
        return None
    return Message(role="assistant", content=reply) if isinstance(reply, str) else reply


def _policy(candidate: Probe, solver: Solver, wrong: Solver, kind: str, variant: int) -> Solver:
    turn = 0

    def policy(messages: list[Message], tools: Any = None) -> Message:
        nonlocal turn
        view = ProbeView(
            messages=list(messages),
            tools=list(tools or []),
            reference=_reply(solver, messages, tools),
            wrong=_reply(wrong, messages, tools),
            kind=kind,
            turn=turn,
            variant=variant,
        )
        turn += 1
        reply = call_probe(candidate, view)
        if reply is None:
            raise _Skip
        return reply

    return policy


def _play(
    env: ChatEnv, policy: Solver, seed: int, finals: dict[int, Message] | None = None
) -> Score:
    played = play_with_solver(env, policy, seed=seed)
    if finals is not None:  # the reference's last reply, another seed's honest wrong answer
        finals[seed] = next(m for m in reversed(played.messages) if m.role == "assistant")
    episode, returned = played.episode, played.episode_return
    if episode is None or returned.value is None:
        invalid = [s for s in played.step_results if not s.is_score_valid]
        bad = episode if episode is not None and not episode.is_score_valid else None
        reason = (bad.error or bad.reason) if bad else (invalid[0].error if invalid else None)
        return Score(None, error=reason or "no episode reward")
    steps = returned.steps
    weights = env.episode_reward_weights
    components = {name: metric.score for name, metric in episode.metrics.items() if name in weights}
    weighted = {name for name, w in weights.items() if w and name in components}
    components["steps"] = steps  # the step rewards' sum: a component of the total too
    weighted.add("steps")
    return Score(returned.value, episode.score, components, frozenset(weighted))
