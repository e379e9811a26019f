"""`ImportedEnv`: the base of environments from elsewhere, around one `Session` per episode.

An outside ecosystem's episode (a reasoning-gym entry, a BFCL task and its API instances, an
OpenEnv WebSocket session) is a `Session`: the tools it offers now, how it runs a tool call,
how it answers a reply without tool calls, how it scores the episode, and how it is closed. A
source (`rk_agent.envs.sources`) subclasses `ImportedEnv`, makes tasks (``generate_task``, or
``tasks=``) and implements one hook, `ImportedEnv.open_session`; the base maps the rest onto
`ChatEnv`'s hooks:

- ``on_reset`` closes the last episode's session and opens the task's (kept in
  ``state.scratch["session"]``); `Session.opening` may replace the opening messages;
- ``episode_tools`` is `Session.tools` (set ``tool_scope`` to TASK or TURN when they vary);
- ``call_tool`` is `Session.call_tool`, ``respond`` is `Session.respond`;
- the default episode reward, named after the source, is `Session.verify` (its metrics are the
  components; an invalid result is an invalid score, never a 0) of the episode the environment
  plays; another conversation given to it (single-turn GRPO scores completions with the
  environment's rewards) is scored by `ImportedEnv.score_recorded` where the source can score
  a transcript, else invalid;
- the session is closed once the episode is scored, at the next reset (an episode left
  unfinished) and by ``close``.

**The reference solver.** A session may know the answer (`Session.solve`). The class's
``reference_solver`` (``solve(messages, tools)``, what ``--policy solver`` and
``rk-agent check env`` play) looks the episode up by its opening messages among the open
sessions of its environments in this process, and asks them (the episode's own first) until
one answers: a solver sees only the conversation, and the answer lives with the task. A class
whose sessions cannot solve (``has_solver = False``) has no reference solver.

Main names: `ImportedEnv`, `Session`, `BaseSession`.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from rk_agent.envs.base import ChatEnv, EpisodeState
from rk_agent.envs.offered_tools import EpisodeTool
from rk_agent.envs.task import Task
from rk_agent.envs.tool import ToolResult
from rk_agent.errors import EnvError
from rk_agent.rewards.decorator import RewardFn, reward_function
from rk_agent.types import EvaluateResult, Message, StopReason, ToolCall

__all__ = ["BaseSession", "ImportedEnv", "Session"]

_SOLUTIONS_KEPT = 10_000
_SESSION = "session"
_Key = tuple[tuple[str, str], ...]


@runtime_checkable
class Session(Protocol):
    """One episode of an outside environment (see the module docstring)."""

    def opening(self) -> list[Message] | None:
        """The opening messages, when they are not the task's (``None``: the task's)."""
        ...

    def tools(self) -> Sequence[EpisodeTool] | None:
        """The tools offered now (``None``: none); read after the reset and, with
        ``tool_scope`` TURN, after every turn."""
        ...

    def call_tool(self, call: ToolCall) -> ToolResult:
        """Run one tool call; a failure is a ``ToolResult(ok=False)``, never an exception."""
        ...

    def respond(self, reply: Message) -> list[Message] | None:
        """The answer to a reply without tool calls: messages for another turn, or ``None``
        (the reply ends the episode)."""
        ...

    def verify(self, messages: list[Message]) -> EvaluateResult:
        """The episode's score, with its components as metrics; ``EvaluateResult.invalid``
        when it cannot be scored."""
        ...

    def solve(self, messages: list[Message], tools: Any) -> Message | None:
        """The reference answer to the conversation so far (``None``: none known)."""
        ...

    def close(self) -> None:
        """Release what the episode holds."""
        ...


class BaseSession:
    """A `Session` with defaults: no tools, a reply ends the episode, nothing to solve or
    close. Subclasses implement `verify` and what else they need."""

    def opening(self) -> list[Message] | None:
        """The task's messages."""
        return None

    def tools(self) -> Sequence[EpisodeTool] | None:
        """No tools."""
        return None

    def call_tool(self, call: ToolCall) -> ToolResult:
        """No tool exists."""
        return ToolResult(
            f"Error: there is no tool named {call.function.name!r}. Available: none.",
            ok=False,
            error_kind="unknown_tool",
        )

    def respond(self, reply: Message) -> list[Message] | None:
        """The reply is the final answer."""
        return None

    def verify(self, messages: list[Message]) -> EvaluateResult:
        """Score the episode (required)."""
        raise NotImplementedError

    def solve(self, messages: list[Message], tools: Any) -> Message | None:
        """No reference answer."""
        return None

    def close(self) -> None:
        """Nothing to release."""


