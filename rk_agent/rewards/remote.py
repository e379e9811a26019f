"""Calling a reward that runs behind an HTTP endpoint (a reward server or Fireworks).

The wire format follows reward-kit's ``POST /evaluate``: the request carries ``messages``
(OpenAI chat format), optional ``original_messages``, ``ground_truth`` and ``tools`` at the top
level and every other keyword argument under ``kwargs``; the response is an `EvaluateResult`.

Main names: `build_request`, `post_evaluate`. This is the one place where httpx errors become
`EndpointError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rk_agent.errors import EndpointError
from rk_agent.types import EvaluateResult, Message

__all__ = ["build_request", "post_evaluate"]

_TOP_LEVEL = ("messages", "original_messages", "ground_truth", "tools")


def build_request(call_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body for ``POST /evaluate`` from a reward call's keyword arguments."""
    body: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in call_kwargs.items():
        if key in ("messages", "original_messages") and value is not None:
            body[key] = [Message.coerce(m).to_openai() for m in value]
        elif key in _TOP_LEVEL:
            body[key] = value
        else:
            extra[key] = value
    if extra:
        body["kwargs"] = extra
    return body


def post_evaluate(
    endpoint: str,
    call_kwargs: Mapping[str, Any],
    *,
    api_key: str | None = None,
    timeout: float = 30.0,
) -> EvaluateResult:
    """POST one sample to a reward endpoint and return its `EvaluateResult`.

    Raises:
        EndpointError: connection failure, timeout, a non-2xx status (with the server's
            message), or a reply that is not an `EvaluateResult`. ``retryable`` is set for
            timeouts, connection errors, 429 and 5xx. The API key never appears in the message.
    """
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.post(
            endpoint, json=build_request(call_kwargs), headers=headers, timeout=timeout
        )
    except httpx.TimeoutException as exc:
        raise EndpointError(
            f"reward endpoint {endpoint} did not answer within {timeout:g} s.",
            retryable=True,
            url=endpoint,
        ) from exc
    except httpx.HTTPError as exc:
        raise EndpointError(
            f"cannot reach reward endpoint {endpoint}: {type(exc).__name__}: {exc}. Is the "
            "reward server running, and is the URL right?",
            retryable=True,
            url=endpoint,
        ) from exc
    if response.status_code >= 400:
        raise EndpointError(
            f"reward endpoint {endpoint} answered {response.status_code}: "
            f"{_server_message(response)}",
            status=response.status_code,
            retryable=response.status_code == 429 or response.status_code >= 500,
            url=endpoint,
        )
    try:
        return EvaluateResult.model_validate_json(response.content)
    except ValueError as exc:
        raise EndpointError(
            f"reward endpoint {endpoint} answered with something that is not an EvaluateResult: "
            f"{response.text[:200]!r}",
            status=response.status_code,
            url=endpoint,
        ) from exc


def _server_message(response: Any) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300] or "(empty body)"
    if isinstance(data, dict):
        for key in ("detail", "error", "message"):
            if key in data:
                return str(data[key])[:300]
    return str(data)[:300]
