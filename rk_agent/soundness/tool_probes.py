"""Probes for function calling and tool environments.

Main names: `TOOL_PROBES` (``call_every_tool``, ``nonsense_args`` for both kinds;
``farm_calls``, ``answer_at_once``, ``never_answer`` for tool environments), `nonsense_arguments`.

``farm_calls`` makes the reference's calls and then, instead of answering, repeats its last
call until the turns run out: a reward with a per-step bonus for tool calls that pays it for
needless calls pays this probe more than an honest wrong answer (the learning benchmark's
farmed step bonus).
"""

from __future__ import annotations

import json
import re
from typing import Any

from rk_agent.soundness.probes import FunctionProbe, ProbeReply, ProbeView
from rk_agent.types import FunctionCall, Message, ToolCall

__all__ = ["TOOL_PROBES", "nonsense_arguments"]

_NONSENSE: dict[str, Any] = {
    "string": "x",
    "integer": 0,
    "number": 0.0,
    "boolean": False,
    "array": [],
    "object": {},
    "null": None,
}


def nonsense_arguments(parameters: dict[str, Any] | None) -> dict[str, Any]:
    """Arguments that fit the JSON schema's types and nothing else: ``"x"``, ``0``, ``[]``.

    Example:
        >>> nonsense_arguments({"type": "object", "properties": {"a": {"type": "string"},
        ...                     "b": {"enum": ["c", "d"]}}})
        {'a': 'x', 'b': 'c'}
    """
    out: dict[str, Any] = {}
    for name, schema in ((parameters or {}).get("properties") or {}).items():
        schema = schema if isinstance(schema, dict) else {}
        if schema.get("enum"):
            out[name] = schema["enum"][0]
            continue
        kind = schema.get("type", "string")
        out[name] = _NONSENSE.get(kind[0] if isinstance(kind, list) else kind, "x")
    return out


def _calls(calls: list[tuple[str, dict[str, Any]]], turn: int) -> Message:
    return Message(
        role="assistant",
        content=None,
        tool_calls=[
            ToolCall(
                id=f"probe_{turn}_{i}",
                function=FunctionCall(name=name, arguments=json.dumps(arguments)),
            )
            for i, (name, arguments) in enumerate(calls)
        ],
    )


def _schemas(view: ProbeView) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for schema in view.tools:
        function = schema.get("function") or {}
        if isinstance(function.get("name"), str):
            found[function["name"]] = function.get("parameters") or {}
    for message in (view.reference, view.wrong):
        for call in (message.tool_calls or []) if message is not None else []:
            found.setdefault(call.function.name, {})
    return found


def _reference_calls(view: ProbeView) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for call in (view.reference.tool_calls or []) if view.reference is not None else []:
        try:
            arguments = json.loads(call.function.arguments or "{}")
        except ValueError:
            arguments = {}
        calls.append((call.function.name, arguments if isinstance(arguments, dict) else {}))
    return calls


def _call_every_tool(view: ProbeView) -> ProbeReply:
    """The reference's calls plus every other tool with nonsense arguments, in both orders;
    then the honest wrong answer."""
    if view.turn > 0:
        return _wrong_answer(view)
    right = _reference_calls(view)
    named = {name for name, _ in right}
    others = [(n, nonsense_arguments(p)) for n, p in _schemas(view).items() if n not in named]
    if not others:
        return None
    return _calls(right + others if view.variant == 0 else others + right, view.turn)


def _nonsense_args(view: ProbeView) -> ProbeReply:
    """The reference's tools, called with schema-valid nonsense; its final answer is wrong."""
    right = _reference_calls(view)
    if not right:
        return _wrong_answer(view) if view.turn > 0 else None
    schemas = _schemas(view)
    return _calls([(name, nonsense_arguments(schemas.get(name))) for name, _ in right], view.turn)


def _wrong_answer(view: ProbeView) -> str:
    if view.wrong is not None and not view.wrong.tool_calls and view.wrong.text:
        return view.wrong.text
    return "Answer: 0"


def _farm(view: ProbeView) -> ProbeReply:
    """The reference's calls, then its last call again every turn instead of an answer."""
    if not view.final:
        return view.reference
    made = [m for m in view.messages if m.role == "assistant" and m.tool_calls]
    if not made:
        return None
    last = made[-1].tool_calls or []
    calls = [(c.function.name, json.loads(c.function.arguments or "{}")) for c in last]
    return _calls(calls, view.turn)


def _answer_at_once(view: ProbeView) -> ProbeReply:
    """No tool call: answer at once with the first number of the question (a guess)."""
    number = re.search(r"-?\d+(?:\.\d+)?", view.question)
    return f"Answer: {number.group() if number else 0}"


TOOL_PROBES: tuple[FunctionProbe, ...] = (
    FunctionProbe(
        "call_every_tool",
        "calls every tool (the right call among them), in both orders",
        _call_every_tool,
        2,
        frozenset({"function_calling", "tools"}),
    ),
    FunctionProbe(
        "nonsense_args",
        "the reference's tools with schema-valid nonsense arguments",
        _nonsense_args,
        1,
        frozenset({"function_calling", "tools"}),
    ),
    FunctionProbe(
        "farm_calls",
        "the reference's calls, then the last one again every turn instead of an answer",
        _farm,
        1,
        frozenset({"tools"}),
    ),
    FunctionProbe(
        "answer_at_once",
        "answers at once with no tool call (a guess)",
        _answer_at_once,
        1,
        frozenset({"tools"}),
    ),
    FunctionProbe(
        "never_answer",
        "replies without an answer and without a tool call",
        lambda view: "Let me look into that.",
        1,
        frozenset({"tools"}),
    ),
)
