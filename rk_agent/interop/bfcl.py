"""``bfcl:CATEGORY``: BFCL v4's multi-turn entries as environments, scored by its own checker.

bfcl-eval 2026.3.23 (installed apart: `INSTALL`) holds BFCL v4's multi-turn categories, 200
entries each: ``multi_turn_base``, ``multi_turn_miss_func`` (a function is held out until a
given turn), ``multi_turn_miss_param`` (a turn lacks a parameter) and
``multi_turn_long_context``; ``bfcl:multi_turn`` is all four (800). Each entry is a few user
turns over a set of executable API classes (a file system, a trading bot, ...: 20 tool sets of
18 to 39 tools). An episode is one entry:

- the tasks: the category's entries in the package's order (task ``i`` is entry ``i``; ``--n``
  beyond them is refused); the task records the entry's id and its ground-truth calls;
- the tools: the function docs of the entry's classes as OpenAI tool schemas, per task
  (``tool_scope`` TASK); ``miss_func`` adds the held-out function at its turn, with the
  package's prompt as that turn's user message (TURN);
- the turns: the first user turn opens the episode; a reply without tool calls ends the
  current user turn and the next one follows (after the last, the episode ends); a turn with
  more than the package's 20 steps of tool calls (``MAXIMUM_STEP_LIMIT``) ends the episode, as
  BFCL force-quits it;
- the calls: checked against the tool's schema (a call to a tool not offered, or with bad
  arguments, is a tool error the model reads, and is not run), then run in the episode's own
  instances of the classes, as a call string built from the validated arguments
  (`rk_agent.interop.bfcl_package`); the instances are deleted when the episode ends;
- the reward ``bfcl``: the official ``multi_turn_checker`` on the calls run in each turn (re-run
  from the transcript on fresh instances against the ground truth's), 1.0 when it passes,
  else 0.0 with its ``error_type`` as the reason; components ``turn_0``, ``turn_1``, ... (each
  turn's own check); an episode that ended before its last turn is
  ``multi_turn:force_terminated``, as BFCL's runner says; a checker that raises gives an
  invalid score, never a 0. `checker` is the same reward for ``rk-agent rescore``;
- the reference solver replays the ground truth: each turn's calls in one reply, then a reply
  without calls.

Main names: `SOURCE`, `BfclSource`, `BfclEnv`, `checker`, `split_turns`, `INSTALL`.
"""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Sequence
from typing import Any, ClassVar

from rk_agent.envs.base import ChatEnv, EpisodeState
from rk_agent.envs.imported import BaseSession, ImportedEnv
from rk_agent.envs.offered_tools import EpisodeTool, ToolScope
from rk_agent.envs.sources import EnvSource
from rk_agent.envs.task import Task
from rk_agent.envs.tool import ToolResult
from rk_agent.errors import ConfigError, EnvError, did_you_mean
from rk_agent.interop import bfcl_package as bfcl
from rk_agent.rewards.decorator import reward_function
from rk_agent.types import EvaluateResult, FunctionCall, Message, MetricResult, ToolCall

__all__ = ["INSTALL", "SOURCE", "BfclEnv", "BfclSource", "checker", "split_turns"]

INSTALL = (
    f"pip install 'rk-agent[bfcl]' && pip install --no-deps bfcl-eval=={bfcl.VERSION} "
    "(bfcl-eval declares 5.9 GB of dependencies and pins numpy 1.26.4; its multi-turn code "
    "needs none of them; uv: uv pip install the same; in a checkout of rk-agent: uv sync "
    "--extra bfcl)"
)
"""How to install what the source needs (the missing-extra message names it)."""

ALL = "multi_turn"
"""The name of all four categories together."""

STEP_LIMIT = 20
"""Steps of tool calls per user turn before BFCL force-quits (its ``MAXIMUM_STEP_LIMIT``)."""

_FAILED = "Error during execution:"
_TURN_START = "bfcl_turn_start"


# ------------------------------------------------------------------------ the transcript


def split_turns(messages: Sequence[Message], entry: bfcl.Entry) -> list[list[Message]] | None:
    """The messages each user turn of ``entry`` holds after its user messages (``None`` when
    the conversation does not open with the entry's first turn).

    A turn ends with a reply without tool calls; the next turn starts where the entry's next
    user messages follow such a reply (a user message that is not, such as the feedback on a
    reply that could not be parsed, stays in the turn).
    """
    opening = entry.turns[0]
    if len(messages) < len(opening) or any(
        _differ(m, o) for m, o in zip(messages, opening, strict=False)
    ):
        return None
    groups: list[list[Message]] = [[]]
    index, ended = len(opening), False
    while index < len(messages):
        following = len(groups)
        if (
            ended
            and following < len(entry.turns)
            and _starts(messages, index, entry.turns[following])
        ):
            groups.append([])
            index += len(entry.turns[following])
            ended = False
            continue
        message = messages[index]
        groups[-1].append(message)
        ended = message.role == "assistant" and not message.tool_calls
        index += 1
    return groups


