"""How a model endpoint's failures are worded: the `EndpointError`s of OpenAI-compatible servers.

`status_error` turns an HTTP error status (with `server_message`, the server's own message
from its error body) into an `EndpointError` with ``status`` and ``retryable`` set, or a
`ContextOverflowError` when the server says the conversation does not fit; the message carries
the server's own words, never the API key. `timeout_error` and `unreachable_error` word the
failures without a status. `retry_after_s` reads the server's ``Retry-After`` back from such
an error, and `rejects_tools` tells whether a server refused the ``tools`` field. The users:
`rk_agent.model_client`, and through it the served-model policies and the LLM judge
(`rk_agent.rewards.builtin.llm_judge`), which is why it lives below both rewards and rollouts.

Main names: `Endpoint`, `status_error`, `timeout_error`, `unreachable_error`,
`server_message`, `retry_after_s`, `rejects_tools`, `NO_KEY`.

Example:
    >>> endpoint = Endpoint(url="http://127.0.0.1:8000/v1", model="m", key="sk-0123456789")
    >>> endpoint
    Endpoint(url='http://127.0.0.1:8000/v1', model='m')
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rk_agent.errors import ContextOverflowError, EndpointError
from rk_agent.retry import MODEL_ENDPOINT_RETRY, RetryPolicy, server_wait
from rk_agent.secrets import redact

__all__ = [
    "NO_KEY",
    "Endpoint",
    "rejects_tools",
    "retry_after_s",
    "server_message",
    "status_error",
    "timeout_error",
    "unreachable_error",
]

NO_KEY = "EMPTY"
"""The key sent to servers that check none (what vLLM, SGLang and Ollama expect)."""

_CONTEXT_OVERFLOW = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long"
    r"|input is too long|max_model_len|exceeds the model'?s? (max|context)",
    re.IGNORECASE,
)
_NO_TOOL_SUPPORT = re.compile(
    r"(does not|doesn't|not) support(ed)?( function calling| tools?)|tools? (is|are) not supported"
    r"|tool[ _]choice|tool-call-parser|tools param|--jinja",
    re.IGNORECASE,
)
_MAX_MESSAGE = 500


@dataclass(frozen=True)
class Endpoint:
    """What an error message may say about the endpoint (never the key itself).

    Attributes:
        url: the base URL.
        model: the model id.
        key: the API key, only to redact it from messages.
        key_source: where the key came from (``"FIREWORKS_API_KEY"``, ``"argument"``, ...).
        timeout_s: the per-request timeout.
        model_hint: appended to a 404 (e.g. how Fireworks model names look).
    """

    url: str
    model: str
    key: str = NO_KEY
    key_source: str = "none"
    timeout_s: float = 0.0
    model_hint: str | None = None

    def __repr__(self) -> str:
        return f"Endpoint(url={self.url!r}, model={self.model!r})"


def status_error(
    status: int, message: str, endpoint: Endpoint, retry: RetryPolicy = MODEL_ENDPOINT_RETRY
) -> EndpointError:
    """The `EndpointError` for an HTTP error status with the server's ``message``: a
    `ContextOverflowError` when a 400/413/422 says the conversation does not fit; retryable as
    ``retry`` says; a 404 gets the endpoint's model hint and a 401/403 where the key came from.
    The key is redacted from the message."""
    url = endpoint.url
    text = redact(message, [endpoint.key])[:_MAX_MESSAGE]
    if status in (400, 413, 422) and _CONTEXT_OVERFLOW.search(text):
        return ContextOverflowError(
            f"{url}: HTTP {status}: the conversation does not fit the context window of "
            f"{endpoint.model!r}: {text}",
            status=status,
            url=url,
        )
    line = f"{url}: HTTP {status}: {text}"
    if status == 404 and endpoint.model_hint:
        line += f" ({endpoint.model_hint})"
    if status in (401, 403):
        line += f" (check the API key; it came from: {endpoint.key_source})"
    return EndpointError(line, status=status, retryable=retry.retries_status(status), url=url)


def timeout_error(endpoint: Endpoint) -> EndpointError:
    """The retryable `EndpointError` for a server that did not answer in time."""
    return EndpointError(
        f"{endpoint.url} did not answer within {endpoint.timeout_s:g}s (timeout)",
        retryable=True,
        url=endpoint.url,
    )


def unreachable_error(cause: BaseException, endpoint: Endpoint) -> EndpointError:
    """The retryable `EndpointError` for a connection that failed (refused, dropped) with
    ``cause``; the key is redacted."""
    detail = redact(f"{type(cause).__name__}: {cause}", [endpoint.key])[:_MAX_MESSAGE]
    return EndpointError(
        f"could not reach {endpoint.url}: {detail}", retryable=True, url=endpoint.url
    )


def server_message(text: str, reason: str | None = None) -> str:
    """The server's own message in an error body: ``error.message`` (OpenAI, vLLM),
    ``detail`` (FastAPI), ``message``, or the body's text on one line; ``reason`` (the status
    line's phrase) when the body is empty.

    Example:
        >>> server_message('{"error": {"message": "Model not found", "code": 404}}')
        'Model not found'
    """
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    found = _message_in(body)
    if found is not None:
        return found
    return " ".join(text.split()) or reason or "(empty body)"


def rejects_tools(error: EndpointError) -> bool:
    """Whether the server refused the request because of its ``tools`` (no tool support)."""
    return error.status in (400, 422, 501) and bool(_NO_TOOL_SUPPORT.search(str(error)))


def retry_after_s(error: EndpointError) -> float | None:
    """The ``Retry-After`` (or ``retry-after-ms``) sent with the response behind ``error``,
    in seconds; an HTTP date counts from now. ``None`` when there is none."""
    return server_wait(error)


def _message_in(body: Any) -> str | None:
    """The message field of a decoded error body, or ``None`` when it has none."""
    if not isinstance(body, Mapping):
        return None
    error = body.get("error", body)
    if isinstance(error, str):
        return error
    if isinstance(error, Mapping):
        for key in ("message", "detail", "msg"):
            if isinstance(error.get(key), str):
                return str(error[key])
    detail = body.get("detail") or body.get("message")
    if detail is not None:
        return detail if isinstance(detail, str) else json.dumps(detail)
    return None
