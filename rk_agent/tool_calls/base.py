"""What a tool-call text format is, and the parts every format shares.

A model without native tool calling (or a server that does not expose it) writes its tool calls
as text, in the format its training taught it. A `ToolCallFormat` is one such format, written and
read: it describes the tools in the system prompt, writes earlier calls and results back into
plain turns, reads a reply into an assistant message with ``tool_calls``, writes one call as text
(scripted replies, SFT data), and says what the model is shown after a malformed call.

Main names:
    ToolCallFormat: the protocol every format implements.
    ParsedReply: a reply read by a format: the message and the parse error, if any.
    tool_names: the names in a list of OpenAI tool schemas.
    decode_call: one decoded JSON value -> a `ToolCall`, or what is wrong with it.
    text_messages: a conversation as plain system/user/assistant turns, given a format's parts.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from rk_agent.errors import did_you_mean
from rk_agent.types import FunctionCall, Message, ToolCall

__all__ = [
    "ParsedReply",
    "ToolCallFormat",
    "decode_call",
    "decode_json",
    "json_type",
    "new_call_id",
    "strip_fence",
    "text_messages",
    "tool_names",
]

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?[ \t]*```$", re.DOTALL)


@dataclass
class ParsedReply:
    """A model reply read with a text tool-call format.

    Attributes:
        message: the assistant message: ``tool_calls`` set when the calls parsed, the text
            around them as ``content``; on a parse error, the raw text and no ``tool_calls``.
        parse_error: what is wrong with the attempted call(s), or ``None``.
    """

    message: Message
    parse_error: str | None = None


@runtime_checkable
class ToolCallFormat(Protocol):
    """A tool-call text format: how tools, calls and results are written, and how replies read.

    Parsing never raises: a reply with a malformed call comes back as a plain assistant message
    (the raw text as content, no ``tool_calls``) plus a ``parse_error`` saying what is wrong;
    the environment shows the model `feedback` and records a per-step penalty.

    Attributes:
        name: the registry name (`rk_agent.tool_calls.get_tool_call_format`).
    """

    name: str

    def render_tools_prompt(self, tools: Sequence[dict[str, Any]]) -> str:
        """The system-prompt block that describes ``tools`` and how to call them."""
        ...

    def render_messages(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None
    ) -> list[dict[str, str]]:
        """A conversation as plain ``system``/``user``/``assistant`` turns, tools described."""
        ...

    def parse(self, text: str, tools: Sequence[dict[str, Any]] | None = None) -> ParsedReply:
        """A model reply as an assistant message with ``tool_calls``; never raises.

        When ``tools`` are given, a call to a tool not among them is a parse error.
        """
        ...

    def render_call(self, call: ToolCall) -> str:
        """One tool call as the model would write it."""
        ...

    def feedback(self, parse_error: str) -> str:
        """The text shown to the model after a malformed call."""
        ...


def new_call_id() -> str:
    """A fresh OpenAI-style tool-call id (``call_`` and 24 hex digits)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def tool_names(tools: Iterable[dict[str, Any]] | None) -> list[str]:
    """The names in a list of OpenAI tool schemas (``{"type": "function", "function": {...}}``).

    Example:
        >>> tool_names([{"type": "function", "function": {"name": "add"}}, {"name": "mul"}])
        ['add', 'mul']
    """
    names = []
    for tool in tools or []:
        function = tool.get("function", tool)
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def json_type(value: Any) -> str:
    """A JSON value's kind, as an error message says it (``"an object"``, ``"null"``, ...)."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


def strip_fence(body: str) -> str:
    """``body`` without a Markdown code fence around all of it (```` ```json ... ``` ````)."""
    match = _FENCE.match(body)
    return match.group(1).strip() if match else body


def decode_json(source: str) -> tuple[Any, int, str | None]:
    """The JSON value at the start of ``source``, where it ends, and what went wrong, if anything.

    Example:
        >>> decode_json('{"a": 1} tail')
        ({'a': 1}, 8, None)
    """
    try:
        value, end = json.JSONDecoder().raw_decode(source)
    except json.JSONDecodeError as exc:
        return None, 0, f"invalid JSON at char {exc.pos} ({exc.msg}) in {source[:200]!r}"
    except RecursionError:
        return None, 0, "invalid JSON: nested too deeply"
    return value, end, None


def _arguments(item: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The call's arguments as a dict, or what is wrong with them."""
    arguments = item.get("arguments", item.get("parameters"))
    if arguments is None:
        return {}, None
    if isinstance(arguments, str):  # some models send the arguments as a JSON string
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return None, f'"arguments" is a string that is not JSON (char {exc.pos}: {exc.msg})'
    if not isinstance(arguments, dict):
        return None, f'"arguments" must be a JSON object, got {json_type(arguments)}'
    return arguments, None


