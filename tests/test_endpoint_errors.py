"""`rk_agent.endpoint_errors`: how a model endpoint's failures are worded (exercised over HTTP
by the model client, policy and judge tests)."""

from __future__ import annotations

from rk_agent.endpoint_errors import Endpoint, status_error
from rk_agent.retry import RetryPolicy

KEY = "sk-test-0123456789abcdef"
ENDPOINT = Endpoint(url="http://127.0.0.1:9/v1", model="m", key=KEY, key_source="argument")


def test_statuses_follow_the_retry_policy() -> None:
    assert status_error(409, "busy", ENDPOINT).retryable  # the default model-endpoint policy
    strict = RetryPolicy(statuses=frozenset({429}))
    assert not status_error(409, "busy", ENDPOINT, strict).retryable


def test_the_key_and_bearer_tokens_never_reach_the_message() -> None:
    error = status_error(401, f"bad key {KEY}; sent Authorization: Bearer {KEY}", ENDPOINT)
    assert KEY not in str(error) and "Bearer ***" in str(error)
    assert str(error).endswith("(check the API key; it came from: argument)")
