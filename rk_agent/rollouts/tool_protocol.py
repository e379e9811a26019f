"""The text tool-call protocol: tool calls as ``<tool_call>{json}</tool_call>`` blocks in text.

For models that have no native tool calling (or servers that do not expose it), the harness
itself describes the tools in the system prompt, writes earlier calls and results back into
ordinary text turns, and parses the model's reply. The format is the one Qwen-style chat
templates use, so one parser serves both::

    <tool_call>
    {"name": "add", "arguments": {"a": 1, "b": 2}}
    </tool_call>

Parsing never raises: a reply with a malformed call comes back as a plain assistant message
(the raw text as content, no ``tool_calls``) plus a ``parse_error`` saying what is wrong, which
the engine feeds back to the model and records as a per-step penalty.

Main names:
    parse_tool_calls: model text -> `ParsedReply` (message, parse_error).
    render_tools_prompt: the system-prompt block describing the tools and the format.
    to_text_messages: a conversation with tool calls/results -> plain system/user/assistant turns.
    render_tool_call: one `ToolCall` as a ``<tool_call>`` block.
    parse_error_feedback: the message shown to the model after a parse error.

Example:
    >>> reply = parse_tool_calls('<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')
    >>> reply.message.tool_calls[0].function.name, reply.parse_error
    ('add', None)
    >>> parse_tool_calls("<tool_call>{'name': 'add'}</tool_call>").parse_error[:40]
    'tool call 1: invalid JSON at char 1 (Exp'
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rk_agent.errors import did_you_mean
from rk_agent.types import FunctionCall, Message, ToolCall

__all__ = [
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "ParsedReply",
    "parse_error_feedback",
    "parse_tool_calls",
    "render_tool_call",
    "render_tool_response",
    "render_tools_prompt",
    "to_text_messages",
    "tool_names",
]

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
_TAG = re.compile(r"</?tool_call>")
_FENCE_LINE = re.compile(r"^[ \t]*```[A-Za-z0-9_-]*[ \t]*$", re.MULTILINE)
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?[ \t]*```$", re.DOTALL)

_INSTRUCTION = """\
# Tools

You can call the tools below to help with the task. Each tool is described by a JSON schema:
<tools>
{schemas}
</tools>

To call a tool, reply with a JSON object holding its name and arguments inside <tool_call></tool_call> tags, exactly like this:
<tool_call>
{{"name": "<tool-name>", "arguments": {{"<argument-name>": <value>}}}}
</tool_call>
You may make several calls in one reply, one block each. The results come back in <tool_response></tool_response> tags. When you have the final answer, reply in plain text without a tool call."""  # noqa: E501  # a prompt reads best with one sentence per line


@dataclass
class ParsedReply:
    """A model reply read with the text protocol.

    Attributes:
        message: the assistant message: ``tool_calls`` set when the calls parsed, the text
            around them as ``content``; on a parse error, the raw text and no ``tool_calls``.
        parse_error: what is wrong with the attempted call(s), or ``None``.
    """

    message: Message
    parse_error: str | None = None


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def tool_names(tools: Iterable[dict[str, Any]] | None) -> list[str]:
    """The names in a list of OpenAI tool schemas (``{"type": "function", "function": {...}}``)."""
    names = []
    for tool in tools or []:
        function = tool.get("function", tool)
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def render_tools_prompt(tools: Sequence[dict[str, Any]]) -> str:
    """The system-prompt block that describes ``tools`` and the ``<tool_call>`` format.

    Example:
        >>> tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
        >>> '"name": "add"' in render_tools_prompt(tools)
        True
    """
    schemas = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    return _INSTRUCTION.format(schemas=schemas)


def render_tool_call(call: ToolCall) -> str:
    """One tool call as a ``<tool_call>`` block (the arguments re-read as JSON when they parse).

    Example:
        >>> from rk_agent.rollouts.testing import tool_call
        >>> print(render_tool_call(tool_call("add", {"a": 1}).tool_calls[0]))
        <tool_call>
        {"name": "add", "arguments": {"a": 1}}
        </tool_call>
    """
    try:
        arguments: Any = json.loads(call.function.arguments)
    except ValueError:
        arguments = call.function.arguments  # broken JSON is shown as the string it was
    body = json.dumps({"name": call.function.name, "arguments": arguments}, ensure_ascii=False)
    return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"


def render_tool_response(message: Message) -> str:
    """A tool result as a ``<tool_response>`` block."""
    return f"<tool_response>\n{message.text}\n</tool_response>"


def to_text_messages(
    messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None
) -> list[dict[str, str]]:
    """A conversation as plain ``system``/``user``/``assistant`` turns for a tool-less template.

    The tools block is appended to the first system message (or becomes one); assistant tool
    calls become ``<tool_call>`` blocks after the message's text; consecutive tool results
    become one user turn of ``<tool_response>`` blocks. ``developer`` counts as ``system``.

    Example:
        >>> from rk_agent.rollouts.testing import tool_call
        >>> msgs = [Message(role="user", content="1+2?"), tool_call("add", {"a": 1, "b": 2}),
        ...         Message(role="tool", content="3", tool_call_id="call_0")]
        >>> [m["role"] for m in to_text_messages(msgs, None)]
        ['user', 'assistant', 'user']
    """
    out: list[dict[str, str]] = []
    previous_was_tool = False
    for message in messages:
        role = "system" if message.role == "developer" else message.role
        if role in ("tool", "function"):
            block = render_tool_response(message)
            if previous_was_tool:
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block})
            previous_was_tool = True
            continue
        previous_was_tool = False
        text = message.text
        if role == "assistant" and message.tool_calls:
            calls = "\n".join(render_tool_call(call) for call in message.tool_calls)
            text = f"{text}\n{calls}" if text else calls
        out.append({"role": role, "content": text})
    if tools:
        block = render_tools_prompt(tools)
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{block}" if out[0]["content"] else block
        else:
            out.insert(0, {"role": "system", "content": block})
    return out


def _strip_fence(body: str) -> str:
    match = _FENCE.match(body)
    return match.group(1).strip() if match else body


def _blocks(text: str) -> tuple[list[str], list[str], str | None]:
    """Split ``text`` into tool-call bodies, the text outside them, and a tag error."""
    bodies: list[str] = []
    outside: list[str] = []
    position = 0
    open_at: int | None = None
    for tag in _TAG.finditer(text):
        if tag.group() == TOOL_CALL_OPEN:
            if open_at is not None:
                return [], [], f"<tool_call> at char {tag.start()} opens inside another block"
            outside.append(text[position : tag.start()])
            open_at = tag.end()
        else:
            if open_at is None:
                return [], [], f"</tool_call> at char {tag.start()} closes no <tool_call>"
            bodies.append(text[open_at : tag.start()])
            open_at = None
        position = tag.end()
    if open_at is not None:  # unterminated last block: generation often stops before the tag
        bodies.append(text[open_at:])
    else:
        outside.append(text[position:])
    return bodies, outside, None


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
        return None, f'"arguments" must be a JSON object, got {_json_type(arguments)}'
    return arguments, None


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


def _one_call(item: Any, known: list[str] | None) -> tuple[ToolCall | None, str | None]:
    if not isinstance(item, dict):
        shape = '{"name": ..., "arguments": {...}}'
        return None, f"expected a JSON object {shape}, got {_json_type(item)}"
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
    return ToolCall(id=_new_call_id(), function=function), None


def _decode_block(body: str, known: list[str] | None) -> tuple[list[ToolCall], str | None]:
    """One block's body -> tool calls (a block may hold a JSON list of calls) or an error."""
    source = _strip_fence(body.strip())
    if not source:
        return [], "empty <tool_call></tool_call> block"
    try:
        value, end = json.JSONDecoder().raw_decode(source)
    except json.JSONDecodeError as exc:
        return [], f"invalid JSON at char {exc.pos} ({exc.msg}) in {source[:200]!r}"
    except RecursionError:
        return [], "invalid JSON: nested too deeply"
    if source[end:].strip():
        return [], f"unexpected text after the JSON at char {end}: {source[end:][:80]!r}"
    items = value if isinstance(value, list) else [value]
    if not items:
        return [], "an empty list of calls"
    calls: list[ToolCall] = []
    for item in items:
        call, error = _one_call(item, known)
        if call is None:
            return [], error
        calls.append(call)
    return calls, None


