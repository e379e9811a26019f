"""``openenv:URL``: an OpenEnv server's environment, played as an rk-agent environment.

``make_env("openenv:ws://127.0.0.1:8000")`` (or ``http://``, ``wss://``, ``https://``; ``pip
install 'rk-agent[openenv]'``) builds an `OpenEnvEnv` that opens one WebSocket session of the
server per episode (`rk_agent.interop.openenv.connection`), so a rollout plays as many episodes
at once as it has workers, each in its own session:

- the task is a seed (``generate_task``; or ``tasks=`` whose metadata holds ``seed`` and
  ``reset``, more arguments of the reset), and the reset's observation is the opening
  (`rk_agent.interop.openenv.wire.observation_messages`), after ``system_prompt`` if given; a
  generated task records that opening as its messages;
- tools: when the server's action schema (``GET /schema``, read once per URL) takes MCP tool
  calls, each episode lists its tools (``list_tools``, so they may differ per task: scope
  ``task``; not asked when the reset's answer lists them, as ``rk-agent openenv serve``'s
  does, `rk_agent.interop.openenv.wire.listed_tools`) and every tool call is a ``call_tool``
  step;
- a reply without tool calls is a step with the text action (the schema's one string field,
  TextArena's ``message``; or ``action_field=``) when the server takes one, and its observation
  is the next user message; when it takes none (an MCP environment) the reply ends the episode;
- the server's ``done`` ends the episode; its per-step rewards are recorded on every turn (the
  ``openenv_step`` step reward's ``server_reward`` metric; counted as the step's score with
  ``step_reward=True``);
- the episode reward ``openenv`` is the last reward the server gave (``reward="last"``, the
  default: a game's outcome, a rubric's score at the end) or their sum (``reward="sum"``); an
  episode in which the server gave none is an invalid score unless ``default_reward`` is set,
  and a reward that is not a finite number is an invalid score;
- the server's failures (unreachable, refused, at capacity, dropped, no answer in
  ``timeout_s``) fail the episode (`rk_agent.errors.ToolServerError`), never score it 0;
- each session is closed when its episode ends, when a step fails, and when the environment
  closes (a rollout closes its environments on Ctrl-C too).

The server's token, if it wants one, is read from the variable ``OPENENV_TOKEN`` and sent as
``Authorization: Bearer <token>``; it is written nowhere. A run from elsewhere that names an
``openenv:`` environment asks for trust first (`OpenEnvSource.wants`).

Main names: `SOURCE`, `OpenEnvSource`, `OpenEnvEnv`, `TOKEN_VARIABLE`.
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np

from rk_agent.envs.base import ChatEnv, EpisodeState
from rk_agent.envs.imported import BaseSession, ImportedEnv
from rk_agent.envs.offered_tools import EpisodeTool, ToolScope
from rk_agent.envs.sources import EnvSource
from rk_agent.envs.task import Task
from rk_agent.envs.tool import ToolResult, decode_arguments
from rk_agent.errors import ConfigError, EnvError, ToolServerError
from rk_agent.interop.openenv.connection import Connection
from rk_agent.interop.openenv.wire import (
    ActionSchema,
    Endpoints,
    endpoints,
    listed_tools,
    observation_messages,
    read_action_schema,
    reward_of,
    tool_result,
    tool_schemas,
)
from rk_agent.rewards.decorator import RewardFn, reward_function
from rk_agent.types import EvaluateResult, Message, MetricResult, StopReason, ToolCall

__all__ = ["SOURCE", "TOKEN_VARIABLE", "OpenEnvEnv", "OpenEnvSource"]

TOKEN_VARIABLE = "OPENENV_TOKEN"
"""The environment variable holding the token an OpenEnv server wants (none when unset)."""

_SESSION = "session"  # where ImportedEnv keeps the episode's session in state.scratch


class _Session(BaseSession):
    """One episode: one WebSocket session of the server."""

    def __init__(self, env: OpenEnvEnv) -> None:
        self.env = env
        self.connection = Connection(
            env.ends,
            token=os.environ.get(TOKEN_VARIABLE) or None,
            open_timeout_s=env.connect_timeout_s,
            timeout_s=env.timeout_s,
        )
        self.rewards: list[tuple[int, float]] = []  # (turn, reward) of every rewarded step
        self.turn = 0
        self.done = False
        self.invalid: str | None = None  # why the server said its reward is not valid
        self._opening: list[Message] = []
        self._tools: list[dict[str, Any]] | None = None

    # ------------------------------------------------------------------ talking to the server

    def _call(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """One request; any failure closes the session before it is raised."""
        try:
            return self.connection.request(message)
        except BaseException:
            self.close()
            raise

    def _step(self, action: Mapping[str, Any]) -> dict[str, Any]:
        data = self._call({"type": "step", "data": dict(action)})
        self._record(data)
        return data

    def _record(self, data: Mapping[str, Any]) -> None:
        reward = reward_of(data)
        if reward is not None:
            self.rewards.append((self.turn, reward))
        metadata = data.get("metadata")
        if isinstance(metadata, Mapping) and metadata.get("reward_valid") is False:
            self.invalid = str(metadata.get("error") or "the server says its reward is invalid")
        if data.get("done") is True:
            self.done = True

    def open(self, reset: Mapping[str, Any]) -> None:
        """Connect, reset and list the tools: the episode's opening. A server whose reset
        answer lists the tools (`rk_agent.interop.openenv.wire.listed_tools`; ``rk-agent
        openenv serve`` does) is not asked for them again."""
        try:
            self.connection.open()
        except BaseException:
            self.close()
            raise
        answer = self._call({"type": "reset", "data": dict(reset)})
        self._record(answer)
        self.rewards.clear()  # a reset's reward is not the episode's
        system = [Message(role="system", content=self.env.system_prompt)]
        self._opening = (system if self.env.system_prompt else []) + observation_messages(
            answer, self.env.observation_field
        )
        if self.env.action.tools:
            listed = listed_tools(answer)
            if listed is None:
                listed = tool_schemas(self._call({"type": "step", "data": {"type": "list_tools"}}))
            self._tools = listed

    # ------------------------------------------------------------------ Session

    def opening(self) -> list[Message] | None:
        return self._opening

    def tools(self) -> Sequence[EpisodeTool] | None:
        return self._tools or None

    def call_tool(self, call: ToolCall) -> ToolResult:
        name = call.function.name
        if self._tools is None or name not in {t["function"]["name"] for t in self._tools}:
            known = ", ".join(t["function"]["name"] for t in self._tools or []) or "none"
            return ToolResult(
                f"Error: there is no tool named {name!r}. Available: {known}.", False,
                "unknown_tool",
            )  # fmt: skip
        if self.done:
            return ToolResult("Error: the episode is over; the call was not made.", False)
        arguments, error = decode_arguments(name, call.function.arguments)
        if error is not None:
            return ToolResult(error, False, "bad_arguments")
        data = self._step({"type": "call_tool", "tool_name": name, "arguments": arguments})
        return tool_result(data)

    def respond(self, reply: Message) -> list[Message] | None:
        field = self.env.action.text_field
        if field is None or self.done:
            return None  # no text action: the reply is the final answer
        data = self._step({field: reply.text})
        if self.done:
            return None
        return observation_messages(data, self.env.observation_field)

    def verify(self, messages: list[Message]) -> EvaluateResult:
        values = [reward for _, reward in self.rewards]
        done = MetricResult(score=float(self.done), success=self.done)
        metrics = {"server_done": done, "rewarded_steps": MetricResult(score=float(len(values)))}
        if self.invalid is not None:
            return EvaluateResult.invalid(f"the server: {self.invalid}")
        if not all(math.isfinite(v) for v in values):
            return EvaluateResult.invalid(
                f"the server gave a reward that is not a number ({values})"
            )
        if not values:
            if self.env.default_reward is None:
                return EvaluateResult.invalid(
                    "the server gave no reward in this episode (set default_reward to score "
                    "such episodes)"
                )
            return EvaluateResult(
                score=self.env.default_reward, metrics=metrics,
                reason=f"the server gave no reward: default_reward {self.env.default_reward:g}",
            )  # fmt: skip
        if self.env.reward == "sum":
            score, why = sum(values), f"the sum of the server's {len(values)} rewards"
        else:
            score, why = values[-1], "the server's last reward"
        return EvaluateResult(score=score, metrics=metrics, reason=f"{why}: {score:g}")

    def turn_reward(self, turn: int) -> float | None:
        """The sum of the rewards the server gave during ``turn`` (``None``: none)."""
        found = []
        for at, reward in reversed(self.rewards):  # in turn order: this turn's are the last
            if at < turn:
                break
            if at == turn:
                found.append(reward)
        return sum(reversed(found)) if found else None

    def close(self) -> None:
        """Close the session (idempotent; safe from any thread)."""
        self.connection.close()


class OpenEnvEnv(ImportedEnv):
    """Play an OpenEnv server's environment: one WebSocket session per episode.

    Made by the ``openenv`` source for one URL (``openenv:ws://127.0.0.1:8000``); see the module
    docstring for what maps to what.

    Args:
        reward: the episode reward: ``"last"`` (the server's last reward) or ``"sum"``.
        default_reward: the score of an episode in which the server gave no reward (``None``:
            an invalid score).
        step_reward: count the server's rewards of each turn as the turn's step score
            (trainers add step scores to the episode's; with ``reward="sum"`` that counts them
            twice).
        action_field: the string field of the server's text action (default: read from its
            schema).
        observation_field: the observation field the model reads (default: see
            `rk_agent.interop.openenv.wire.observation_messages`).
        system_prompt: a system message before the reset's observation.
        reset_kwargs: more arguments of every reset (``{"split": "test"}``).
        timeout_s: the most one answer of the server may take.
        connect_timeout_s: the most a connection may take.
        **kwargs: see `ChatEnv`.

    Raises:
        ConfigError: a bad argument, or a server whose ``/schema`` is not OpenEnv's.
        ToolServerError: the server cannot be reached.
    """

    url: ClassVar[str] = ""
    source_name: ClassVar[str] = "openenv"
    default_max_turns: ClassVar[int] = 20
    no_solver_reason: ClassVar[str | None] = (
        "an OpenEnv server keeps its answers to itself, so there is no reference solver to play"
    )
    tool_scope = ToolScope.TASK
    inline_steps = False  # every step waits on the server
    _schemas: ClassVar[dict[str, dict[str, Any]]] = {}
    _schemas_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        *,
        reward: Literal["last", "sum"] = "last",
        default_reward: float | None = None,
        step_reward: bool = False,
        action_field: str | None = None,
        observation_field: str | None = None,
        system_prompt: str | None = None,
        reset_kwargs: Mapping[str, Any] | None = None,
        timeout_s: float = 60.0,
        connect_timeout_s: float = 10.0,
        **kwargs: Any,
    ) -> None:
        if not self.url:
            raise ConfigError(
                "OpenEnvEnv is made by the openenv source: name it 'openenv:ws://HOST:PORT' "
                "(make_env, --env)."
            )
        if reward not in ("last", "sum"):
            raise ConfigError(f"reward must be 'last' or 'sum', got {reward!r}.")
        if not (timeout_s > 0 and connect_timeout_s > 0):
            raise ConfigError("timeout_s and connect_timeout_s must be positive.")
        self.reward = reward
        self.default_reward = None if default_reward is None else float(default_reward)
        self.step_reward = step_reward
        self.observation_field = observation_field
        self.system_prompt = system_prompt
        self.reset_kwargs = dict(reset_kwargs or {})
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.ends: Endpoints = endpoints(self.url)
        self.action: ActionSchema = read_action_schema(self._action_schema(), action_field)
        if self.action.text_field is None and not self.action.tools:
            raise ConfigError(
                f"the OpenEnv server at {self.url} takes neither tool calls nor a text action "
                "rk-agent can find in its action schema; name its text field with "
                "action_field=..."
            )
        self._live = _Live()
        weakref.finalize(self, self._live.shutdown)  # an environment dropped without close()
        if kwargs.get("step_rewards") is None:
            kwargs["step_rewards"] = {"openenv_step": self._server_step_reward()}
        super().__init__(**kwargs)

    def generate_task(self, rng: np.random.Generator) -> Task:
        """A seed for the server's reset (the server makes the task from it)."""
        seed = int(rng.integers(2**31))
        return Task(id=f"seed-{seed}", messages=[], metadata={"seed": seed})

    def open_session(self, task: Task) -> _Session:
        """Open the episode's session: connect, reset with the task's seed, list the tools."""
        reset = dict(self.reset_kwargs)
        extra = task.metadata.get("reset")
        if isinstance(extra, Mapping):
            reset.update(extra)
        seed = task.metadata.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            reset["seed"] = seed
        session = _Session(self)
        self._live.connection = session.connection
        session.open(reset)
        return session

    # ---------------------------------------------------------------- ChatEnv's hooks

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Start an episode: a session of the server, reset with the task's seed. A generated
        task (a seed) gets the server's opening as its messages, so that it can prompt a model
        as any task does (a training set's rows)."""
        observation, info = super().reset(seed=seed, options=options)
        state = self.state
        if not state.task.messages:
            opening = [m.model_copy() for m in state.messages]
            state.task = state.task.model_copy(update={"messages": opening})
        info["task"] = state.task
        return observation, info

    def call_tool(self, call: ToolCall, state: EpisodeState) -> ToolResult:
        """Run the call as a ``call_tool`` step; the server's ``done`` ends the episode."""
        session = _session_of(state)
        session.turn = state.turn
        result = session.call_tool(call)
        if session.done:
            state.done = True
        return result

    def respond(self, action: Message, state: EpisodeState) -> list[Message] | None:
        """Send the reply as the text action (see the module docstring)."""
        session = _session_of(state)
        session.turn = state.turn
        return session.respond(action)

    def score_episode(self, state: EpisodeState, stop_reason: StopReason) -> EvaluateResult:
        """Score the episode, then close its session."""
        try:
            return super().score_episode(state, stop_reason)
        finally:
            session = state.scratch.get(_SESSION)
            if isinstance(session, _Session):
                session.close()

    def close(self) -> None:
        """Close the episode's session."""
        try:
            super().close()
        finally:
            live = getattr(self, "_live", None)  # None when __init__ failed early
            if live is not None:
                live.shutdown()

    # ---------------------------------------------------------------- internals

    def _action_schema(self) -> dict[str, Any]:
        """The server's action schema (``GET /schema``), fetched once per URL."""
        with self._schemas_lock:
            found = self._schemas.get(self.url)
        if found is not None:
            return found
        schema = _fetch_schema(self.ends, self.connect_timeout_s)
        with self._schemas_lock:
            return self._schemas.setdefault(self.url, schema)

    def _server_step_reward(self) -> RewardFn:
        env = self

        @reward_function(
            name="openenv_step", description="the rewards the OpenEnv server gave in a turn"
        )
        def openenv_step(turn: int) -> EvaluateResult:  # (no messages: it reads none)
            state = env._state
            session = state.scratch.get(_SESSION) if state is not None else None
            reward = session.turn_reward(turn) if isinstance(session, _Session) else None
            if reward is None:
                return EvaluateResult(score=0.0, reason="no reward from the server this turn")
            metric = MetricResult(score=reward, reason="the server's rewards this turn")
            return EvaluateResult(
                score=reward if env.step_reward and math.isfinite(reward) else 0.0,
                metrics={"server_reward": metric}, reason=f"the server gave {reward:g}",
            )  # fmt: skip

        return openenv_step


class _Live:
    """What an environment holds open: its episode's connection. Kept apart from the
    environment so that a finalizer can close it when it is dropped unclosed (a rollout
    replaces an environment whose step timed out)."""

    def __init__(self) -> None:
        self.connection: Connection | None = None

    def shutdown(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            connection.close()


def _session_of(state: EpisodeState) -> _Session:
    session = state.scratch.get(_SESSION)
    if not isinstance(session, _Session):
        raise EnvError("the episode has no OpenEnv session: call reset() first.")
    return session


def _fetch_schema(ends: Endpoints, timeout_s: float) -> dict[str, Any]:
    import httpx

    token = os.environ.get(TOKEN_VARIABLE)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = f"{ends.http}/schema"
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_s, trust_env=False)
    except httpx.HTTPError as exc:
        raise ToolServerError(
            f"cannot reach the OpenEnv server at {ends.url} ({url}: {type(exc).__name__}: "
            f"{exc}); is it running?",
            server=f"openenv:{ends.url}", retryable=True, url=url,
        ) from None  # fmt: skip
    if response.status_code in (401, 403):
        raise ToolServerError(
            f"the OpenEnv server at {ends.url} refused {url}: HTTP {response.status_code} (set "
            f"{TOKEN_VARIABLE} to its token).",
            server=f"openenv:{ends.url}", auth=True, status=response.status_code, url=url,
        )  # fmt: skip
    try:
        body = response.json() if response.status_code == 200 else None
    except ValueError:
        body = None
    action = body.get("action") if isinstance(body, dict) else None
    if not isinstance(action, dict):
        raise ConfigError(
            f"{url} answered HTTP {response.status_code} without an action schema: is "
            f"{ends.url} an OpenEnv server? (openenv serves /schema, /ws and /reset)"
        )
    return action


class OpenEnvSource(EnvSource):
    """The ``openenv`` source (see the module docstring)."""

    summary = "an OpenEnv server's environment, one WebSocket session per episode"
    form = "openenv:URL"
    packages = ("websockets",)
    extra = "openenv"

    def build_class(self, rest: str) -> type[ChatEnv]:
        """The environment class of the server at ``rest``."""
        ends = endpoints(rest)
        return type(
            "OpenEnvEnv",
            (OpenEnvEnv,),
            {
                "__module__": __name__,
                "__qualname__": f"OpenEnvEnv[{ends.url}]",
                "__doc__": OpenEnvEnv.__doc__,
                "url": ends.url,
                "env_name": f"openenv:{rest}",
            },
        )

    def wants(self, rest: str) -> list[str]:
        """Connecting to the server (and sending ``$OPENENV_TOKEN`` when it is set)."""
        return [f"connect to {rest} (sending ${{{TOKEN_VARIABLE}}} as its token when set)"]


SOURCE = OpenEnvSource()
"""The source the ``openenv`` entry point names."""
