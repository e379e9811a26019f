"""The one boundary where ``openai`` SDK (and its HTTP library's) errors become ours.

`translate_error` turns any failure of a chat-completions request into an `EndpointError` with
``status`` and ``retryable`` set, or a `ContextOverflowError` when the server says the
conversation does not fit; the message carries the server's own message, never the API key.
`status_error` words an HTTP error status (with `server_message`, the server's own message from
its error body) the same way for rk-agent's own client (`rk_agent.model_client`), so a 503
reads the same whichever HTTP stack met it. `retry_after_s` reads the server's ``Retry-After``
back from a translated error, and `rejects_tools` tells whether a server refused the ``tools``
field. The users: `rk_agent.model_client`, and through it the served-model policies and the
LLM judge (`rk_agent.rewards.builtin.llm_judge`), which is why it lives below both rewards and
rollouts. Nothing in rk-agent calls the SDK any more: `translate_error` is kept for code that
does.

Main names: `Endpoint`, `translate_error`, `status_error` (with `timeout_error` and
`unreachable_error`, the same words for every HTTP stack), `server_message`, `retry_after_s`,
`rejects_tools`, `NO_KEY`.

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
    "translate_error",
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


def translate_error(
    exc: Exception, endpoint: Endpoint, retry: RetryPolicy = MODEL_ENDPOINT_RETRY
) -> EndpointError:
    """The `EndpointError` (or `ContextOverflowError`) for a failed request.

    Retryable: timeouts, connection errors, the statuses ``retry`` retries (by default 408, 409,
    429 and 5xx), and replies that are not a chat completion (a proxy's glitch). Not retryable:
    every other status, context overflow. Secrets (the key, ``Bearer`` tokens) are redacted
    from the message.
    """
    import openai

    url = endpoint.url

    def clean(text: str) -> str:
        return redact(text, [endpoint.key])[:_MAX_MESSAGE]

    if isinstance(exc, openai.APIConnectionError):  # the SDK's timeout error is one too
        cause = _root_cause(exc)
        # The aiohttp transport reports any dropped connection as a connect *timeout*; the
        # root cause (`TimeoutError`, or the HTTP library's `TimeoutException` on the sync
        # transport) tells a real timeout from a server that hung up.
        timed_out = {k.__name__ for k in type(cause).__mro__} & {"TimeoutError", "TimeoutException"}
        if isinstance(exc, openai.APITimeoutError) and (cause is exc or timed_out):
            return timeout_error(endpoint)
        return unreachable_error(cause, endpoint)
    if isinstance(exc, openai.APIStatusError):
        return status_error(exc.status_code, _sdk_server_message(exc), endpoint, retry)
    if isinstance(exc, openai.APIResponseValidationError):
        return EndpointError(
            f"{url} sent a reply that is not a chat completion: {clean(str(exc))}",
            status=exc.status_code,
            retryable=True,
            url=url,
        )
    detail = clean(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, ValueError):  # the SDK lets a broken JSON body through as is
        return EndpointError(
            f"{url} sent a body that is not JSON: {detail}", status=200, retryable=True, url=url
        )
    return EndpointError(f"{url} failed: {detail}", url=url)


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


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost exception of ``exc``'s ``__cause__`` chain (``exc`` when it has none)."""
    seen = {id(exc)}
    while exc.__cause__ is not None and id(exc.__cause__) not in seen:
        exc = exc.__cause__
        seen.add(id(exc))
    return exc


def _sdk_server_message(exc: Any) -> str:
    """The server's own message from an SDK status error."""
    found = _message_in(getattr(exc, "body", None))
    if found is not None:
        return found
    text = " ".join(exc.response.text.split())
    return text or exc.response.reason_phrase or "(empty body)"


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
