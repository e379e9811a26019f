"""A tool-style `ChatEnv` as the environment class TRL's ``environment_factory`` takes.

TRL 1.16 plays tool episodes itself when ``GRPOTrainer`` is given ``environment_factory``: it
builds one instance per concurrent rollout, calls ``reset(**row)`` with the dataset row, offers
the instance's public methods to the model as tools (their schemas come from the signatures and
Google-style docstrings, through transformers' ``get_json_schema``), calls the methods the model
asks for, and hands the instances to the reward functions (``environments=``).

`trl_env_class` makes that class for an environment. Its public methods are exactly the
environment's tools, built from ``env.tool_schemas`` so that TRL derives the same schemas
(`rk_agent.trainers.trl_tool_methods`). How an episode maps:

- ``reset(**row)`` resets the environment with the row's ``seed`` and plays the row's ``task``
  (the columns of `rk_agent.trainers.tasks.env_dataset`).
- A tool method runs the call through the environment's own ``ChatEnv.run_tool`` (argument
  checks, timeouts, errors written for the model) and returns the text rk-agent's loop would put
  in the ``tool`` message; the `ToolResult` is kept.
- TRL does not say where one assistant turn ends and the next begins, so the environment is
  stepped once the episode is over: `episode_trajectory` takes the messages TRL generated and
  plays each assistant message through ``ChatEnv.play_turn`` with the results already obtained
  (``tool_results=``), or ``ChatEnv.reject_turn`` for a call TRL could not parse (a reply with
  no call TRL read is read again in the trainer's text tool-call format, the one rk-agent's loop
  gives its policy, and a malformed call gets that format's feedback). Step rewards and metrics,
  ``max_turns``, the success rule and the episode score are the environment's own; the result is
  the `Trajectory` rk-agent's loop would record.

Main names: `TRLToolEnv`, `trl_env_class`, `episode_trajectory` (`scored_trajectory`: the one
already computed), `check_trl_compatible`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rk_agent.envs.base import ChatEnv
from rk_agent.envs.imported import ImportedEnv
from rk_agent.envs.offered_tools import ToolScope
from rk_agent.envs.task import Task
from rk_agent.envs.tool import ToolResult
from rk_agent.errors import ConfigError, DataError
from rk_agent.policies.policy import PolicyOutput
from rk_agent.rollouts.episode import env_failure, step_turn
from rk_agent.runs.trajectory import Failure, Trajectory, Turn
from rk_agent.tool_calls import DEFAULT_TOOL_CALL_FORMAT, ToolCallFormat, get_tool_call_format
from rk_agent.trainers.tasks import TaskTable
from rk_agent.trainers.trl_tool_methods import tool_method
from rk_agent.types import (
    EvaluateResult,
    FailureKind,
    FailureSite,
    FunctionCall,
    Message,
    StopReason,
    ToolCall,
)

__all__ = [
    "TRLToolEnv",
    "check_trl_compatible",
    "episode_trajectory",
    "scored_trajectory",
    "trl_env_class",
]

_RESERVED = frozenset({"reset", "get_reward", "env"})
_CUT = (
    "TRL's tool loop ended the episode before the environment did: the completion budget "
    "(max_completion_length) or max_tool_calling_iterations ran out"
)


def check_trl_compatible(env: ChatEnv, name: str) -> None:
    """Raise `ConfigError` unless TRL's tool loop can play ``env`` (see `trl_env_class`).

    TRL ends an episode at the first reply without a tool call and only ever answers with tool
    results, so an environment must offer tools and must not talk back with messages of its
    own (``ChatEnv.respond``); and it offers every rollout the tools of one class, so an
    environment's tools must not differ per task nor change between turns
    (``ChatEnv.tool_scope``).

    Args:
        env: an instance of the environment.
        name: how the user named it, for the message.
    """
    if env.tool_scope is not ToolScope.ENV:
        varies = "differ per task" if env.tool_scope is ToolScope.TASK else "change between turns"
        raise ConfigError(
            f"environment {name!r} cannot train with TRL's tool loop (--loop trl): its tools "
            f"{varies} (tool_scope {env.tool_scope.value!r}), and TRL 1.16's "
            "environment_factory offers every rollout the same tools, the methods of one class "
            "read once when the trainer starts. Train it with rk-agent's episode loop instead: "
            "--loop rk (rk_agent.grpo_trainer in a script)."
        )
    reasons = []
    if isinstance(env, ImportedEnv):  # every reply reaches its session: the class says
        if env.talks_back:
            reasons.append(f"it talks back with user messages (its {env.source_name} sessions do)")
    elif type(env).respond is not ChatEnv.respond:
        reasons.append(
            f"it talks back with user messages ({type(env).__name__} overrides ChatEnv.respond)"
        )
    if not env.tool_schemas:
        reasons.append("it offers no tools")
    if reasons:
        raise ConfigError(
            f"environment {name!r} cannot train with TRL's tool loop (--loop trl): "
            f"{' and '.join(reasons)}. TRL only answers tool calls and ends an episode at the "
            "first reply without one. Train it with rk-agent's episode loop instead: --loop rk "
            "(rk_agent.grpo_trainer in a script)."
        )


@dataclass(frozen=True)
class _Ran:
    """A tool call TRL made through a method: what it asked and what came back."""

    name: str
    arguments: dict[str, Any]
    result: ToolResult


class TRLToolEnv:
    """Base of the classes `trl_env_class` makes: one rk-agent environment per instance.

    TRL lists an instance's public methods as tools, so everything here but ``reset`` and the
    tool methods is private (or a property). A subclass sets ``_env_factory`` (builds the
    wrapped environment), ``_env_label`` (its name in trajectories) and ``_tool_format`` (the
    text tool-call format replies are checked in: the trainer's, as rk-agent's loop gives its
    policy).
    """

    _env_factory: ClassVar[Callable[[], ChatEnv]]
    _env_label: ClassVar[str] = "env"
    _tool_format: ClassVar[ToolCallFormat] = get_tool_call_format()

    def __init__(self) -> None:
        self._env = type(self)._env_factory()
        self._ran: list[_Ran] = []
        self._failure: Failure | None = None
        self._seed: int | None = None
        self._task: Task | None = None
        self._started = time.perf_counter()
        self._trajectory: Trajectory | None = None

    @property
    def env(self) -> ChatEnv:
        """The wrapped rk-agent environment."""
        return self._env

    def reset(self, **row: Any) -> None:
        """Start the episode of a dataset row: its ``task`` (JSON), reset with its ``seed``.

        Returns ``None``: the row's ``prompt`` already holds the opening messages.

        Raises:
            DataError: the row has no ``task`` column (build the dataset with
                `rk_agent.trainers.trl_env.trl_environment` or ``env_dataset``).
        """
        task_json = row.get("task")
        if not isinstance(task_json, str):
            raise DataError(
                f"a training row has no 'task' column (got columns {sorted(row)}); build the "
                "dataset with rk_agent.trl_environment(...).train_dataset or "
                "rk_agent.env_dataset, whose rows carry the task as JSON."
            )
        try:
            task = TaskTable.decode(task_json)
        except ValueError as exc:
            raise DataError(f"a training row's 'task' is not a task as JSON: {exc}") from exc
        self._task = task
        self._ran = []
        self._failure = None
        self._trajectory = None
        self._started = time.perf_counter()
        seed = row.get("seed")
        self._seed = int(seed) if seed is not None else None
        try:
            self._env.reset(seed=self._seed, options={"task": task})
        except Exception as exc:  # a failed reset is data: the episode's rewards become None
            self._failure = env_failure(exc, "reset")

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one call through the environment's ``run_tool``; the tool message's text."""
        if self._failure is not None:
            return f"Error: the environment failed: {self._failure.message}"
        call = ToolCall(
            id=f"call_{len(self._ran)}",
            function=FunctionCall(name=name, arguments=json.dumps(arguments, default=str)),
        )
        try:
            result = self._env.run_tool(call)
        except Exception as exc:  # as in rk-agent's loop: the episode fails, its rewards are None
            self._failure = env_failure(exc, "call_tool")
            return f"Error: the environment failed: {self._failure.message}"
        self._ran.append(_Ran(name, dict(arguments), result))
        return result.content

    def _episode(
        self, completion: Sequence[Mapping[str, Any]] | str, *, index: int, sample: int,
        model: str, step: int | None, episode_id: str | None = None,
    ) -> Trajectory:  # fmt: skip
        """Step the environment through TRL's episode (once; later calls return the same)."""
        if self._trajectory is None:
            replay = _Replay(self, model)
            self._trajectory = replay.run(completion, index, sample, step, episode_id)
        return self._trajectory