def _differ(message: Message, expected: Message) -> bool:
    return message.role != expected.role or message.text != expected.text


def _starts(messages: Sequence[Message], index: int, turn: Sequence[Message]) -> bool:
    window = messages[index : index + len(turn)]
    return len(window) == len(turn) and not any(
        _differ(m, t) for m, t in zip(window, turn, strict=True)
    )


def _checked_calls(message: Message, entry: bfcl.Entry) -> list[str]:
    """The call strings of a reply's calls that were run: the entry's tools, valid arguments."""
    out = []
    for call in message.tool_calls or []:
        spec = entry.known.get(call.function.name)
        if spec is None:
            continue
        arguments, problem = spec.check(call.function.arguments)
        if problem is None:
            out.append(bfcl.call_string(spec.name, arguments))
    return out


def decoded_calls(groups: list[list[Message]], entry: bfcl.Entry) -> list[list[list[str]]]:
    """Each turn's steps as the checker reads them: the call strings of each reply's run
    calls, replies that ran none left out (as BFCL's runner leaves out empty steps)."""
    out = []
    for group in groups:
        steps = [_checked_calls(m, entry) for m in group if m.role == "assistant"]
        out.append([step for step in steps if step])
    return out


def check_messages(messages: Sequence[Message], entry: bfcl.Entry) -> EvaluateResult:
    """The official checker's verdict on a conversation of ``entry`` (see the module
    docstring)."""
    groups = split_turns(messages, entry)
    if groups is None:
        return EvaluateResult.invalid(
            f"the conversation does not open with {entry.id}'s first user turn: it is not an "
            "episode of that entry"
        )
    total, played = len(entry.turns), len(groups)
    decoded = decoded_calls(groups, entry)
    try:
        verdict = bfcl.run_checker(entry, decoded, played) if played == total else None
        failed, error = _first_failure(entry, decoded, played, verdict)
    except Exception as exc:  # the package's checker failed: not a score, not a 0
        return EvaluateResult.invalid(
            f"bfcl's multi_turn_checker raised {type(exc).__name__}: {exc}"
        )
    metrics = {}
    for turn in range(total):
        if turn >= played:
            reason = f"not played: the episode ended in turn {played - 1} of {total}"
            metrics[f"turn_{turn}"] = MetricResult(score=0.0, success=False, reason=reason)
        elif failed is not None and turn > failed:
            reason = f"not checked: turn {failed} failed first"
            metrics[f"turn_{turn}"] = MetricResult(score=0.0, success=False, reason=reason)
        elif turn == failed:
            reason = f"{error['error_type']}: {error.get('error_message', '')}"
            metrics[f"turn_{turn}"] = MetricResult(score=0.0, success=False, reason=reason)
        else:
            note = None if entry.ground_truth[turn] else "no call expected; the checker checks none"
            metrics[f"turn_{turn}"] = MetricResult(score=1.0, success=True, reason=note)
    if played < total:
        return EvaluateResult(score=0.0, reason="multi_turn:force_terminated", metrics=metrics)
    if failed is not None:
        return EvaluateResult(score=0.0, reason=str(error["error_type"]), metrics=metrics)
    return EvaluateResult(
        score=1.0, reason=f"passed bfcl's multi_turn_checker on all {total} turns", metrics=metrics
    )


def _first_failure(
    entry: bfcl.Entry, decoded: list[list[list[str]]], played: int, verdict: dict | None
) -> tuple[int | None, dict]:
    """The first turn the checker fails and its error (``None``: none fails). The checker
    stops at the first failure without always naming the turn: check the turns one prefix at a
    time, only when the whole failed (or was not checked: a force-terminated episode)."""
    if verdict is not None and verdict.get("valid"):
        return None, {}
    for turn in range(played):
        result = bfcl.run_checker(entry, decoded, turn + 1)
        if not result.get("valid"):
            return turn, result
    if verdict is not None:  # the whole failed though every prefix passed: say it as it is
        return played - 1, verdict
    return None, {}


@reward_function(name="bfcl", description="BFCL's official multi_turn_checker on the episode")
def checker(
    messages: list[Message], metadata: dict[str, Any] | None = None, **_: Any
) -> EvaluateResult:
    """The ``bfcl`` reward on a recorded episode (``rk-agent rescore RUN --reward
    rk_agent.interop.bfcl:checker``): the entry is the task's ``metadata["bfcl_id"]``."""
    entry_id = (metadata or {}).get("bfcl_id")
    if not isinstance(entry_id, str):
        return EvaluateResult.invalid("the task's metadata names no BFCL entry ('bfcl_id')")
    try:
        entry = _entry(entry_id)
    except ConfigError as exc:
        return EvaluateResult.invalid(str(exc))
    return check_messages([Message.coerce(m) for m in messages], entry)


