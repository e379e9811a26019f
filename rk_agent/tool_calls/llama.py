"""The Llama 3 JSON tool-call format: the reply is ``{"name": ..., "parameters": {...}}``.

Why this one as the second format: it is what Meta's own chat templates for Llama 3.1, 3.2 and
3.3 Instruct teach (their "JSON based tool calling": the tools are listed as JSON schemas and the
model answers with ``{"name": function name, "parameters": dictionary of argument name and its
value}``, optionally after the ``<|python_tag|>`` token, and the turn ends), so every Llama 3.x
Instruct model and the many fine-tunes that keep its template write it with no custom template.
The servers read it as plain text too: vLLM's ``--tool-call-parser llama3_json`` (also
registered as ``llama4_json``), SGLang's and LMDeploy's ``llama3`` parsers, which accept the
optional ``<|python_tag|>`` and several objects separated by ``;``. Mistral's ``[TOOL_CALLS]``
was the other candidate; it was not picked because ``[TOOL_CALLS]`` is a control token that only
Mistral's own tokenizer (mistral-common) renders and reads, and its text changed between
tokenizer versions (a JSON list after the token up to v3; ``[TOOL_CALLS]name[ARGS]{...}`` from
v11), so it is not one stable text format.

A call looks like this (``<|python_tag|>`` optional, text before it allowed)::

    <|python_tag|>{"name": "add", "parameters": {"a": 1, "b": 2}}

Results go back as a user turn of ``Tool result:`` blocks (Meta's template puts them in an
``ipython`` turn, which a plain text conversation does not have).

Main names:
    Llama3JsonFormat: the format (`rk_agent.tool_calls.ToolCallFormat`).
    LLAMA3_JSON: its instance (``get_tool_call_format("llama3_json")``).
    PYTHON_TAG: Llama 3's ``<|python_tag|>`` token.

Example:
    >>> reply = LLAMA3_JSON.parse('{"name": "add", "parameters": {"a": 1, "b": 2}}')
    >>> reply.message.tool_calls[0].function.arguments, reply.parse_error
    ('{"a": 1, "b": 2}', None)
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

__all__ = ["LLAMA3_JSON", "PYTHON_TAG", "Llama3JsonFormat"]

PYTHON_TAG = "<|python_tag|>"
_SHAPE = '{"name": ..., "parameters": {...}}'
# Where a call starts without <|python_tag|>: a line that opens an object whose first key is
# "name" (or "type": "function" then "name", as Llama 3.2 often writes), maybe inside a list or
# after a code-fence line. Single quotes count too: such a call is malformed, and the model
# should hear so rather than have it taken as its answer.
_CALL_START = re.compile(
    r"^[ \t]*(?:```[A-Za-z0-9_-]*[ \t]*\n[ \t]*)?"  # an optional fence line
    r"""\[?\s*\{\s*(?:["']type["']\s*:\s*["']function["']\s*,\s*)?["']name["']\s*:""",
    re.MULTILINE,
)
_END_TOKENS = re.compile(r"(?:\s*<\|(?:eom_id|eot_id|end_of_text)\|>)+\s*$")
_SEPARATORS = " \t\r\n;,"

_INSTRUCTION = """\
# Tools

You can call the functions below to help with the task. Each function is described by a JSON schema:

{schemas}

To call a function, reply with only a JSON object in the format {{"name": function name, "parameters": dictionary of argument name and its value}}, for example:
{{"name": "<function-name>", "parameters": {{"<argument-name>": <value>}}}}
Do not use variables. To call several functions, write one JSON object per line. The results come back in a user turn of "Tool result:" blocks. When you have the final answer, reply in plain text without a function call."""  # noqa: E501  # a prompt reads best with one sentence per line


class Llama3JsonFormat:
    """``{"name": ..., "parameters": {...}}`` as the reply (Llama 3.1/3.2/3.3 Instruct).

    A reply holds a call when it contains ``<|python_tag|>`` (the call follows it) or a line
    that starts a JSON object whose first key is ``"name"``; the text before is the content.
    Tolerated: a code fence around the call(s), ``"arguments"`` for ``"parameters"``,
    arguments sent as a JSON string, a ``"type": "function"`` key, a JSON list of calls,
    several calls separated by newlines, ``;`` or ``,`` (with or without ``<|python_tag|>``
    each), and Llama's end tokens (``<|eom_id|>``, ``<|eot_id|>``) left at the end.

    A parse error is reported for: invalid JSON, including a call cut off mid-object (with the
    char position), text after the call(s), a non-object, a missing or empty ``"name"``,
    non-object arguments, nothing after ``<|python_tag|>``, and, when ``tools`` are given, a name
    that is not one of them. The calls are all or nothing: on an error the message keeps the raw
    text and carries no ``tool_calls``.

    A plain answer that has a line starting with ``{"name":`` is read as a call: the format has
    no other way to tell them apart.
    """

    name = "llama3_json"

    def render_tools_prompt(self, tools: Sequence[dict[str, Any]]) -> str:
        """The system-prompt block: each tool's schema (indented JSON) and the call format.

        Example:
            >>> tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
            >>> '"name": "add"' in LLAMA3_JSON.render_tools_prompt(tools)
            True
        """
        schemas = "\n\n".join(json.dumps(tool, indent=4, ensure_ascii=False) for tool in tools)
        return _INSTRUCTION.format(schemas=schemas)

    def render_call(self, call: ToolCall) -> str:
        """One call as ``{"name": ..., "parameters": {...}}`` (no ``<|python_tag|>``).

        Example:
            >>> from rk_agent.types import FunctionCall
            >>> LLAMA3_JSON.render_call(ToolCall(id="c", function=FunctionCall(name="add",
            ...     arguments='{"a": 1}')))
            '{"name": "add", "parameters": {"a": 1}}'
        """
        try:
            arguments: Any = json.loads(call.function.arguments)
        except ValueError:
            arguments = call.function.arguments  # broken JSON is shown as the string it was
        return json.dumps({"name": call.function.name, "parameters": arguments}, ensure_ascii=False)

    def render_result(self, message: Message) -> str:
        """A tool result as a ``Tool result:`` block."""
        return f"Tool result:\n{message.text}"

    def render_messages(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None
    ) -> list[dict[str, str]]:
        """A conversation as plain turns: the tools block appended to the first system message
        (or made one), calls as JSON objects on lines of their own after the assistant's text,
        consecutive results as one user turn of ``Tool result:`` blocks; ``developer`` counts
        as ``system``.
        """
        prompt = self.render_tools_prompt(tools) if tools else None
        return text_messages(
            messages, prompt, self.render_call, self.render_result, results_separator="\n\n"
        )

    def parse(self, text: str, tools: Sequence[dict[str, Any]] | None = None) -> ParsedReply:
        """Read a reply: the call(s) at its end become ``tool_calls``; never raises.

        Example:
            >>> r = LLAMA3_JSON.parse('Let me add.<|python_tag|>{"name": "add"}<|eom_id|>')
            >>> r.message.content, r.message.tool_calls[0].function.arguments
            ('Let me add.', '{}')
        """
        body = _END_TOKENS.sub("", text)
        tag = body.find(PYTHON_TAG)
        if tag != -1:
            before, source = body[:tag], body[tag + len(PYTHON_TAG) :]
        else:
            start = _CALL_START.search(body)
            if start is None:
                return ParsedReply(Message(role="assistant", content=text))
            before, source = body[: start.start()], body[start.start() :]
        known = tool_names(tools) if tools is not None else None
        calls, error = _decode_calls(source, known)
        if error is not None:
            return ParsedReply(Message(role="assistant", content=text), parse_error=error)
        return ParsedReply(
            Message(role="assistant", content=before.strip() or None, tool_calls=calls)
        )

    def feedback(self, parse_error: str) -> str:
        """The text shown to the model after a malformed call.

        Example:
            >>> LLAMA3_JSON.feedback('tool call 1: missing "name"').splitlines()[0]
            'Your function call could not be read: tool call 1: missing "name"'
        """
        return (
            f"Your function call could not be read: {parse_error}\n"
            'Call a function with only a JSON object, {"name": "<function-name>", '
            '"parameters": {...}}, or answer in plain text.'
        )

    def __repr__(self) -> str:
        return "Llama3JsonFormat()"


LLAMA3_JSON = Llama3JsonFormat()
"""The Llama 3 JSON format (``get_tool_call_format("llama3_json")``)."""


def _unfence(source: str) -> str:
    """``source`` without a code fence around it; an unclosed fence loses its opening line."""
    source = source.strip()
    if not source.startswith("```"):
        return source
    inner = strip_fence(source)
    if inner is not source:
        return inner
    return source.partition("\n")[2].strip()


def _decode_calls(source: str, known: list[str] | None) -> tuple[list[ToolCall], str | None]:
    """The JSON call(s) in ``source`` (all of it) as tool calls, or what is wrong."""
    source = _unfence(source)
    items: list[Any] = []
    position = 0
    while True:
        while position < len(source) and source[position] in _SEPARATORS:
            position += 1
        if source.startswith(PYTHON_TAG, position):
            position += len(PYTHON_TAG)
            continue
        if position >= len(source):
            break
        if source[position] not in "{[":
            rest = source[position:][:80]
            return [], (
                f"unexpected text after the call at char {position}: {rest!r}; a reply that "
                "calls a function holds only the call(s)"
            )
        value, end, error = decode_json(source[position:])
        if error is not None:
            return [], f"tool call {len(items) + 1}: {error}"
        items.extend(value if isinstance(value, list) else [value])
        position += end
    if not items:
        return [], f"no call where one starts: expected {_SHAPE}"
    calls: list[ToolCall] = []
    for index, item in enumerate(items, start=1):
        call, problem = decode_call(item, known, shape=_SHAPE)
        if call is None:
            return [], f"tool call {index}: {problem}"
        calls.append(call)
    return calls, None