def trl_env_class(
    env_factory: Callable[[], ChatEnv],
    *,
    name: str,
    probe: ChatEnv | None = None,
    tool_call_format: str | ToolCallFormat = DEFAULT_TOOL_CALL_FORMAT,
) -> type[TRLToolEnv]:
    """The class to pass as ``GRPOTrainer(environment_factory=...)`` for an environment.

    Args:
        env_factory: builds one environment (called once per class instance).
        name: the environment's name (for messages, trajectories and the class name).
        probe: an environment built by ``env_factory`` already, to read the tools from.
        tool_call_format: the text tool-call format a reply TRL found no call in is read with
            (a call attempted in it is a parse error, with that format's feedback): the one
            rk-agent's loop would give its policy (`rk_agent.tool_calls.get_tool_call_format`).

    Raises:
        ConfigError: the environment cannot be played by TRL's tool loop
            (`check_trl_compatible`), or a tool's name cannot be a method name here.
        UnknownNameError: ``tool_call_format`` names no registered format.
    """
    tool_format = get_tool_call_format(tool_call_format)
    env = probe if probe is not None else env_factory()
    check_trl_compatible(env, name)
    methods: dict[str, Any] = {}
    for schema in env.tool_schemas:
        tool = str(schema["function"]["name"])
        if tool in _RESERVED or tool.startswith("_"):
            raise ConfigError(
                f"environment {name!r} has a tool named {tool!r}, which TRL's tool loop cannot "
                f"offer (it is reserved: {', '.join(sorted(_RESERVED))}, or starts with '_'). "
                "Rename the tool (@tool(name=...)) or use --loop rk."
            )
        methods[tool] = tool_method(schema)
    class_name = f"{type(env).__name__}ForTRL"
    namespace = {
        "_env_factory": staticmethod(env_factory),
        "_env_label": name,
        "_tool_format": tool_format,
        **methods,
    }
    namespace["__doc__"] = f"{type(env).__name__} for TRL's environment_factory (tools: "
    namespace["__doc__"] += f"{', '.join(methods)})."
    return type(class_name, (TRLToolEnv,), namespace)