def _entry(entry_id: str) -> bfcl.Entry:
    category = entry_id.rsplit("_", 1)[0]
    if category not in bfcl.CATEGORIES:
        raise ConfigError(f"{entry_id!r} is not an entry of BFCL's multi-turn categories")
    found = {e.id: e for e in bfcl.entries(category)}.get(entry_id)
    if found is None:
        raise ConfigError(f"bfcl-eval {bfcl.VERSION} has no entry {entry_id!r}")
    return found


# ------------------------------------------------------------------------------ the session


class _Session(BaseSession):
    """One episode of one entry: its own instances of the entry's classes."""

    def __init__(self, entry: bfcl.Entry) -> None:
        self.entry = entry
        self.turn = 0
        self.key = bfcl.episode_key()
        self.closed = False
        # Also when the environment is dropped unclosed: the package's globals would keep them.
        self._release = weakref.finalize(self, bfcl.release, self.key, entry)

    def tools(self) -> Sequence[EpisodeTool]:
        return [spec.schema for spec in self.entry.tools_at(self.turn)]

    def call_tool(self, call: ToolCall) -> ToolResult:
        spec = self.entry.known.get(call.function.name)
        if spec is None:
            tools = self.entry.tools_at(self.turn)
            offered = ", ".join(sorted(s.name for s in tools))
            hint = did_you_mean(call.function.name, [s.name for s in tools])
            return ToolResult(
                f"Error: there is no tool named {call.function.name!r}.{hint} Available: "
                f"{offered}.",
                ok=False,
                error_kind="unknown_tool",
            )
        arguments, problem = spec.check(call.function.arguments)
        if problem is not None:
            return ToolResult(problem, ok=False, error_kind="bad_arguments")
        if self.closed:
            raise EnvError(f"the episode of {self.entry.id} is over; call reset().")
        text = bfcl.execute(self.key, self.entry, bfcl.call_string(spec.name, arguments))
        failed = text.startswith(_FAILED)
        return ToolResult(text, ok=not failed, error_kind="exception" if failed else None)

    def respond(self, reply: Message) -> list[Message] | None:
        self.turn += 1
        if self.turn >= len(self.entry.turns):
            return None
        return [m.model_copy() for m in self.entry.turns[self.turn]]

    def verify(self, messages: list[Message]) -> EvaluateResult:
        return check_messages(messages, self.entry)

    def solve(self, messages: list[Message], tools: Any) -> Message | None:
        groups = split_turns(messages, self.entry)
        if groups is None:
            return None
        turn = len(groups) - 1
        if tools is not None and _names(tools) != {s.name for s in self.entry.tools_at(turn)}:
            return None  # another entry's episode that opens alike (miss_func's, base's)
        if any(m.role == "assistant" for m in groups[turn]) or not self.entry.ground_truth[turn]:
            done = "Done." if self.entry.ground_truth[turn] else _CANNOT
            return Message(role="assistant", content=done)
        calls = []
        for index, text in enumerate(self.entry.ground_truth[turn]):
            name, arguments = bfcl.parse_call(text, self.entry)
            calls.append(
                ToolCall(id=f"call_{turn}_{index}",
                         function=FunctionCall(name=name, arguments=json.dumps(arguments)))
            )  # fmt: skip
        return Message(role="assistant", content=None, tool_calls=calls)

    def close(self) -> None:
        self.closed = True
        self._release()


_CANNOT = (
    "I cannot do that with the functions I have, or without more information; please give me "
    "what is missing."
)


def _names(tools: Any) -> set[str]:
    out = set()
    for tool in tools or []:
        function = tool.get("function", {}) if isinstance(tool, dict) else {}
        out.add(str(function.get("name", "")))
    return out


# ---------------------------------------------------------------------------- the environment


