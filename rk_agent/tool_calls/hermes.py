"""The Hermes tool-call format: ``<tool_call>{json}</tool_call>`` blocks in the reply.

NousResearch's Hermes 2 Pro introduced it, and the chat templates of Qwen2.5 and Qwen3 (and
many fine-tunes of them) use it, so one parser serves both the text protocol and what those
models were trained to write::

    <tool_call>
    {"name": "add", "arguments": {"a": 1, "b": 2}}
    </tool_call>

Results go back as ``<tool_response>`` blocks in a user turn. This is rk-agent's default format
(``"hermes"``, vLLM's ``--tool-call-parser hermes`` reads the same).

Main names:
    HermesFormat: the format (`rk_agent.tool_calls.ToolCallFormat`).
    HERMES: its instance.
    TOOL_CALL_OPEN, TOOL_CALL_CLOSE: the tags.

Example:
    >>> reply = HERMES.parse('<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')
    >>> reply.message.tool_calls[0].function.name, reply.parse_error
    ('add', None)
    >>> HERMES.parse("<tool_call>{'name': 'add'}</tool_call>").parse_error[:40]
    'tool call 1: invalid JSON at char 1 (Exp'
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from rk_agent.tool_calls.base import (
    ParsedReply,
    decode_call,
    decode_json,
    strip_fence,
    text_messages,
    tool_names,
)
from rk_agent.types import Message, ToolCall

__all__ = ["HERMES", "TOOL_CALL_CLOSE", "TOOL_CALL_OPEN", "HermesFormat"]

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
_TAG = re.compile(r"</?tool_call>")
_FENCE_LINE = re.compile(r"^[ \t]*```[A-Za-z0-9_-]*[ \t]*$", re.MULTILINE)

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


class HermesFormat:
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Hermes 2 Pro, Qwen2.5/3).

    Parsing tolerates whitespace and newlines anywhere, a code fence inside a block
    (```json ...```) or around the whole reply, several blocks, a JSON list of calls in one
    block, a missing ``</tool_call>`` at the very end (generation often stops before it),
    ``"parameters"`` for ``"arguments"``, and arguments sent as a JSON string.

    A parse error is reported for: invalid JSON (with the char position), text after the JSON,
    a non-object, a missing or empty ``"name"``, non-object arguments, an empty block, unbalanced
    tags, and, when ``tools`` are given, a name that is not one of them. The calls are all or
    nothing: on an error the message keeps the raw text and carries no ``tool_calls``.
    """

    name = "hermes"

    def render_tools_prompt(self, tools: Sequence[dict[str, Any]]) -> str:
        """The system-prompt block: the tools' schemas in ``<tools>`` and the call format.

        Example:
            >>> tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
            >>> '"name": "add"' in HERMES.render_tools_prompt(tools)
            True
        """
        schemas = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
        return _INSTRUCTION.format(schemas=schemas)

    def render_call(self, call: ToolCall) -> str:
        """One tool call as a ``<tool_call>`` block (arguments re-read as JSON when they parse).

        Example:
            >>> from rk_agent.types import FunctionCall
            >>> print(HERMES.render_call(ToolCall(id="c", function=FunctionCall(name="add",
            ...     arguments='{"a": 1}'))))
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

    def render_result(self, message: Message) -> str:
        """A tool result as a ``<tool_response>`` block."""
        return f"<tool_response>\n{message.text}\n</tool_response>"

    def render_messages(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None
    ) -> list[dict[str, str]]:
        """A conversation as plain turns: the tools block appended to the first system message
        (or made one), calls as ``<tool_call>`` blocks after the assistant's text, consecutive
        results as one user turn of ``<tool_response>`` blocks; ``developer`` counts as
        ``system``.

        Example:
            >>> msgs = [Message(role="user", content="1+2?"),
            ...         Message(role="tool", content="3", tool_call_id="call_0")]
            >>> [m["role"] for m in HERMES.render_messages(msgs, None)]
            ['user', 'user']
        """
        prompt = self.render_tools_prompt(tools) if tools else None
        return text_messages(messages, prompt, self.render_call, self.render_result)

    def parse(self, text: str, tools: Sequence[dict[str, Any]] | None = None) -> ParsedReply:
        """Read a reply: ``<tool_call>`` blocks become ``tool_calls``; never raises.

        Example:
            >>> r = HERMES.parse('Let me add. <tool_call>{"name": "add"}</tool_call>')
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

    def feedback(self, parse_error: str) -> str:
        """The text shown to the model after a malformed call.

        Example:
            >>> HERMES.feedback('tool call 1: missing "name"').splitlines()[0]
            'Your tool call could not be read: tool call 1: missing "name"'
        """
        return (
            f"Your tool call could not be read: {parse_error}\n"
            f'Call a tool with {TOOL_CALL_OPEN}{{"name": "<tool-name>", "arguments": {{...}}}}'
            f"{TOOL_CALL_CLOSE}, or answer in plain text."
        )

    def __repr__(self) -> str:
        return "HermesFormat()"


HERMES = HermesFormat()
"""The Hermes format (``get_tool_call_format("hermes")``)."""


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


def _decode_block(body: str, known: list[str] | None) -> tuple[list[ToolCall], str | None]:
    """One block's body -> tool calls (a block may hold a JSON list of calls) or an error."""
    source = strip_fence(body.strip())
    if not source:
        return [], "empty <tool_call></tool_call> block"
    value, end, error = decode_json(source)
    if error is not None:
        return [], error
    if source[end:].strip():
        return [], f"unexpected text after the JSON at char {end}: {source[end:][:80]!r}"
    items = value if isinstance(value, list) else [value]
    if not items:
        return [], "an empty list of calls"
    calls: list[ToolCall] = []
    for item in items:
        call, problem = decode_call(item, known)
        if call is None:
            return [], problem
        calls.append(call)
    return calls, None