def decode_call(
    item: Any, known: list[str] | None, shape: str = '{"name": ..., "arguments": {...}}'
) -> tuple[ToolCall | None, str | None]:
    """One decoded JSON value as a `ToolCall`, or ``(None, what is wrong)``.

    The value must be an object with a non-empty ``"name"``; its arguments are ``"arguments"``
    or ``"parameters"`` (an object, a JSON string of one, or absent for none). Other keys are
    ignored. When ``known`` is given, the name must be one of them.

    Args:
        item: the decoded JSON value.
        known: the offered tools' names, or ``None`` to accept any name.
        shape: the call's shape as the format writes it, for the error message.

    Example:
        >>> call, error = decode_call({"name": "add", "parameters": {"a": 1}}, ["add"])
        >>> call.function.arguments, error
        ('{"a": 1}', None)
        >>> decode_call({"name": "ad"}, ["add"])[1]
        "unknown tool 'ad'. Did you mean 'add'? Available: add."
    """
    if not isinstance(item, dict):
        return None, f"expected a JSON object {shape}, got {json_type(item)}"
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, f'missing "name" (a non-empty string) in {json.dumps(item)[:200]}'
    arguments, error = _arguments(item)
    if error is not None or arguments is None:
        return None, error
    if known is not None and name not in known:
        available = ", ".join(known) if known else "(none)"
        return None, f"unknown tool {name!r}.{did_you_mean(name, known)} Available: {available}."
    function = FunctionCall(name=name, arguments=json.dumps(arguments, ensure_ascii=False))
    return ToolCall(id=new_call_id(), function=function), None


def text_messages(
    messages: Sequence[Message],
    tools_prompt: str | None,
    render_call: Callable[[ToolCall], str],
    render_result: Callable[[Message], str],
    results_separator: str = "\n",
) -> list[dict[str, str]]:
    """A conversation as plain ``system``/``user``/``assistant`` turns for a tool-less template.

    ``tools_prompt`` is appended to the first system message (or becomes one); assistant tool
    calls are written after the message's text, one ``render_call`` a line; consecutive tool results
    become one user turn of ``render_result`` blocks. ``developer`` counts as ``system``.

    Args:
        messages: the conversation.
        tools_prompt: the format's description of the tools, or ``None`` when none are offered.
        render_call: one call as text.
        render_result: one ``tool`` message as text.
        results_separator: what goes between the results of one user turn.
    """
    out: list[dict[str, str]] = []
    previous_was_tool = False
    for message in messages:
        role = "system" if message.role == "developer" else message.role
        if role in ("tool", "function"):
            block = render_result(message)
            if previous_was_tool:
                out[-1]["content"] += results_separator + block
            else:
                out.append({"role": "user", "content": block})
            previous_was_tool = True
            continue
        previous_was_tool = False
        text = message.text
        if role == "assistant" and message.tool_calls:
            calls = "\n".join(render_call(call) for call in message.tool_calls)
            text = f"{text}\n{calls}" if text else calls
        out.append({"role": role, "content": text})
    if tools_prompt:
        if out and out[0]["role"] == "system":
            first = out[0]["content"]
            out[0]["content"] = f"{first}\n\n{tools_prompt}" if first else tools_prompt
        else:
            out.insert(0, {"role": "system", "content": tools_prompt})
    return out