class _Solutions:
    """The open sessions of one class's episodes by opening, for its reference solver.

    Several episodes may open alike (the same task played concurrently, or two tasks whose
    first user turn is the same): each session is asked in turn, the episode's own first (the
    one whose opening holds the very message objects of the conversation asked about, as the
    rollout engine and `play_with_solver` pass them), then the newest; a session that does not
    recognise the conversation as its own answers ``None`` and the next is asked. Sessions are
    held weakly: an environment dropped unclosed takes its session with it.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self._sessions: OrderedDict[int, tuple[_Key, Message | None, weakref.ref[Session]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def remember(self, opening: list[Message], session: Session) -> None:
        entry = (_key(opening), opening[0] if opening else None, weakref.ref(session))
        with self._lock:
            self._sessions[id(session)] = entry
            self._sessions.move_to_end(id(session))
            while len(self._sessions) > _SOLUTIONS_KEPT:
                self._sessions.popitem(last=False)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # By reference (the class is rebuilt from its name where it is unpickled), so that the
        # solver reaches the sessions of that process's environments: a run's Ray workers.
        return _solutions_of, (self.label,)

    def forget(self, session: Session) -> None:
        with self._lock:
            self._sessions.pop(id(session), None)

    def solve(self, messages: list[Message], tools: Any = None) -> Message:
        key, first = _key(messages), messages[0] if messages else None
        with self._lock:
            alike = [(f, s()) for k, f, s in reversed(self._sessions.values()) if k == key]
        ordered = [s for f, s in alike if f is first] + [s for f, s in alike if f is not first]
        for session in ordered:
            if session is None:
                continue
            reply = session.solve(messages, tools)
            if reply is not None:
                return reply
        raise EnvError(
            f"the reference solver of {self.label} knows no answer to this conversation: "
            "it answers the tasks its environments opened in this process (reset them "
            "first) while their episodes run, and only those whose source stores an answer."
        )


def _solutions_of(label: str) -> _Solutions:
    """The solutions of the environment class named ``label`` (in this process)."""
    from rk_agent.envs.registry import get_env_class

    env_class = get_env_class(label)
    solutions = getattr(env_class, "_solutions", None)
    if not isinstance(solutions, _Solutions):
        raise EnvError(f"environment {label!r} is not an imported environment with a solver.")
    return solutions


def _key(messages: Sequence[Message]) -> _Key:
    """The messages up to the first user message: what identifies an episode's task."""
    out = []
    for message in messages:
        out.append((message.role, message.text))
        if message.role == "user":
            break
    return tuple(out)


