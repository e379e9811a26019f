"""What the stub server answers: scripted replies, completion bodies and injected faults.

Main names:
    Fault: one injected failure (an HTTP status, a dropped connection, a hang, a broken body).
    ReplySpec, ReplyFn: a scripted reply, and a function that computes one from the request.
    completion_body: the chat-completion JSON for a reply.
    call_first_tool_then_answer: a reply function that plays a tool-using model.

A reply is a string (the text), a dict (an assistant message: ``content``, ``tool_calls`` in
OpenAI form or short form ``{"name": ..., "arguments": {...}}``, optional ``finish_reason``,
``usage``, ``reasoning_content``; or a whole response body with ``choices``), a `Message`, or a
`Fault`. The server itself is `rk_agent.testing.stub_server.StubServer`.

Example:
    >>> body = completion_body({"messages": []}, {"tool_calls": [{"name": "f"}]}, model="m")
    >>> body["choices"][0]["finish_reason"], body["choices"][0]["message"]["tool_calls"][0]["type"]
    ('tool_calls', 'function')
"""

from __future__ import annotations

import functools
import itertools
import json
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Literal

from rk_agent.types import Message

__all__ = [
    "Fault",
    "FaultKind",
    "ReplyFn",
    "ReplySpec",
    "call_first_tool_then_answer",
    "completion_body",
    "error_body",
]

FaultKind = Literal["http", "drop", "hang", "malformed"]


@dataclass(frozen=True)
class Fault:
    """One injected failure. Build it with the class methods.

    Attributes:
        kind: ``"http"`` (an error status with an OpenAI-style error body), ``"drop"`` (close the
            connection without a response), ``"hang"`` (wait ``hang_s``, then drop) or
            ``"malformed"`` (a 200 whose body is not valid JSON).
        status: the HTTP status of an ``"http"`` fault.
        message: the error message in the body.
        retry_after: the ``Retry-After`` header: seconds, or an HTTP date string.
        hang_s: how long a hang lasts.
        code: the ``error.code`` in the body (e.g. ``"context_length_exceeded"``).
        headers: more response headers, e.g. ``(("retry-after-ms", "300"),)``.
    """

    kind: FaultKind
    status: int = 500
    message: str = "injected failure"
    retry_after: float | str | None = None
    hang_s: float = 60.0
    code: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def http(
        cls,
        status: int,
        message: str | None = None,
        *,
        retry_after: float | str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Fault:
        """An error response, e.g. ``Fault.http(503)`` or ``Fault.http(429, retry_after=0.2)``."""
        text = message or f"injected {status} {HTTPStatus(status).phrase}"
        extra = tuple((headers or {}).items())
        return cls("http", status=status, message=text, retry_after=retry_after, headers=extra)

    @classmethod
    def rate_limit(cls, retry_after: float | str | None = None) -> Fault:
        """A 429 "rate limit reached", with ``Retry-After`` when given."""
        return cls(
            "http",
            status=429,
            message="Rate limit reached for requests. Please try again later.",
            retry_after=retry_after,
            code="rate_limit_exceeded",
        )

    @classmethod
    def context_overflow(cls, limit: int = 2048) -> Fault:
        """A 400 saying the conversation does not fit the context window (OpenAI's wording)."""
        return cls(
            "http",
            status=400,
            message=f"This model's maximum context length is {limit} tokens. However, your "
            "messages resulted in more tokens. Please reduce the length of the messages.",
            code="context_length_exceeded",
        )

    @classmethod
    def drop(cls) -> Fault:
        """Close the connection without sending a response."""
        return cls("drop")

    @classmethod
    def hang(cls, seconds: float = 60.0) -> Fault:
        """Send nothing for ``seconds`` (past the client's timeout), then close the connection."""
        return cls("hang", hang_s=seconds)

    @classmethod
    def malformed(cls) -> Fault:
        """A ``200 OK`` whose JSON body is cut off."""
        return cls("malformed", status=200)


ReplySpec = str | dict[str, Any] | Message | Fault
"""A scripted reply: text, an assistant message (dict or `Message`), a whole body, or a `Fault`."""

ReplyFn = Callable[[dict[str, Any]], ReplySpec | Awaitable[ReplySpec]]
"""``reply(request_json)``, sync or async, returns a `ReplySpec`."""


_ids = itertools.count()


def error_body(message: str, status: int, code: str | None = None) -> bytes:
    """An OpenAI-style error body: ``{"error": {"message", "type", "param", "code"}}``."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status == 429:
        kind = "rate_limit_error"
    error = {"message": message, "type": kind, "param": None, "code": code}
    return json.dumps({"error": error}).encode()


def _words(text: Any) -> list[str]:
    if isinstance(text, str):
        return text.split()
    if isinstance(text, list):  # content parts
        return [w for part in text if isinstance(part, dict) for w in _words(part.get("text"))]
    return []


@functools.lru_cache(maxsize=1024)
def _word_count(text: str) -> int:
    """Words in a message's text (the same system prompt comes with every request)."""
    return len(text.split())


def next_id() -> int:
    """A fresh number for response and tool-call ids."""
    return next(_ids)


def word_token_ids(words: list[str]) -> list[int]:
    """Stand-in token ids for replies without a tokenizer: one per word (CRC32 of the word)."""
    return [zlib.crc32(w.encode()) % 50_000 for w in words]


def tool_call_dict(call: dict[str, Any]) -> dict[str, Any]:
    """OpenAI form from OpenAI form or short form ``{"name", "arguments"}``."""
    function = dict(call["function"]) if "function" in call else dict(call)
    function.pop("id", None)
    call_id = call.get("id") or f"call_{next_id()}"
    if not isinstance(function.get("arguments"), str):
        function["arguments"] = json.dumps(function.get("arguments") or {})
    return {"id": call_id, "type": "function", "function": function}


def completion_body(
    request: dict[str, Any], spec: str | dict[str, Any] | Message, *, model: str
) -> dict[str, Any]:
    """The chat-completion JSON body answering ``request`` with the reply ``spec``.

    Token counts are words; with ``logprobs`` or vLLM's ``return_token_ids`` in the request,
    per-word log-probabilities and token ids (CRC32 of the word) are added.
    """
    head = {
        "id": f"chatcmpl-stub-{next_id()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model") or model,
    }
    if isinstance(spec, dict) and "choices" in spec:
        return {**head, **spec}
    if isinstance(spec, Message):
        message: dict[str, Any] = spec.to_openai()
    elif isinstance(spec, str):
        message = {"content": spec}
    else:
        message = dict(spec)
    finish_reason = message.pop("finish_reason", None)
    usage = message.pop("usage", None)
    message["role"] = "assistant"
    message.setdefault("content", None)
    if message.get("tool_calls"):
        message["tool_calls"] = [tool_call_dict(call) for call in message["tool_calls"]]
    words = _words(message["content"])
    for call in message.get("tool_calls") or ():
        words += [call["function"]["name"], *call["function"]["arguments"].split()]
    choice: dict[str, Any] = {
        "index": 0,
        "message": message,
        "finish_reason": finish_reason or ("tool_calls" if message.get("tool_calls") else "stop"),
        "logprobs": None,
    }
    contents = [m.get("content") for m in request["messages"] if isinstance(m, dict)]
    # Counted from a cache; the words themselves are made only when token ids are sent.
    prompt_count = sum(_word_count(c) if isinstance(c, str) else len(_words(c)) for c in contents)
    if request.get("logprobs"):
        choice["logprobs"] = {
            "content": [
                {"token": w, "logprob": -0.125 * (i % 4), "bytes": None, "top_logprobs": []}
                for i, w in enumerate(words)
            ]
        }
    body: dict[str, Any] = {
        **head,
        "choices": [choice],
        "usage": usage
        or {
            "prompt_tokens": prompt_count,
            "completion_tokens": len(words),
            "total_tokens": prompt_count + len(words),
        },
    }
    if request.get("return_token_ids"):  # vLLM's extension
        choice["token_ids"] = word_token_ids(words)
        body["prompt_token_ids"] = word_token_ids([w for c in contents for w in _words(c)])
    return body