def episode_trajectory(
    environment: TRLToolEnv,
    completion: Sequence[Mapping[str, Any]] | str,
    *,
    index: int = 0,
    sample: int = 0,
    model: str = "policy",
    step: int | None = None,
    episode_id: str | None = None,
) -> Trajectory:
    """The `Trajectory` of the episode TRL played on ``environment``, stepped by the env's rules.

    Each assistant message of ``completion`` (TRL's generated messages: assistant, tool, ...,
    assistant) is one ``ChatEnv.play_turn``, with the results of the calls TRL already made through
    the tool methods; calls TRL never ran (a tool name it did not know, or the last turn's calls
    when ``max_tool_calling_iterations`` ran out) are run by the environment now, as
    ``ChatEnv.play_turn`` would. A reply holding a ``<tool_call>`` TRL could not parse is a
    parse error (``ChatEnv.reject_turn``). An episode that TRL ended before the environment did
    is truncated and scored as such (stop reason ``truncated``, ``metadata["budget_hit"]``).
    Computed once per episode: later calls return the same trajectory.

    Args:
        environment: an instance of a `trl_env_class` class, after TRL's rollout.
        completion: the rollout's messages, as TRL passes them to reward functions.
        index: the row's position in the batch (recorded as ``task_index``).
        sample: which sample of its task this is.
        model: the policy's name, recorded.
        step: the training step, recorded in the metadata.
        episode_id: the trajectory's id (default: ``"<index>-<sample>"``); a training run
            names its episodes by their step (`rk_agent.trainers.episode_names`).
    """
    return environment._episode(
        completion, index=index, sample=sample, model=model, step=step, episode_id=episode_id
    )


def scored_trajectory(environment: TRLToolEnv) -> Trajectory | None:
    """The trajectory `episode_trajectory` computed for the environment's current episode,
    or ``None`` before it was asked for (after each ``reset``)."""
    return environment._trajectory