class BfclEnv(ImportedEnv):
    """Play BFCL v4 multi-turn entries; scored by BFCL's own multi_turn_checker.

    Made by the ``bfcl`` source for one name (``bfcl:multi_turn_base``); see the module
    docstring. Its tasks are the entries (``tasks=`` is refused).

    Args:
        **kwargs: see `ChatEnv` (``max_turns`` counts every reply of the episode; the default
            leaves room for 21 replies in each of 8 turns, and BFCL's own limit of 20 steps of
            calls per turn applies too).

    Example:
        >>> env = make_env("bfcl:multi_turn_base")  # doctest: +SKIP
    """

    categories: ClassVar[tuple[str, ...]] = ()
    default_max_turns: ClassVar[int] = (STEP_LIMIT + 1) * 8
    source_name: ClassVar[str] = "bfcl"
    has_solver: ClassVar[bool] = True

    def __init__(self, **kwargs: Any) -> None:
        if not self.categories:
            raise ConfigError(
                "BfclEnv is made by the bfcl source: name it 'bfcl:CATEGORY' (make_env, --env)."
            )
        if kwargs.get("tasks") is not None:
            raise ConfigError(
                f"{self.env_name}'s tasks are BFCL's entries; tasks= cannot replace them (pick "
                "entries with --n, or task_index= in reset options)."
            )
        self._entries = _entries(self.categories)
        kwargs["tasks"] = _tasks(self.categories)  # one list per class: a run builds many envs
        super().__init__(**kwargs)

    def score_recorded(
        self, messages: list[Message], metadata: dict[str, Any] | None
    ) -> EvaluateResult:
        """`checker`: the transcript's calls run again, as for ``rk-agent rescore``."""
        return checker(messages, metadata=metadata)

    def open_session(self, task: Task) -> _Session:
        """The entry the task names, in instances of its own."""
        entry = self._entries.get(str(task.metadata.get("bfcl_id")))
        if entry is None:
            raise EnvError(
                f"task {task.id!r} is not an entry of {self.env_name}: its metadata needs "
                "'bfcl_id' naming one (tasks come from the environment)."
            )
        return _Session(entry)

    def on_reset(self, state: EpisodeState) -> None:
        """Open the entry's session; its first turn starts after the opening."""
        super().on_reset(state)
        state.scratch[_TURN_START] = len(state.messages)

    def call_tool(self, call: ToolCall, state: EpisodeState) -> ToolResult:
        """Run the call; the 21st step of calls in one user turn ends the episode (BFCL's
        force quit)."""
        result = super().call_tool(call, state)
        made = state.messages[state.scratch.get(_TURN_START, 0) :]
        if sum(1 for m in made if m.role == "assistant" and m.tool_calls) > STEP_LIMIT:
            state.done = True
        return result

    def respond(self, action: Message, state: EpisodeState) -> list[Message] | None:
        """The next user turn, or ``None`` after the last."""
        turn = super().respond(action, state)
        state.scratch[_TURN_START] = len(state.messages)
        return turn

    def score_episode(self, state: EpisodeState, stop_reason: Any) -> EvaluateResult:
        """Score the episode, then delete its instances."""
        try:
            return super().score_episode(state, stop_reason)
        finally:
            session = state.scratch.get("session")
            if isinstance(session, _Session):
                session.close()


@functools.cache
def _entries(categories: tuple[str, ...]) -> dict[str, bfcl.Entry]:
    return {e.id: e for c in categories for e in bfcl.entries(c)}


@functools.cache
def _tasks(categories: tuple[str, ...]) -> tuple[Task, ...]:
    return tuple(_task(e) for e in _entries(categories).values())


def _task(entry: bfcl.Entry) -> Task:
    return Task(
        id=entry.id,
        messages=[m.model_copy() for m in entry.turns[0]],
        ground_truth=[list(calls) for calls in entry.ground_truth],
        metadata={"bfcl_id": entry.id, "turns": len(entry.turns)},
    )


class BfclSource(EnvSource):
    """The ``bfcl`` source (see the module docstring)."""

    summary = (
        "BFCL v4's multi-turn entries (base, miss_func, miss_param, long_context; 200 each), "
        "scored by its multi_turn_checker"
    )
    form = "bfcl:CATEGORY"
    packages = ("bfcl_eval", "filelock", "mpmath")
    extra = "bfcl"

    def install_hint(self) -> str:
        """The two installs: the extra, then bfcl-eval without its declared dependencies."""
        return INSTALL

    def wants(self, rest: str) -> list[str]:
        """Nothing beyond installed code: the entries, classes and checker ship in bfcl-eval's
        wheel, and nothing is fetched or started (a run from elsewhere builds it untrusted)."""
        return []

    def build_class(self, rest: str) -> type[ChatEnv]:
        """The environment of one category, or of all four (``multi_turn``)."""
        names = [*bfcl.CATEGORIES, ALL]
        if rest not in names:
            hint = did_you_mean(rest, names)
            raise ConfigError(
                f"bfcl has no multi-turn category {rest!r}.{hint} It has: {', '.join(names)} "
                f"({ALL}: all four)."
            )
        categories = bfcl.CATEGORIES if rest == ALL else (rest,)
        varies = any(c == "multi_turn_miss_func" for c in categories)
        return type(
            "BfclEnv",
            (BfclEnv,),
            {
                "__module__": __name__,
                "__qualname__": f"BfclEnv[{rest}]",
                "__doc__": BfclEnv.__doc__,
                "categories": categories,
                "env_name": f"bfcl:{rest}",
                "tool_scope": ToolScope.TURN if varies else ToolScope.TASK,
            },
        )


SOURCE = BfclSource()
"""The source the ``bfcl`` entry point names."""
