"""Playing one episode: the fixed loop between a policy and an environment.

`play_episode` is the whole loop in one readable function: reset, then ask the policy, play the
turn (``ChatEnv.play_turn``, or ``ChatEnv.reject_turn`` for a reply that could not be parsed),
record it, until the environment says the episode is over. The tools the policy is offered
are read from the environment after the reset and again after every turn; an environment
whose tools differ per task or change between turns (``ChatEnv.tool_scope``) gets each
episode's tools and their changes recorded on its trajectory (``provenance``, also when
``record_provenance`` is off: `rk_agent.runs.provenance.ToolChange`). The loop reads only what the
environment returns (a typed `rk_agent.envs.turn.TurnResult`) and its public methods; it writes
no feedback and scores nothing itself. Environment code (tools, feedback, rewards) starts in a
worker thread, off the event loop (a daemon thread, `rk_agent.daemon_threads`: a step that
hangs past the episode's timeout is abandoned and cannot keep the run from returning), unless
the environment declares that its steps never block (``inline_steps``: the built-in ones whose
steps are quick, pure Python, do): then on the loop, where two thread hand-offs per turn would
cost more than the step itself. Failures are recorded on the trajectory, never raised: the
caller's failure policy decides what to do with them.

Main names: `EpisodeSlot`, `play_episode`; `step_turn` and `env_failure` build the records it
makes (TRL's tool loop, `rk_agent.trainers.trl_tool_env`, makes the same ones).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any

from rk_agent.daemon_threads import DaemonThreads
from rk_agent.envs.base import ChatEnv
from rk_agent.envs.offered_tools import ToolScope
from rk_agent.envs.task import Task
from rk_agent.envs.turn import TurnResult
from rk_agent.errors import ContextOverflowError, EndpointError, EnvError, ToolServerError
from rk_agent.policies.policy import Policy, PolicyOutput, SamplingParams, Usage
from rk_agent.runs.provenance import ToolChange, episode_provenance, turn_tool_call_format
from rk_agent.runs.trajectory import Failure, ToolCallOutcome, Trajectory, Turn
from rk_agent.types import (
    EpisodeReturn,
    EvaluateResult,
    FailureKind,
    FailureSite,
    Message,
    StopReason,
)

__all__ = ["EpisodeSlot", "env_failure", "play_episode", "step_turn"]


@dataclass(frozen=True)
class EpisodeSlot:
    """Which episode to play: task ``task_index``, sample ``sample``, reset with ``seed``.

    ``prefix``: recorded turns the episode starts with (a fork, `rk_agent.rollouts.fork`): they
    are played into the environment after the reset and kept as they were recorded, and the
    policy takes over from the next turn.
    """

    task_index: int
    sample: int
    seed: int
    options: dict[str, Any] | None = None
    prefix: tuple[Turn, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.task_index}-{self.sample}"


@dataclass
class _Recorder:
    """What an episode has produced so far; survives the episode's cancellation."""

    turns: list[Turn] = field(default_factory=list)
    prompt_tokens: int = 0  # summed over the turns (one `Usage` at the end, not one per turn)
    completion_tokens: int = 0
    episode: EvaluateResult | None = None
    stop_reason: StopReason | None = None
    failure: Failure | None = None
    opening: list[Message] | None = None  # set when the reset changed the task's messages
    tools: list[dict[str, Any]] | None = None  # the first turn's
    changes: list[ToolChange] = field(default_factory=list)  # and each later change
    formats: list[str | None] = field(default_factory=list)
    served: list[Any] = field(default_factory=list)