class _Replay:
    """Steps one `TRLToolEnv`'s environment through the messages TRL generated."""

    def __init__(self, owner: TRLToolEnv, model: str) -> None:
        self.owner = owner
        self.env = owner._env
        self.model = model
        self.pending = list(owner._ran)
        self.turns: list[Turn] = []
        self.failure = owner._failure
        self.episode: EvaluateResult | None = None
        self.stop: StopReason | None = None
        self.ignored = 0

    def run(
        self, completion: Sequence[Mapping[str, Any]] | str, index: int, sample: int,
        step: int | None, episode_id: str | None = None,
    ) -> Trajectory:  # fmt: skip
        messages = (
            [{"role": "assistant", "content": completion}]
            if isinstance(completion, str)
            else list(completion)
        )
        for message in messages:
            if self.failure is not None:
                break
            if message.get("role") != "assistant":
                continue
            if self.stop is not None:
                self.ignored += 1  # TRL went on past the environment's end (e.g. max_turns)
                continue
            self._step(message)
        budget_hit = self.failure is None and self.stop is None
        if budget_hit:
            self.failure = Failure(
                kind=FailureKind.CONTEXT_OVERFLOW, message=_CUT, where=FailureSite.POLICY
            )
            self.stop = StopReason.TRUNCATED
            self.episode = self.env.end_truncated()
        return self._trajectory(index, sample, step, budget_hit, episode_id)

    def _step(self, raw: Mapping[str, Any]) -> None:
        action = _assistant(raw, len(self.turns))
        parse_error = None
        tool_format = self.owner._tool_format
        if not action.tool_calls:  # TRL read no call: was one attempted, in the policy's format?
            reply = tool_format.parse(action.text, self.env.tool_schemas)
            if reply.parse_error is not None or reply.message.tool_calls:
                parse_error = reply.parse_error or "the tool call could not be parsed"
        started = time.perf_counter()
        try:
            if parse_error is not None:
                result = self.env.reject_turn(action, parse_error, tool_format=tool_format)
            else:
                result = self.env.play_turn(action, tool_results=self._results(action))
        except Exception as exc:
            self.failure = env_failure(exc, "step")
            return
        output = PolicyOutput(message=action, parse_error=parse_error, parse_format=tool_format)
        latency = time.perf_counter() - started
        self.turns.append(step_turn(len(self.turns), output, result, 0.0, latency))
        if result.done:
            self.episode = result.episode
            self.stop = result.stop_reason

    def _results(self, action: Message) -> list[ToolResult] | None:
        """The results TRL already has for the message's calls; the env runs any others."""
        calls = action.tool_calls or []
        if not calls:
            return None
        results = []
        for call in calls:
            ran = self.pending[0] if self.pending else None
            if ran is not None and ran.name == call.function.name:
                arguments = _arguments(call)
                if arguments == ran.arguments:
                    self.pending.pop(0)
                    results.append(ran.result)
                    continue
            results.append(self.env.run_tool(call))
        return results

    def _trajectory(
        self, index: int, sample: int, step: int | None, budget_hit: bool, episode_id: str | None
    ) -> Trajectory:
        env, episode = self.env, self.episode
        task = self.owner._task or Task(id="unavailable", messages=[])
        metadata: dict[str, Any] = {"loop": "trl", "budget_hit": budget_hit}
        if step is not None:
            metadata["train_step"] = step
        if self.ignored:
            metadata["turns_after_end"] = self.ignored
        if self.pending:
            metadata["unseen_tool_calls"] = len(self.pending)
        return Trajectory(
            id=episode_id or f"{index}-{sample}",
            task_index=index,
            sample=sample,
            seed=self.owner._seed,
            task=task,
            env=self.owner._env_label,
            model=self.model,
            turns=self.turns,
            episode=episode,
            success=env.is_success(episode) if episode is not None else None,
            stop_reason=self.stop or StopReason.ERROR,
            failure=self.failure,
            wall_time_s=time.perf_counter() - self.owner._started,
            metadata=metadata,
        )


def _arguments(call: ToolCall) -> dict[str, Any] | None:
    try:
        return call.function.parsed_arguments()
    except ValueError:
        return None


def _assistant(raw: Mapping[str, Any], turn: int) -> Message:
    """A message TRL parsed (``parse_response``) as an rk-agent assistant `Message`."""
    calls = []
    for number, item in enumerate(raw.get("tool_calls") or []):
        function = item.get("function") or {}
        calls.append(
            ToolCall(
                id=f"call_{turn}_{number}",
                function=FunctionCall(
                    name=str(function.get("name", "")), arguments=_json(function.get("arguments"))
                ),
            )
        )
    content = raw.get("content")
    return Message(role="assistant", content=content, tool_calls=calls or None)


def _json(arguments: Any) -> str:
    """Arguments as TRL parsed them (a dict, usually) as the JSON string rk-agent keeps."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments or {}, default=str)
