"""`ChatEnv`: a Gymnasium environment for multi-turn chat with tools and decorated rewards.

The loop is fixed; subclasses override small hooks:

- `ChatEnv.generate_task`: make a task from a seeded generator (or pass ``tasks=`` / a JSONL path);
- `ChatEnv.tools`: the `Tool`s the model may call (``mcp=`` adds the tools of MCP servers, see
  `rk_agent.mcp`); `ChatEnv.episode_tools`: the tools of one episode, for environments whose
  tools differ per task or change between turns (``tool_scope``, `rk_agent.envs.offered_tools`);
- `ChatEnv.respond`: the environment's reply to an assistant message without tool calls
  (feedback for another turn, or ``None`` to end the episode: the final answer);
- `ChatEnv.on_reset`: per-episode state (e.g. a game's secret);
- rewards: ``step_rewards`` scored after every step, ``episode_rewards`` (weighted) at the end;
  both are decorated reward functions (or names / paths of them).

``reset(seed)`` returns the conversation so far (a list of OpenAI message dicts) and an ``info``
holding the tool schemas and the task (`ChatEnv.tool_schemas` says what is offered now: read
it again after every step of an environment whose ``tool_scope`` is ``turn``);
``step(assistant_message)`` runs its tool calls, returns the new conversation, the step reward
(plus the episode reward on the last step), and ``info`` with every `EvaluateResult`. The same
seed gives the same task.

Loops that play an environment (the rollout engine, TRL's tool loop, `check_env`) use the typed
methods ``step`` wraps instead: `ChatEnv.play_turn` and `ChatEnv.reject_turn` return a
`TurnResult`; `ChatEnv.conversation` and `ChatEnv.task` say what the policy sees;
`ChatEnv.run_tool` runs one call an outer loop made; `ChatEnv.end_truncated` ends an episode the
policy could not go on with (its context is full) and scores it.

Main names: `ChatEnv`, `EpisodeState`, `ToolCallRecord` (defined in `rk_agent.envs.turn`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import gymnasium
import numpy as np

from rk_agent.envs.env_rewards import weighted_reward
from rk_agent.envs.offered_tools import EpisodeTool, OfferedTools, ToolScope, offer
from rk_agent.envs.spaces import ConversationSpace, MessageSpace
from rk_agent.envs.task import Task, load_tasks
from rk_agent.envs.tool import Tool, ToolResult
from rk_agent.envs.tool_source import ToolSource, merge_tools
from rk_agent.envs.turn import ToolCallRecord, TurnResult
from rk_agent.errors import ConfigError, EnvError
from rk_agent.rewards.registry import RewardLike
from rk_agent.tool_calls import ToolCallFormat, get_tool_call_format
from rk_agent.types import EvaluateResult, Message, MetricResult, StepOutput, StopReason, ToolCall

__all__ = ["ChatEnv", "EpisodeState", "ToolCallRecord"]


@dataclass
class EpisodeState:
    """The running state of one episode (internal; not a wire format).

    Attributes:
        task: the task being played.
        messages: the whole conversation so far.
        turn: completed assistant turns.
        steps: the per-step rewards so far.
        done: set by a hook to end the episode after this step.
        scratch: free space for the environment's own per-episode state.
    """

    task: Task
    messages: list[Message]
    turn: int = 0
    steps: list[StepOutput] = field(default_factory=list)
    done: bool = False
    scratch: dict[str, Any] = field(default_factory=dict)


class ChatEnv(gymnasium.Env[list[dict[str, Any]], Any]):
    """Base class of every rk-agent environment; see the module docstring for the hooks.

    Args:
        tasks: a list of `Task`, or a JSONL path, instead of generated tasks.
        max_turns: assistant turns before the episode is truncated.
        episode_rewards: ``{name: reward}`` scored on the whole episode (replaces the env's
            defaults). A reward is a decorated function, a registered name or a path.
        episode_weights: weight per episode reward (default 1.0 each).
        step_rewards: ``{name: reward}`` scored after every step (replaces the defaults).
        render_mode: ``"ansi"`` or ``None``.
        mcp: tools from MCP servers, offered next to `tools` (a started
            `rk_agent.mcp.McpServers`, or any `rk_agent.envs.tool_source.ToolSource`); the
            servers outlive the environment. A name two tools share is a `ConfigError`.
    """

    # Gymnasium declares `metadata` as an instance attribute, so no ClassVar here.
    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012
    default_max_turns: ClassVar[int] = 6
    default_episode_rewards: ClassVar[Mapping[str, RewardLike]] = {}
    default_episode_weights: ClassVar[Mapping[str, float]] = {}
    default_step_rewards: ClassVar[Mapping[str, RewardLike]] = {}
    # A function ``(messages, tools) -> Message`` that solves this env's tasks, or None. Set it
    # with ``reference_solver = staticmethod(solve)``; tests, SFT warm starts and benchmarks use it.
    reference_solver: ClassVar[Callable[..., Any] | None] = None
    # The environment's declaration of whether its steps may block, which says where the
    # rollout engine calls reset/play_turn: False (the default, the safe choice for user code)
    # on a worker thread, so that a step that waits on the network or hangs neither holds up
    # the other episodes nor outlives the episode's timeout; True on the event loop (steps
    # that are quick, pure Python: the built-in environments' declaration). True holds only
    # where everything a step calls agrees: an instance with a tool not declared `inline`
    # (MCP tools among them) or with rewards given to its constructor (user code that may
    # block) runs its steps on a thread.
    inline_steps: bool = False
    # When the tools offered may change (`ToolScope`): ENV, the same in every episode; TASK, per
    # task (`episode_tools` after reset); TURN, also between turns (after every turn too).
    # Instances may set it in __init__, before calling ChatEnv's.
    tool_scope: ToolScope = ToolScope.ENV

    def __init__(
        self,
        *,
        tasks: Sequence[Task] | str | Path | None = None,
        max_turns: int | None = None,
        episode_rewards: Mapping[str, RewardLike] | None = None,
        episode_weights: Mapping[str, float] | None = None,
        step_rewards: Mapping[str, RewardLike] | None = None,
        render_mode: str | None = None,
        mcp: ToolSource | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(
                f"render_mode {render_mode!r} is not supported; use one of "
                f"{self.metadata['render_modes']} or None."
            )
        self.render_mode = render_mode
        self.observation_space = ConversationSpace()
        self.action_space = MessageSpace()
        self.max_turns = max_turns if max_turns is not None else self.default_max_turns
        if self.max_turns < 1:
            raise ConfigError(f"max_turns must be at least 1, got {self.max_turns}.")
        self.dataset: list[Task] | None = (
            load_tasks(tasks) if isinstance(tasks, (str, Path)) else list(tasks) if tasks else None
        )
        self._toolset = mcp.open_toolset() if mcp is not None else None
        outside = self._toolset.tools() if self._toolset is not None else []
        self._tools: dict[str, Tool] = merge_tools(self.tools(), outside, type(self).__name__)
        self._outside = outside
        self._offering = OfferedTools(tuple(t.schema for t in self._tools.values()), self._tools)
        if self.inline_steps and (
            episode_rewards is not None
            or step_rewards is not None
            or self.tool_scope is not ToolScope.ENV
            or not all(getattr(t, "inline", False) for t in self._tools.values())
        ):
            self.inline_steps = False  # something a step calls may block (see `inline_steps`)
        self._step_reward = weighted_reward(
            step_rewards if step_rewards is not None else self.default_step_rewards, None, "step"
        )
        if episode_rewards is None:
            episode_rewards = self.default_episode_rewards
            episode_weights = episode_weights or self.default_episode_weights
        self._episode_reward = weighted_reward(episode_rewards, episode_weights, "episode")
        # Trainers log each component on its own (``rewards/<name>``).
        self.episode_reward_specs: dict[str, RewardLike] = dict(episode_rewards)
        self.episode_reward_weights: dict[str, float] = {
            name: float((episode_weights or {}).get(name, 1.0)) for name in episode_rewards
        }
        self._state: EpisodeState | None = None

    # ---------------------------------------------------------------- hooks

    def generate_task(self, rng: np.random.Generator) -> Task:
        """Make one task from ``rng`` (seeded by ``reset``). Override in generated-task envs."""
        raise ConfigError(
            f"{type(self).__name__} has no task generator: pass tasks=[...] or a JSONL path."
        )

    def tools(self) -> list[Tool]:
        """The tools the model may call (default: none)."""
        return []

    def episode_tools(self, state: EpisodeState) -> Sequence[EpisodeTool] | None:
        """The tools offered on the episode's next turn, for a ``tool_scope`` other than ENV.

        Called after ``reset`` (after `on_reset`) and, with scope TURN, after every turn that
        does not end the episode; never with scope ENV. The tools of MCP servers (``mcp=``)
        are offered after these. A `Tool` is run by the default `call_tool`; a bare OpenAI
        schema is offered only, and your `call_tool` runs it. ``None`` (the default): the
        environment's own `tools`.
        """
        return None

    def on_reset(self, state: EpisodeState) -> None:
        """Set up per-episode state in ``state.scratch`` (default: nothing)."""

    def respond(self, action: Message, state: EpisodeState) -> list[Message] | None:
        """The environment's reply to an assistant message that calls no tool.

        Return ``None`` to end the episode (the message was the final answer), or messages
        (feedback) for another turn. Set ``state.done`` to end after replying.
        """
        return None

    def call_tool(self, call: ToolCall, state: EpisodeState) -> ToolResult:
        """Run one tool call (default: the offered `Tool` of that name).

        Raises:
            EnvError: the tool is offered as a bare schema (`episode_tools`) and this method
                was not overridden to run it.
        """
        found = self._offering.runnable.get(call.function.name)
        if found is None:
            offered = [s["function"]["name"] for s in self._offering.schemas]
            if call.function.name in offered:
                raise EnvError(
                    f"{type(self).__name__} offers {call.function.name!r} as a bare schema but "
                    "does not run it: override call_tool to run the tools episode_tools offers "
                    "as schemas, or offer Tool objects."
                )
            known = ", ".join(sorted(offered)) or "none"
            return ToolResult(
                f"Error: there is no tool named {call.function.name!r}. Available: {known}.",
                ok=False,
                error_kind="unknown_tool",
            )
        return found.run(call.function.arguments)

    # ---------------------------------------------------------------- the fixed loop

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The OpenAI schemas of the tools the model is offered now (a new list): the
        environment's own and its MCP servers'; during an episode of a ``tool_scope`` other
        than ENV, the episode's (`episode_tools`), which may change after a turn (scope TURN)."""
        return list(self._offering.schemas)

    @property
    def tool_origins(self) -> dict[str, str]:
        """Where each offered tool that is not the environment's own comes from, by name
        (``{"lookup": "MCP server 'kb'"}``); ``{}`` when every tool is its own."""
        origins = {name: getattr(tool, "origin", None) for name, tool in self._tools.items()}
        return {name: origin for name, origin in origins.items() if isinstance(origin, str)}

    @property
    def state(self) -> EpisodeState:
        """The current episode's state. Raises `EnvError` before the first ``reset``."""
        if self._state is None:
            raise EnvError(f"{type(self).__name__}: call reset() before step().")
        return self._state

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Start an episode.

        Args:
            seed: picks the task (same seed, same task).
            options: ``{"task": Task | dict}`` plays that task; ``{"task_index": i}`` picks
                task ``i`` of the dataset.

        Returns:
            The opening conversation and ``info`` with ``tools`` (schemas) and ``task``.
        """
        super().reset(seed=seed)
        task = self._choose_task(options or {})
        if self._toolset is not None:
            self._toolset.start_episode()
        self._state = EpisodeState(task=task, messages=[m.model_copy() for m in task.messages])
        self.on_reset(self._state)
        if self.tool_scope is not ToolScope.ENV:
            self._offer(self._state)
        info = {"tools": self.tool_schemas, "task": task}
        return self._observation(), info

    @property
    def conversation(self) -> list[Message]:
        """The whole conversation so far (a new list): what the policy answers next."""
        return list(self.state.messages)

    @property
    def task(self) -> Task:
        """The task being played. Raises `EnvError` before the first ``reset``."""
        return self.state.task

    def step(
        self, action: Message | dict[str, Any], tool_results: Sequence[ToolResult] | None = None
    ) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        """Play one assistant turn (Gymnasium's API over `play_turn`).

        Args:
            action: the assistant message.
            tool_results: as for `play_turn`.

        Returns:
            ``(observation, reward, terminated, truncated, info)``. ``reward`` is the step's
            score, plus the weighted episode score on the last step. ``info`` holds ``step``
            (the step's `EvaluateResult`), ``tool_calls`` (`ToolCallRecord`s), ``episode``
            (the episode's `EvaluateResult`, on the last step) and ``stop_reason``.

        Raises:
            EnvError: as `play_turn`.
        """
        return self._gymnasium(self.play_turn(action, tool_results))

    def play_turn(
        self, action: Message | dict[str, Any], tool_results: Sequence[ToolResult] | None = None
    ) -> TurnResult:
        """Play one assistant turn: run its tool calls, or let the environment respond.

        Args:
            action: the assistant message.
            tool_results: the results of the message's tool calls when an outer tool loop has
                already run them through `run_tool` (TRL's, see `rk_agent.trainers.trl_env`):
                one per call, in order. They are recorded and scored as if run here; the tools
                are not called again.

        Returns:
            The `TurnResult`: the messages the environment added, the step's score, the tool
            records and, on the last turn, the episode's score and stop reason.

        Raises:
            EnvError: ``reset`` was not called, the episode is already over, or
                ``tool_results`` does not have one result per tool call.
        """
        message = _as_assistant(action)
        if tool_results is not None and len(tool_results) != len(message.tool_calls or []):
            raise EnvError(
                f"{type(self).__name__}.play_turn: got {len(tool_results)} tool results for "
                f"{len(message.tool_calls or [])} tool calls; give one result per call, in order."
            )
        return self._play(message, parse_error=None, tool_results=tool_results)

    def reject(
        self,
        action: Message | dict[str, Any],
        reason: str,
        feedback: str | None = None,
        *,
        tool_format: str | ToolCallFormat | None = None,
    ) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        """Play a turn whose output could not be used (Gymnasium's API over `reject_turn`).

        Args:
            action: the unusable assistant message (kept as the model wrote it).
            reason: what was wrong, recorded in the ``parse_error`` metric.
            feedback: the text the model is shown (default: `parse_error_feedback`'s).
            tool_format: the text tool-call format the reply was read with, as for
                `reject_turn`.

        Returns:
            What `step` returns.
        """
        turn = self.reject_turn(action, reason, tool_format=tool_format, feedback=feedback)
        return self._gymnasium(turn)

    def reject_turn(
        self,
        action: Message | dict[str, Any],
        parse_error: str,
        *,
        tool_format: str | ToolCallFormat | None = None,
        feedback: str | None = None,
    ) -> TurnResult:
        """Play a turn whose output could not be used, e.g. a malformed tool call.

        The message is recorded, the model is told what was wrong (a user message with
        `parse_error_feedback`'s text) and may try again, and the step carries a
        ``parse_error`` metric (score -1) so the penalty is visible. It counts towards
        ``max_turns``.

        The tool-call format is the policy's, not the environment's: the loop that played the
        turn passes the format the reply was read with (``PolicyOutput.parse_format`` in
        rk-agent's loop, the trainer's format in TRL's).

        Args:
            action: the unusable assistant message (kept as the model wrote it).
            parse_error: what was wrong, recorded in the ``parse_error`` metric.
            tool_format: the text tool-call format the reply was read with (a
                `rk_agent.tool_calls.ToolCallFormat` or its name; ``None``: the default,
                Hermes); its note is the default feedback.
            feedback: the text the model is shown, instead of `parse_error_feedback`'s.

        Returns:
            The `TurnResult`, with ``parse_error`` set.

        Raises:
            UnknownNameError: ``tool_format`` names no registered format.
        """
        if feedback is None:
            feedback = self.parse_error_feedback(parse_error, get_tool_call_format(tool_format))
        return self._play(_as_assistant(action), parse_error=parse_error, feedback=feedback)

    def parse_error_feedback(self, parse_error: str, tool_format: ToolCallFormat) -> str:
        """The text the model is shown after a reply that could not be used.

        Default: ``tool_format``'s note (what was wrong, and the form the format expects).
        Override it to word the feedback yourself.

        Args:
            parse_error: what was wrong with the reply.
            tool_format: the text tool-call format the policy read the reply with.
        """
        return tool_format.feedback(parse_error)

    def run_tool(self, call: ToolCall) -> ToolResult:
        """Run one tool call of the current episode through `call_tool`, outside a turn.

        For outer tool loops (TRL's) that run calls as the model makes them and hand the
        results to `play_turn` afterwards. Raises `EnvError` before ``reset``.
        """
        return self.call_tool(call, self.state)

    def end_truncated(self) -> EvaluateResult:
        """End the episode early because the policy cannot go on, and score it.

        For a conversation that outgrew the model's context, or a token budget that ran out:
        the episode is over (stop reason ``truncated``) and scored as it stands.

        Returns:
            The episode's `EvaluateResult`.

        Raises:
            EnvError: ``reset`` was not called, or the episode is already over.
        """
        state = self.state
        if state.done:
            raise EnvError(f"{type(self).__name__}: the episode is over; call reset().")
        state.done = True
        return self.score_episode(state, StopReason.TRUNCATED)

    def close(self) -> None:
        """Release the environment's share of its MCP servers (the servers stay up)."""
        toolset = getattr(self, "_toolset", None)  # None too when __init__ failed early
        if toolset is not None:
            toolset.close()
        super().close()

    def is_success(self, episode: EvaluateResult) -> bool:
        """Whether an episode counts as solved (default: a valid score of at least 1.0)."""
        return episode.is_score_valid and episode.score >= 1.0 - 1e-9

    def _gymnasium(
        self, result: TurnResult
    ) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        return (
            self._observation(),
            result.reward,
            result.terminated,
            result.truncated,
            result.info(),
        )

    def _play(
        self,
        message: Message,
        parse_error: str | None,
        feedback: str | None = None,
        tool_results: Sequence[ToolResult] | None = None,
    ) -> TurnResult:
        state = self.state
        if state.done:
            raise EnvError(f"{type(self).__name__}: the episode is over; call reset().")
        state.messages.append(message)
        answer_starts = len(state.messages)
        state.turn += 1
        records: list[ToolCallRecord] = []
        answered = False
        if parse_error is not None:
            state.messages.append(Message(role="user", content=feedback or parse_error))
        elif message.tool_calls:
            for index, call in enumerate(message.tool_calls):
                if tool_results is not None:
                    result = tool_results[index]
                else:
                    result = self.call_tool(call, state)
                records.append(ToolCallRecord(call, result))
                state.messages.append(
                    Message(role="tool", tool_call_id=call.id, name=call.function.name,
                            content=result.content)
                )  # fmt: skip
        else:
            reply = self.respond(message, state)
            if reply is None:
                answered = True
            else:
                state.messages.extend(Message.coerce_list(reply))  # dicts are fine too
        step_result = self._score_step(state, records, parse_error)
        terminated = answered or state.done
        truncated = not terminated and state.turn >= self.max_turns
        if self.tool_scope is ToolScope.TURN and not (terminated or truncated):
            self._offer(state)  # what the next turn offers
        episode, stop = None, None
        if terminated or truncated:
            state.done = True
            stop = StopReason.ANSWERED if terminated else StopReason.MAX_TURNS
            episode = self.score_episode(state, stop)
        return TurnResult(
            messages=tuple(state.messages[answer_starts:]),
            step=step_result,
            tool_calls=tuple(records),
            terminated=terminated,
            truncated=truncated,
            episode=episode,
            stop_reason=stop,
            parse_error=parse_error,
        )

    def score_episode(self, state: EpisodeState, stop_reason: StopReason) -> EvaluateResult:
        """The episode's `EvaluateResult` (the weighted episode rewards, with step outputs)."""
        if self._episode_reward is None:
            result = EvaluateResult(score=0.0, reason="no episode rewards configured")
        else:
            result = self._episode_reward(**self._reward_kwargs(state, stop_reason=stop_reason))
        # The combined reward's result is a new object each call (`combine`): set, not copy.
        result.step_outputs = list(state.steps)
        return result

    def render(self) -> str | None:
        """The conversation as text (``render_mode="ansi"``)."""
        if self.render_mode != "ansi" or self._state is None:
            return None
        lines = []
        for m in self._state.messages:
            calls = "".join(
                f"\n  -> {c.function.name}({c.function.arguments})" for c in m.tool_calls or []
            )
            lines.append(f"[{m.role}] {m.text}{calls}")
        return "\n".join(lines)

    # ---------------------------------------------------------------- internals

    def _choose_task(self, options: dict[str, Any]) -> Task:
        if "task" in options:
            task = options["task"]
            return task if isinstance(task, Task) else Task.model_validate(task)
        if self.dataset is not None:
            index = options.get("task_index")
            if index is None:
                index = int(self.np_random.integers(len(self.dataset)))
            return self.dataset[index % len(self.dataset)]
        return self.generate_task(self.np_random)

    def _offer(self, state: EpisodeState) -> None:
        tools = self.episode_tools(state)
        if tools is None:
            self._offering = OfferedTools(
                tuple(t.schema for t in self._tools.values()), self._tools
            )
        else:
            self._offering = offer(tools, self._outside, type(self).__name__)

    def _observation(self) -> list[dict[str, Any]]:
        return [m.to_openai() for m in self.state.messages]

    def _reward_kwargs(self, state: EpisodeState, **extra: Any) -> dict[str, Any]:
        return {
            "messages": state.messages,
            "ground_truth": state.task.ground_truth,
            "metadata": state.task.metadata,
            "turn": state.turn,
            **extra,
        }

    def _score_step(
        self, state: EpisodeState, records: list[ToolCallRecord], parse_error: str | None
    ) -> EvaluateResult:
        metrics: dict[str, MetricResult] = {}
        if parse_error is not None:
            metrics["parse_error"] = MetricResult(score=-1.0, success=False, reason=parse_error)
        if records:
            ok = sum(r.result.ok for r in records)
            metrics["tool_calls"] = MetricResult(score=float(len(records)))
            metrics["tool_success"] = MetricResult(
                score=ok / len(records),
                success=ok == len(records),
                reason="; ".join(r.result.content[:120] for r in records if not r.result.ok)
                or None,
            )
        if self._step_reward is not None:
            result = self._step_reward(**self._reward_kwargs(state, tool_calls=records))
            if metrics:  # a new object each call (`combine`): set, not copy
                result.metrics = {**metrics, **result.metrics}
        else:
            result = EvaluateResult(score=0.0, metrics=metrics)
        state.steps.append(
            StepOutput(step_index=state.turn - 1, reward=result.score,
                          metrics=result.metrics, reason=result.reason)
        )  # fmt: skip
        return result


def _as_assistant(action: Message | dict[str, Any]) -> Message:
    try:
        message = Message.coerce(action)
    except ValueError as exc:
        raise EnvError(f"the action must be an assistant message (OpenAI format): {exc}") from exc
    if message.role != "assistant":
        raise EnvError(f"the action must be an assistant message, got role {message.role!r}.")
    return message