async def play_episode(
    env: ChatEnv,
    policy: Policy,
    slot: EpisodeSlot,
    *,
    sampling: SamplingParams,
    env_name: str,
    timeout_s: float | None = None,
    attempt: int = 1,
    record_provenance: bool = False,
) -> Trajectory:
    """Play one episode and return its trajectory (failures included, never raised).

    Args:
        env: the environment (reset here).
        policy: the model.
        slot: the task, sample and seed.
        sampling: sampling parameters (a per-sample seed is derived when ``sampling.seed``
            is set).
        env_name: recorded with the trajectory.
        timeout_s: wall-time limit for the whole episode.
        attempt: recorded with the trajectory (1 = first try).
        record_provenance: set the trajectory's ``provenance`` to what the model saw, in full
            (the tools offered, the tool-call format, the model the server answered as); a
            run directory trims it to what differs from the run's record as it appends it.
            An environment whose ``tool_scope`` is not ``env`` always records it.
    """
    started = time.perf_counter()
    record = _Recorder()
    if sampling.seed is not None:
        sampling = sampling.model_copy(update={"seed": sampling.seed + slot.sample})
    try:
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation (Ctrl-C)
        # that lands as the episode finishes, and the run then goes on as if nothing happened.
        async with asyncio.timeout(timeout_s):
            await _loop(env, policy, slot, sampling, record)
    except TimeoutError:
        record.stop_reason = StopReason.TIMEOUT
        record.failure = Failure(
            kind=FailureKind.TIMEOUT,
            message=f"the episode ran past its {timeout_s:g} s limit",
            where=FailureSite.ENGINE,
            retryable=True,
        )
    try:
        task = env.task
    except EnvError:  # reset itself failed: there is no task to record
        task = Task(id=f"unavailable-{slot.id}", messages=[])
    return Trajectory(
        id=slot.id,
        task_index=slot.task_index,
        sample=slot.sample,
        seed=slot.seed,
        task=task,
        opening=record.opening,
        env=env_name,
        model=policy.name,
        turns=record.turns,
        episode=record.episode,
        success=env.is_success(record.episode) if record.episode is not None else None,
        stop_reason=record.stop_reason or StopReason.ERROR,
        failure=record.failure,
        usage=Usage(prompt_tokens=record.prompt_tokens, completion_tokens=record.completion_tokens),
        wall_time_s=time.perf_counter() - started,
        attempt=attempt,
        provenance=(
            episode_provenance(record.tools, record.formats, record.served, record.changes)
            if record_provenance or env.tool_scope is not ToolScope.ENV
            else None
        ),
    )


async def _loop(
    env: ChatEnv, policy: Policy, slot: EpisodeSlot, sampling: SamplingParams, record: _Recorder
) -> None:
    try:
        await _env_call(env, "reset", seed=slot.seed, options=slot.options)
    except Exception as exc:
        record.failure = env_failure(exc, "reset")
        return
    opening = env.conversation  # what the policy is sent first (a hook may add to the task)
    if opening != env.task.messages:
        record.opening = opening
    tools = record.tools = env.tool_schemas or None
    for recorded in slot.prefix:  # a fork: the recorded turns restore the environment's state
        try:
            await _replay(env, recorded)
        except Exception as exc:
            record.failure = env_failure(exc, "step")
            return
        record.turns.append(recorded)
        tools = _offered(env, tools, record)
    while True:
        model_started = time.perf_counter()
        try:
            output = await policy.generate(env.conversation, tools, sampling)
        except ContextOverflowError as exc:
            record.failure = Failure(
                kind=FailureKind.CONTEXT_OVERFLOW, message=str(exc), where=FailureSite.POLICY
            )
            record.stop_reason = StopReason.TRUNCATED
            record.episode = await _env_call(env, "end_truncated")
            return
        except EndpointError as exc:
            record.failure = Failure(
                kind=FailureKind.MODEL_ERROR,
                message=str(exc),
                where=FailureSite.POLICY,
                retryable=exc.retryable,
            )
            return
        model_latency = output.latency_s or time.perf_counter() - model_started
        record.served.append(output.extra.get("served_model"))
        if tools:
            record.formats.append(turn_tool_call_format(policy, output))
        env_started = time.perf_counter()
        try:
            result = await _play(env, output)
        except Exception as exc:
            record.failure = env_failure(exc, "step")
            return
        env_latency = time.perf_counter() - env_started
        turn = step_turn(len(record.turns), output, result, model_latency, env_latency)
        record.turns.append(turn)
        if output.usage is not None:
            record.prompt_tokens += output.usage.prompt_tokens
            record.completion_tokens += output.usage.completion_tokens
        if result.done:
            record.episode = result.episode
            record.stop_reason = result.stop_reason
            return
        tools = _offered(env, tools, record)


