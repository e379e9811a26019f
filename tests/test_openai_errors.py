"""`rk_agent.openai_errors`, the one boundary for ``openai`` SDK errors (exercised over HTTP by
the policy and judge tests)."""

from __future__ import annotations

import httpx
import openai
import pytest

from rk_agent.errors import EndpointError
from rk_agent.openai_errors import Endpoint, retry_after_s, translate_error
from rk_agent.retry import RetryPolicy

KEY = "sk-test-0123456789abcdef"
ENDPOINT = Endpoint(url="http://127.0.0.1:9/v1", model="m", key=KEY, key_source="argument")


def _status_error(status: int, body: str, headers: dict[str, str] | None = None) -> Exception:
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    response = httpx.Response(status, text=body, headers=headers, request=request)
    return openai.APIStatusError(body, response=response, body=None)


def test_statuses_follow_the_retry_policy() -> None:
    conflict = _status_error(409, "busy")
    assert translate_error(conflict, ENDPOINT).retryable  # the default model-endpoint policy
    strict = RetryPolicy(statuses=frozenset({429}))
    assert not translate_error(conflict, ENDPOINT, strict).retryable


def test_the_key_and_bearer_tokens_never_reach_the_message() -> None:
    echoed = _status_error(401, f"bad key {KEY}; sent Authorization: Bearer {KEY}")
    error = translate_error(echoed, ENDPOINT)
    assert KEY not in str(error) and "Bearer ***" in str(error)
    assert str(error).endswith("(check the API key; it came from: argument)")


def test_retry_after_is_read_back_from_the_translated_error() -> None:
    exc = _status_error(429, "slow down", {"Retry-After": "3"})
    with pytest.raises(EndpointError) as info:
        raise translate_error(exc, ENDPOINT) from exc
    assert retry_after_s(info.value) == 3.0