def parse_tool_calls(text: str, tools: Sequence[dict[str, Any]] | None = None) -> ParsedReply:
    """Read a model reply: ``<tool_call>`` blocks become ``tool_calls``; never raises.

    Tolerated: whitespace and newlines anywhere, a code fence inside a block (```json ...```),
    several blocks, a JSON list of calls in one block, a missing ``</tool_call>`` at the very
    end, ``"parameters"`` for ``"arguments"``, arguments sent as a JSON string.

    A parse error is reported for: invalid JSON (with the char position), text after the JSON,
    a non-object, a missing or empty ``"name"``, non-object arguments, an empty block, unbalanced
    tags, and, when ``tools`` are given, a name that is not one of them. Then the message keeps
    the raw text and carries no ``tool_calls``: the calls are all or nothing.

    Args:
        text: the model's reply.
        tools: the OpenAI tool schemas offered; names are checked when given.

    Example:
        >>> r = parse_tool_calls('Let me add. <tool_call>{"name": "add"}</tool_call>')
        >>> r.message.content, r.message.tool_calls[0].function.arguments
        ('Let me add.', '{}')
    """
    bodies, outside, error = _blocks(text)
    if error is None and not bodies:
        return ParsedReply(Message(role="assistant", content=text))
    known = tool_names(tools) if tools is not None else None
    calls: list[ToolCall] = []
    for index, body in enumerate(bodies, start=1):
        if error is not None:
            break
        found, problem = _decode_block(body, known)
        if problem is not None:
            error = f"tool call {index}: {problem}"
        calls.extend(found)
    if error is not None:
        return ParsedReply(Message(role="assistant", content=text), parse_error=error)
    content = _FENCE_LINE.sub("", "".join(outside)).strip() or None
    return ParsedReply(Message(role="assistant", content=content, tool_calls=calls))


def parse_error_feedback(parse_error: str) -> str:
    """The text shown to the model after a malformed call (the engine sends it as a user turn).

    Example:
        >>> parse_error_feedback("tool call 1: missing \\"name\\"").splitlines()[0]
        'Your tool call could not be read: tool call 1: missing "name"'
    """
    return (
        f"Your tool call could not be read: {parse_error}\n"
        f'Call a tool with {TOOL_CALL_OPEN}{{"name": "<tool-name>", "arguments": {{...}}}}'
        f"{TOOL_CALL_CLOSE}, or answer in plain text."
    )