def _offered(
    env: ChatEnv, tools: list[dict[str, Any]] | None, record: _Recorder
) -> list[dict[str, Any]] | None:
    """The tools the next turn offers, read from the environment; a change is recorded."""
    now = env.tool_schemas or None
    if now != tools:
        record.changes.append(ToolChange(turn=len(record.turns), tools=now or []))
    return now


async def _play(env: ChatEnv, output: PolicyOutput) -> TurnResult:
    """One turn: ``play_turn``, or ``reject_turn`` for a reply that could not be parsed (the
    feedback is the note of the format the policy read it with)."""
    if output.parse_error is not None:
        return await _env_call(
            env, "reject_turn", output.message, output.parse_error, tool_format=output.parse_format
        )
    return await _env_call(env, "play_turn", output.message)


async def _replay(env: ChatEnv, turn: Turn) -> TurnResult:
    """A recorded turn played again as it was (`rk_agent.runs.replay.replay_turn`)."""
    if turn.parse_error is not None:
        return await _env_call(
            env, "reject_turn", turn.assistant, turn.parse_error, feedback=turn.parse_feedback
        )
    return await _env_call(env, "play_turn", turn.assistant)


# As many as asyncio's default executor would have (daemon threads: the module docstring).
_step_threads = DaemonThreads(min(32, (os.cpu_count() or 1) + 4), "rk-env-step")


async def _env_call(env: ChatEnv, method: str, *args: Any, **kwargs: Any) -> Any:
    """``env.<method>(...)`` on the loop when the environment declares its steps never block
    (``inline_steps``), else on a worker thread (see the module docstring)."""
    call = getattr(env, method)
    if env.inline_steps:
        return call(*args, **kwargs)
    return await _step_threads.run(call, *args, **kwargs)


def step_turn(
    index: int,
    output: PolicyOutput,
    result: TurnResult,
    model_latency_s: float,
    env_latency_s: float,
) -> Turn:
    """The `Turn` record of one played turn: the reply, what the env answered, its reward.

    Args:
        index: the turn's position in the episode.
        output: the policy's reply (its message, tokens, usage).
        result: what the environment returned for it (``ChatEnv.play_turn`` or
            ``ChatEnv.reject_turn``).
        model_latency_s: seconds the policy took.
        env_latency_s: seconds the environment took.
    """
    step = result.step
    return Turn(
        index=index,
        assistant=output.message,
        environment=list(result.messages),
        tool_calls=[
            ToolCallOutcome(
                name=r.call.function.name,
                ok=r.result.ok,
                error_kind=r.result.error_kind,
                latency_s=r.result.latency_s,
            )
            for r in result.tool_calls
        ],
        reward=step.score,
        reward_valid=step.is_score_valid,
        reward_fault=EpisodeReturn.fault_of(step),
        metrics=step.metrics,
        parse_error=result.parse_error,
        prompt_token_ids=output.prompt_token_ids,
        token_ids=output.token_ids,
        logprobs=output.logprobs,
        usage=output.usage,
        finish_reason=output.finish_reason,
        model_latency_s=model_latency_s,
        env_latency_s=env_latency_s,
    )


def env_failure(exc: Exception, method: str) -> Failure:
    """The `Failure` of an episode whose environment raised in ``method`` (reset, step, ...).

    An MCP tool server that refused the credentials is an ``auth_error``; one that crashed and
    stayed down, a ``tool_server_error`` (`rk_agent.errors.ToolServerError`).
    """
    if isinstance(exc, ToolServerError):
        return Failure(
            kind=FailureKind.AUTH_ERROR if exc.auth else FailureKind.TOOL_SERVER_ERROR,
            message=str(exc),
            where=FailureSite.ENVIRONMENT,
            retryable=exc.retryable,
        )
    return Failure(
        kind=FailureKind.ENV_ERROR,
        message=f"the environment's {method}() raised {type(exc).__name__}: {exc}",
        where=FailureSite.ENVIRONMENT,
    )