def call_first_tool_then_answer(answer: str = "ok", tool_turns: int = 1) -> ReplyFn:
    """A reply function that plays a tool-using model.

    While tools are offered and the conversation has fewer than ``tool_turns`` ``tool``
    messages after its last user message, it calls the first offered tool with placeholder
    arguments built from the tool's schema; then it answers ``answer``. An episode against it
    takes ``tool_turns + 1`` turns.

    Example:
        >>> reply = call_first_tool_then_answer("done")
        >>> tools = [{"type": "function", "function": {"name": "add", "parameters": {
        ...     "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]
        >>> reply({"messages": [{"role": "user", "content": "1+1?"}], "tools": tools})
        {'tool_calls': [{'name': 'add', 'arguments': {'a': 1}}]}
    """
    placeholders = {
        "string": "x",
        "integer": 1,
        "number": 1.0,
        "boolean": True,
        "array": [],
        "object": {},
    }

    def reply(request: dict[str, Any]) -> ReplySpec:
        tools = request.get("tools") or []
        messages = request.get("messages") or []
        roles = [m.get("role") for m in messages if isinstance(m, dict)]
        last_user = max((i for i, r in enumerate(roles) if r == "user"), default=-1)
        if not tools or roles[last_user + 1 :].count("tool") >= tool_turns:
            return answer
        function = tools[0].get("function", {})
        schema = function.get("parameters") or {}
        properties = schema.get("properties") or {}
        arguments = {
            name: placeholders.get(properties.get(name, {}).get("type"), "x")
            for name in schema.get("required", [])
        }
        return {"tool_calls": [{"name": function.get("name", "tool"), "arguments": arguments}]}

    return reply