class ImportedEnv(ChatEnv):
    """Base of environments from elsewhere (see the module docstring).

    Class attributes a source sets on the class it builds:

    Attributes:
        env_name: the name it was made from (``"reasoning-gym:chain_sum"``).
        source_name: the source's scheme; the default episode reward is named after it.
        has_solver: whether its sessions know the reference answer (`Session.solve`).
        talks_back: whether its sessions may answer a reply without tool calls with messages
            (`Session.respond`: BFCL's next user turn, an OpenEnv text environment's
            observation); ``False`` where such a reply always ends the episode, which TRL's
            tool loop checks (every reply reaches the session, so it cannot tell by itself).
        no_solver_reason: why it has no reference solver, for the messages that need one
            (``rk-agent check env``, ``--policy solver``).
    """

    env_name: ClassVar[str] = "imported"
    source_name: ClassVar[str] = "imported"
    has_solver: ClassVar[bool] = False
    talks_back: ClassVar[bool] = True
    no_solver_reason: ClassVar[str | None] = None
    _solutions: ClassVar[_Solutions]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._solutions = _Solutions(cls.env_name)
        cls.reference_solver = staticmethod(cls._solutions.solve) if cls.has_solver else None

    def __init__(self, **kwargs: Any) -> None:
        self._episode_session: Session | None = None
        if kwargs.get("episode_rewards") is None:
            kwargs["episode_rewards"] = {self.reward_name(): self._verify_reward()}
        super().__init__(**kwargs)

    @classmethod
    def reward_name(cls) -> str:
        """The default episode reward's name: the source's scheme as an identifier."""
        return cls.source_name.replace("-", "_")

    def open_session(self, task: Task) -> Session:
        """The session of one episode of ``task`` (required)."""
        raise NotImplementedError

    def score_recorded(
        self, messages: list[Message], metadata: dict[str, Any] | None
    ) -> EvaluateResult | None:
        """The default reward of a conversation this environment is not playing (a task's
        messages and a reply, scored without an episode: single-turn GRPO), from the
        transcript and the task's ``metadata``; ``None`` (the default): the source cannot,
        and the score is invalid."""
        return None

    # ---------------------------------------------------------------- ChatEnv's hooks

    def on_reset(self, state: EpisodeState) -> None:
        """Close the last session and open this episode's."""
        self._close_session()
        session = self._episode_session = self.open_session(state.task)
        state.scratch[_SESSION] = session
        opening = session.opening()
        if opening is not None:
            state.messages = [m.model_copy() for m in opening]
        if self.has_solver:
            self._solutions.remember(state.messages, session)

    def episode_tools(self, state: EpisodeState) -> Sequence[EpisodeTool] | None:
        """The session's tools."""
        return _session(state).tools() or []

    def call_tool(self, call: ToolCall, state: EpisodeState) -> ToolResult:
        """Run the call in the session."""
        return _session(state).call_tool(call)

    def respond(self, action: Message, state: EpisodeState) -> list[Message] | None:
        """The session's answer to a reply without tool calls."""
        return _session(state).respond(action)

    def close(self) -> None:
        """Close the episode's session, then the environment."""
        self._close_session()
        super().close()

    # ---------------------------------------------------------------- internals

    def score_episode(self, state: EpisodeState, stop_reason: StopReason) -> EvaluateResult:
        """Score the episode, then close its session: what it holds is released as soon as the
        episode is over."""
        try:
            return super().score_episode(state, stop_reason)
        finally:
            if state.scratch.get(_SESSION) is self._episode_session:
                self._close_session()

    def _close_session(self) -> None:
        session = getattr(self, "_episode_session", None)  # None when __init__ failed early
        self._episode_session = None
        if session is not None:
            if self.has_solver:
                self._solutions.forget(session)
            session.close()

    def _verify_reward(self) -> RewardFn:
        label = self.env_name

        @reward_function(
            name=self.reward_name(),
            description=f"the score {label} gives the episode",
        )
        def verify(
            messages: list[Message], metadata: dict[str, Any] | None = None, **_: Any
        ) -> EvaluateResult:
            messages = [Message.coerce(m) for m in messages]
            state = self._state
            session = state.scratch.get(_SESSION) if state is not None else None
            if session is not None and state is not None and _key(messages) == _key(state.messages):
                return session.verify(messages)
            # Not this environment's open episode (single-turn GRPO scores TRL's completions
            # with the environment's rewards): the source's transcript score, if it has one.
            recorded = self.score_recorded(messages, metadata)
            if recorded is not None:
                return recorded
            if session is None:
                return EvaluateResult.invalid(
                    f"{label} scores an episode in the session that played it; there is none "
                    "here (score it with the environment that played it)"
                )
            return EvaluateResult.invalid(
                f"{label} scores an episode in the session that played it, and this "
                "conversation is not the one its session plays (score it with the environment "
                "that played it, or with a reward that reads the transcript)"
            )

        return verify


def _session(state: EpisodeState) -> Session:
    session = state.scratch.get(_SESSION)
    if session is None:
        raise EnvError("the episode has no session: call reset() first.")
    return session
